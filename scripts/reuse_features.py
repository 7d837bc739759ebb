#!/usr/bin/env python
"""Which per-chunk features predict reuse? (printed, never asserted; issue: Gandalf)

Policy-independent: every chunk reference of the trace (request i touches chunk c at
time t) is labelled *reused* if a later request touches c within ``--window`` seconds
(and *ever* reused, separately). For each feature known at that moment, the script
prints its ROC AUC for the label (0.5 = no signal, 1 = perfect) and the share of
references it would keep out of the SSD while still keeping 90% of the reused ones —
the write cut an admission rule on that feature alone could buy at that recall.

Features:

* ``hits``        — earlier requests that touched c (Gandalf's per-object count);
* ``rate``        — Gandalf's smoothed rate (hits + r0·T0)/(t − t_first + T0), τ = T0 = ``--tau``;
* ``gap_prev``    — seconds since c was last touched (negated: short gaps predict reuse);
* ``depth``       — position of c in the request (deeper = longer context);
* ``from_tail``   — chunks between c and the request's last chunk (negated);
* ``is_tail``     — c is the request's last chunk;
* ``sess_turns``  — requests of c's session so far (traces with sessions only);
* ``sess_gap``    — seconds since the session's previous request (negated; sessions only).

    python scripts/reuse_features.py --workload mooncake --chunk-tokens 512
    python scripts/reuse_features.py --workload claude_code --window 300
"""
from __future__ import annotations

import argparse

import numpy as np

import cluster_sim
from cluster_sim.api import prepare
from cluster_sim.config import SimConfig
from cluster_sim.study import shared_trace_overrides


def auc(score: np.ndarray, label: np.ndarray) -> float:
    """ROC AUC by ranks (ties get their mean rank)."""
    n1 = int(label.sum())
    n0 = len(label) - n1
    if n1 == 0 or n0 == 0:
        return float("nan")
    order = np.argsort(score, kind="mergesort")
    s = score[order]
    ranks = np.empty(len(s))
    # mean rank per run of ties
    change = np.flatnonzero(np.diff(s)) + 1
    starts = np.concatenate([[0], change])
    ends = np.concatenate([change, [len(s)]])
    for a, b in zip(starts.tolist(), ends.tolist()):
        ranks[a:b] = (a + b - 1) / 2.0 + 1
    r = np.empty(len(s))
    r[order] = ranks
    return float((r[label].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def cut_at_recall(score: np.ndarray, label: np.ndarray, recall: float = 0.9) -> float:
    """Share of all references scored below the threshold that keeps ``recall`` of the reused ones."""
    pos = np.sort(score[label])
    if not len(pos):
        return float("nan")
    thr = pos[int(np.floor((1 - recall) * len(pos)))]
    return float((score < thr).mean())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workload", default="mooncake")
    ap.add_argument("--chunk-tokens", default="512")
    ap.add_argument("--window", type=float, default=600.0, help="reuse within this many seconds")
    ap.add_argument("--tau", type=float, default=600.0)
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--until-s", type=float, default=None)
    args = ap.parse_args()
    ov = [f"workload={args.workload}", f"cache.chunk_tokens={args.chunk_tokens}"]
    ov += shared_trace_overrides(args.workload)
    if args.limit:
        ov.append(f"workload.limit_requests={args.limit}")
    if args.until_s:
        ov.append(f"workload.until_s={args.until_s}")
    tr, _, _ = prepare(SimConfig.from_mapping(cluster_sim.compose(ov)))
    n = tr.n_requests
    lens = np.diff(tr.offsets)
    req = np.repeat(np.arange(n), lens)
    t = tr.arrival_s[req]
    c = tr.flat
    pos = np.arange(len(c)) - tr.offsets[req]              # 0-based position in the request
    from_tail = lens[req] - 1 - pos
    # per chunk, references in time order (requests are in arrival order already)
    order = np.lexsort((np.arange(len(c)), c))
    cs, ts = c[order], t[order]
    same_next = np.concatenate([cs[1:] == cs[:-1], [False]])
    same_prev = np.concatenate([[False], cs[1:] == cs[:-1]])
    nxt = np.where(same_next, np.concatenate([ts[1:], [np.inf]]), np.inf)
    prv = np.where(same_prev, np.concatenate([[-np.inf], ts[:-1]]), -np.inf)
    grp_start = np.flatnonzero(~same_prev)
    first_idx = np.repeat(grp_start, np.diff(np.concatenate([grp_start, [len(cs)]])))
    hits = np.arange(len(cs)) - first_idx
    t_first = ts[first_idx]
    inv = np.empty_like(order)
    inv[order] = np.arange(len(order))
    next_t = nxt[inv]
    prev_t = prv[inv]
    h = hits[inv].astype(float)
    tf = t_first[inv]
    reused_w = (next_t - t) <= args.window
    reused_ever = np.isfinite(next_t)
    tau = args.tau
    feats = {
        "hits": h,
        "rate": (h + 1.0) / (t - tf + tau) * tau,
        "gap_prev": -np.where(np.isfinite(prev_t), t - prev_t, 1e9),
        "depth": (pos + 1).astype(float),
        "from_tail": -from_tail.astype(float),
        "is_tail": (from_tail == 0).astype(float),
    }
    sid = tr.session_id
    if (sid >= 0).any():
        # requests of the session so far and the gap to the session's previous request
        turns = np.zeros(n)
        gap = np.full(n, 1e9)
        last = {}
        cnt = {}
        for i, s in enumerate(sid.tolist()):
            if s < 0:
                continue
            turns[i] = cnt.get(s, 0)
            cnt[s] = turns[i] + 1
            if s in last:
                gap[i] = tr.arrival_s[i] - last[s]
            last[s] = tr.arrival_s[i]
        feats["sess_turns"] = turns[req]
        feats["sess_gap"] = -gap[req]
        del s_req
    print(f"{args.workload}: {n:,} requests, {len(c):,} chunk references, {tr.n_chunks:,} chunks "
          f"({tr.chunk_tokens} tokens each)")
    print(f"reused within {args.window:.0f} s: {reused_w.mean():.3f} of references; ever: {reused_ever.mean():.3f}")
    print(f"{'feature':12s} {'AUC(win)':>9s} {'cut@90%':>8s} {'AUC(ever)':>10s} {'cut@90%':>8s}")
    for name, f in feats.items():
        print(f"{name:12s} {auc(f, reused_w):9.3f} {cut_at_recall(f, reused_w):8.3f} "
              f"{auc(f, reused_ever):10.3f} {cut_at_recall(f, reused_ever):8.3f}")
    print("P(reused within window | earlier hits h), share of references:")
    for lo, hi in ((0, 0), (1, 1), (2, 2), (3, 5), (6, 1e9)):
        m = (h >= lo) & (h <= hi)
        if m.any():
            label = f"h={lo}" if lo == hi else (f"h={lo}-{int(hi)}" if hi < 1e9 else f"h>={lo}")
            print(f"  {label:8s} P={reused_w[m].mean():.3f}  share={m.mean():.3f}")


if __name__ == "__main__":
    main()
