#!/usr/bin/env python
"""ROC AUC of each Gandalf reuse estimator for "this DRAM victim will be hit from the SSD
before it is evicted there". Printed, never asserted.

The label is only observable when every DRAM victim is written, so the run is ``lru``
(write-back, LRU eviction in every tier) and the estimators ride along as shadows: each is
a Gandalf policy object (interpreted engine) that sees the same requests and inserts as
lru and is asked, at each DRAM victim that lru writes, for its ``E_hits`` of that payload.
The label is whether that SSD copy then served a reuse before it left the SSD. The
shadows of ``hints`` and ``learned`` are given lru's own SSD characteristic time as their
horizon. AUC = P(score of a hit copy > score of an unhit copy), ties counted half.

    python scripts/reuse_auc.py --workload claude_code --chunk-tokens 256 --dram 74GB --ssd 738GB
    python scripts/reuse_auc.py --workload mooncake --chunk-tokens 512 --dram 26GB --ssd 263GB
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import cluster_sim
import cluster_sim.fleet as fleet
from cluster_sim.policies.base import DEMOTE, DRAM, SSD
from cluster_sim.policies.gandalf import GandalfPolicy
from cluster_sim.policies.lru import LRUPolicy
from cluster_sim.study import shared_trace_overrides

ESTIMATORS = {"rate": {"reuse": "rate"}, "population": {"reuse": "population"}, "hints": {"reuse": "hints"},
              "learned": {"reuse": "learned"}}


class ShadowLRU(LRUPolicy):
    """lru, plus reuse estimators that watch the same stream and score its SSD writes."""
    name = "lru"
    wants_residency_events = True
    leaf_event_tiers = ()

    def __init__(self, names, objective):
        super().__init__()
        self.names = names
        self.objective = objective

    def bind(self, ctx):
        super().bind(ctx)
        self.shadows = []
        for n in self.names:
            g = GandalfPolicy(engine="python", objective=self.objective, **ESTIMATORS[n])
            g.bind(ctx)
            self.shadows.append(g)
        n2 = len(self.st.res)
        self.copy_hit = np.zeros(n2, dtype=bool)
        self.write_id = np.full(n2, -1, dtype=np.int64)
        self.scores: list[list[float]] = [[] for _ in self.names]
        self.labels: list[int] = []
        self.now = 0.0

    def tick(self, now):
        self.now = now
        for g in self.shadows:
            g.tick(now)

    def on_access(self, payloads, now, meta):
        st = self.st
        h = meta.hit_chunks
        if h:
            fa = 2 * meta.path[:h]
            self.copy_hit[fa[(st.res[fa] & 7) == 4]] = True
            if len(payloads) > len(meta.path) and st.res[int(payloads[-1])] & 7 == 4:
                self.copy_hit[int(payloads[-1])] = True
        for g in self.shadows:
            g.on_access(payloads, now, meta)

    def on_insert(self, payloads, now):
        for g in self.shadows:
            g.on_insert(payloads, now)

    def on_enter(self, tier, p):
        if tier == SSD:
            self.copy_hit[p] = False

    def on_leave(self, tier, p):
        if tier == SSD and self.write_id[p] >= 0:
            self.labels[self.write_id[p]] = int(self.copy_hit[p])
            self.write_id[p] = -1

    def select_victims(self, tier, need, now):
        out = super().select_victims(tier, need, now)
        st = self.st
        if tier == DRAM:
            for p, a in out:
                if a == DEMOTE and not st.res[p] & 4:
                    self.write_id[p] = len(self.labels)
                    self.labels.append(0)
                    for k, g in enumerate(self.shadows):
                        g.now = now
                        self.scores[k].append(g.e_hits(p, now))
        elif out:
            for g in self.shadows:
                if g.est is not None:
                    g._note_ssd_victims([p for p, _ in out])
        return out

    def finish_labels(self):
        for p in np.flatnonzero(self.write_id >= 0).tolist():
            self.labels[self.write_id[p]] = int(self.copy_hit[p])


def auc(score, label):
    score = np.asarray(score, dtype=np.float64)
    label = np.asarray(label, dtype=bool)
    pos, neg = label.sum(), (~label).sum()
    if not pos or not neg:
        return float("nan")
    order = np.argsort(score, kind="stable")
    s = score[order]
    ranks = np.empty(len(s))
    i = 0
    while i < len(s):
        j = i
        while j + 1 < len(s) and s[j + 1] == s[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2.0 + 1.0
        i = j + 1
    return float((ranks[label].sum() - pos * (pos + 1) / 2.0) / (pos * neg))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workload", default="default")
    ap.add_argument("--model", default="qwen3_next_80b_a3b")
    ap.add_argument("--chunk-tokens", default="auto")
    ap.add_argument("--dram", default=None)
    ap.add_argument("--ssd", default=None)
    ap.add_argument("--objective", default="chunks")
    ap.add_argument("--estimators", nargs="*", default=list(ESTIMATORS))
    ap.add_argument("--set", nargs="*", default=[], help="extra Hydra overrides")
    args = ap.parse_args()
    ov = [f"workload={args.workload}", f"model={args.model}", f"cache.chunk_tokens={args.chunk_tokens}",
          "hardware.hbm_cache_bytes=0", *shared_trace_overrides(args.workload), *args.set]
    if args.dram:
        ov.append(f"hardware.dram_bytes={args.dram}")
    if args.ssd:
        ov.append(f"hardware.ssd_bytes={args.ssd}")
    pol = ShadowLRU(args.estimators, args.objective)
    real = fleet.make_policy
    fleet.make_policy = lambda name, params: pol
    t = time.perf_counter()
    try:
        s = cluster_sim.run(cluster_sim.compose(ov + ["policy=lru"]), write=False)
    finally:
        fleet.make_policy = real
    pol.finish_labels()
    f = s.fleet
    y = np.asarray(pol.labels)
    print("overrides:", " ".join(ov))
    print(f"lru: miss {f['chunk_miss_ratio']:.4f}, {len(y):,} SSD writes of DRAM victims, "
          f"{y.mean():.3f} of them hit from the SSD before eviction ({time.perf_counter() - t:.0f} s)")
    for name, sc in zip(args.estimators, pol.scores):
        print(f"  {name:12s} ROC AUC {auc(sc, y):.3f}")


if __name__ == "__main__":
    main()
