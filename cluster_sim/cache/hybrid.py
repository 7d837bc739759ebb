"""The hybrid hit rule's pure parts (simulation-model §2, §4): where a request saves STATE,
and every request's resume prefix when nothing is ever evicted.

Shared by the node's request step and by policies that replay the request stream on their
own (Marconi's admission, the hindsight oracles), so neither has to import the node.
"""
from __future__ import annotations

import numpy as np

__all__ = ["checkpoint_positions", "unbounded_resume_prefix"]


def checkpoint_positions(mode: str, h: int, r: int, m: int) -> list[int]:
    """1-based chunk positions where a request saves STATE (simulation-model §2)."""
    if m == 0:
        return []
    if mode == "last":
        return [m] if h < m else []
    if mode == "last_and_branch":
        out = []
        if r > h and r < m:
            out.append(r)          # branch point: deepest resident FA without STATE
        if h < m:
            out.append(m)
        return out
    if mode == "every_chunk":
        return list(range(h + 1, m + 1))
    raise ValueError(f"unknown state_checkpoints mode {mode!r}")


def unbounded_resume_prefix(offsets: np.ndarray, flat: np.ndarray, n_chunks: int, model) -> np.ndarray:
    """Every request's resume prefix ``h`` (chunks reused) in unbounded tiers with the model's
    checkpoint mode: nothing is ever evicted or skipped."""
    fa_seen = np.zeros(n_chunks, dtype=bool)
    st_seen = np.zeros(n_chunks, dtype=bool)
    has_state = model.has_state
    mode = model.state_checkpoints
    n = len(offsets) - 1
    hs = np.zeros(n, dtype=np.int64)
    for i in range(n):
        path = flat[offsets[i]:offsets[i + 1]]
        m = len(path)
        if not m:
            continue
        seen = fa_seen[path]
        r = m if seen.all() else int(np.argmin(seen))
        if has_state and r:
            w = np.flatnonzero(st_seen[path[:r]])
            h = int(w[-1]) + 1 if len(w) else 0
        else:
            h = r
        hs[i] = h
        fa_seen[path] = True
        if has_state:
            for k in checkpoint_positions(mode, h, r, m):
                st_seen[path[k - 1]] = True
    return hs
