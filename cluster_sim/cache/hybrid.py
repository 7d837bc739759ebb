"""The hybrid hit rule's pure parts (simulation-model §2, §4): where a request saves STATE,
and every request's resume prefix when nothing is ever evicted.

Shared by the node's request step and by policies that replay the request stream on their
own (Marconi's admission, the hindsight oracles), so neither has to import the node.
"""
from __future__ import annotations

import numpy as np

from ._lazy import LazyKernel

__all__ = ["checkpoint_positions", "unbounded_resume_prefix", "unbounded_resume_prefix_numpy"]


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


_MODES = {"last": 0, "last_and_branch": 1, "every_chunk": 2}


def _resume_prefix_loops(offsets, flat, n_chunks, has_state, mode):
    """:func:`unbounded_resume_prefix` as plain loops (``mode``: an index of ``_MODES``), which
    numba compiles; the numpy version below is its reference."""
    fa = np.zeros(n_chunks, dtype=np.bool_)
    st = np.zeros(n_chunks, dtype=np.bool_)
    n = len(offsets) - 1
    hs = np.zeros(n, dtype=np.int64)
    for i in range(n):
        a = offsets[i]
        m = offsets[i + 1] - a
        if m == 0:
            continue
        r = m
        for j in range(m):
            if not fa[flat[a + j]]:
                r = j
                break
        h = r
        if has_state and r:
            h = 0
            for j in range(r - 1, -1, -1):
                if st[flat[a + j]]:
                    h = j + 1
                    break
        hs[i] = h
        for j in range(m):
            fa[flat[a + j]] = True
        if has_state:
            if mode == 2:
                for k in range(h + 1, m + 1):
                    st[flat[a + k - 1]] = True
            else:
                if mode == 1 and h < r < m:
                    st[flat[a + r - 1]] = True
                if h < m:
                    st[flat[a + m - 1]] = True
    return hs


#: the compiled loops (numba, cached on disk), or None without numba
_resume_prefix_kernel = LazyKernel(_resume_prefix_loops, None)


def unbounded_resume_prefix(offsets: np.ndarray, flat: np.ndarray, n_chunks: int, model) -> np.ndarray:
    """Every request's resume prefix ``h`` (chunks reused) in unbounded tiers with the model's
    checkpoint mode: nothing is ever evicted or skipped. Compiled where numba imports."""
    mode = model.state_checkpoints
    if mode not in _MODES:
        raise ValueError(f"unknown state_checkpoints mode {mode!r}")
    kern = _resume_prefix_kernel()
    if kern is not None and len(offsets) > 1:
        return kern(np.ascontiguousarray(offsets), np.ascontiguousarray(flat),   # the trace's dtypes: no copy
                    int(n_chunks), bool(model.has_state), _MODES[mode])
    return unbounded_resume_prefix_numpy(offsets, flat, n_chunks, model)


def unbounded_resume_prefix_numpy(offsets: np.ndarray, flat: np.ndarray, n_chunks: int, model) -> np.ndarray:
    """:func:`unbounded_resume_prefix` in numpy, one request at a time (the reference)."""
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
