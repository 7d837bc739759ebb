"""``dynamic_random``: write-back gated by CacheLib Navy's DynamicRandomAP (policies.md §9.1).

DRAM and SSD evict LRU leaf-first (as ``lru``). A DRAM victim without a valid SSD
copy is written to the SSD with probability

    P = clamp(base(size) * factor, 0, 1),   base(size) = (bitlen(base_size) / bitlen(size)) ^ size_decay

and dropped otherwise. Every ``policy.update_interval_s`` of simulated time
(checked before each request) the factor follows the write budget:

    r_obs  = bytes written since the last update / elapsed
    r_need = max(0, target_rate * (elapsed since start + 1 day) - bytes written) / 1 day, capped at max_rate
    factor = clamp(factor * clamp(r_need / r_obs, 1 - change_window, 1 + change_window),
                   prob_factor_min, prob_factor_max)

(no update while nothing was written), so unused budget carries over and an
overshoot is paid back over the next day, as in CacheLib. The bytes written are
the policy's own demotions of payloads without an SSD copy (what the node counts,
warm-up included, like a device counter).

**Admission commits a prefix.** Unlike a CacheLib item, an FA chunk on the SSD keeps
its ancestors resident (prefix closure): once a leaf is admitted, each DRAM ancestor
without an SSD copy must be written when it leaves DRAM, whatever its own draw (a
"forced" write). A leaf at depth 25 thus commits ~25 writes, the controller's factor
no longer measures the share of bytes admitted, and at ``prob_factor_min`` the forced
writes alone exceeded the budget several-fold (Mooncake, 1 h: 96% of the bytes at a
factor of 0.001). So an FA victim is admitted with probability ``P / (P + n (1 − P))``,
``n`` = 1 + its ancestors that have neither an SSD copy nor a descendant already on the
SSD (the writes this admission commits): deciding a chain leaf to root then writes the
share ``P`` of its bytes in expectation (``E_k = q_k k + (1 − q_k) E_{k−1} = P k``), and
``P = 1`` still admits everything. STATE payloads commit nothing and use ``P``.

``policy.target_bytes_per_day`` defaults to the drive's endurance budget,
``hardware.ssd.dwpd x hardware.ssd_bytes``, divided by
``workload.replays_per_day_scale`` when the node context carries it (the metric
``ssd_bytes_written_per_day`` multiplies the trace's rate by that scale).
``policy.max_rate_bytes_per_s`` defaults to ``hardware.ssd_write_bytes_per_s``.
``size_decay`` defaults to 0 (KV chunks are near-uniform; CacheLib's 0.3 penalises
large items). Draws come from the node's seeded stream (``ctx.rng``), buffered so
that a failed selection gives its draws back (atomicity, determinism).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...cache.state import IN_SSD, chunk_of, fa_of, is_state
from ...errors import ConfigError
from ...settings import setting
from ..base import DRAM, SSD, Policy
from ..write_through import VictimTally, renotify_inserted, select_gated

__all__ = ["DynamicRandomPolicy"]

DAY = 86400.0


@dataclass(frozen=True)
class DynamicRandomParams:
    target_bytes_per_day: int | None = setting(None, "bytes", lo_open=True, allow_none=True, unit="bytes/day",
                                               doc="null = hardware.ssd.dwpd x hardware.ssd_bytes")
    update_interval_s: float = setting(60.0, lo=0, lo_open=True, unit="s")
    probability_seed: float = setting(1.0, lo=0, lo_open=True, doc="initial probability factor")
    base_size: int = setting(4096, lo=1, integer=True, unit="bytes")
    size_decay: float = setting(0.0, lo=0, hi=1, doc="CacheLib's default is 0.3; KV chunks are near-uniform")
    change_window: float = setting(0.25, lo=0, lo_open=True, hi=1, hi_open=True)
    max_rate_bytes_per_s: float | None = setting(None, "rate", allow_none=True, unit="bytes/s",
                                                 doc="null = hardware.ssd_write_bytes_per_s")
    prob_factor_min: float = setting(0.001, lo=0, lo_open=True)
    prob_factor_max: float = setting(10.0, lo=0, lo_open=True)

    def check(self, prefix: str) -> None:
        if self.prob_factor_max < self.prob_factor_min:
            raise ConfigError(f"{prefix}.prob_factor_max", f"must be >= prob_factor_min ({self.prob_factor_min!r}), "
                                                           f"got {self.prob_factor_max!r}")


def write_budget(params: DynamicRandomParams, hw, replays_per_day_scale: float = 1.0) -> tuple[float, float]:
    """(target write rate, rate cap) in bytes per simulated second: ``target_bytes_per_day``, or
    the drive's endurance ``dwpd x ssd_bytes`` divided by the workload's replays-per-day scale;
    ``max_rate_bytes_per_s``, or the drive's write bandwidth (the compiled engine uses it too)."""
    if params.target_bytes_per_day is not None:
        per_day = float(params.target_bytes_per_day)
    else:
        per_day = hw.ssd.dwpd * hw.ssd_bytes / float(replays_per_day_scale or 1.0)
    cap = params.max_rate_bytes_per_s
    return per_day / DAY, float(hw.ssd_write_bytes_per_s) if cap is None else cap


class DynamicRandomPolicy(Policy):
    name = "dynamic_random"
    Params = DynamicRandomParams

    def __init__(self, params=None, /, **kw):
        super().__init__(params, **kw)
        p = self.params
        self.target_bytes_per_day = p.target_bytes_per_day
        self.update_interval = p.update_interval_s
        self.factor0 = p.probability_seed
        self.base_size = p.base_size
        self.size_decay = p.size_decay
        self.change_window = p.change_window
        self.max_rate = p.max_rate_bytes_per_s
        self.fmin = p.prob_factor_min
        self.fmax = p.prob_factor_max

    def bind(self, ctx) -> None:
        super().bind(ctx)
        st = self.st
        hw = ctx.hardware
        self.target_rate, self.max_rate = write_budget(self.params, hw, getattr(ctx, "replays_per_day_scale", 1.0))
        self.walkers = {DRAM: st.new_lru(DRAM), SSD: st.new_lru(SSD)}
        self.tally = VictimTally()
        self.factor = self.factor0
        self.start = None
        self.last_update = None
        self.written = 0              # device bytes written (our demotions)
        self.written_last = 0
        self.n_updates = 0
        self.n_admitted = self.n_rejected = 0
        self.admitted_bytes = self.rejected_bytes = 0
        self.r_obs = 0.0
        self.r_need = 0.0
        self._bitlen_base = int(self.base_size).bit_length()
        self._ubuf: list[float] = []
        self._ui = 0
        self._decided: list[tuple[int, bool]] = []

    def on_insert(self, payloads, now) -> None:
        renotify_inserted(self.walkers, self.st, payloads)

    # ---- control loop ------------------------------------------------------------------
    def tick(self, now) -> None:
        if self.start is None:
            self.start = self.last_update = now
            return
        if now - self.last_update >= self.update_interval:
            self._update(now)

    def _update(self, now: float) -> None:
        dt = now - self.last_update
        self.last_update = now
        diff = self.written - self.written_last
        if diff <= 0 or dt <= 0:
            return
        self.n_updates += 1
        self.r_obs = diff / dt
        tomorrow = self.target_rate * (now - self.start + DAY)
        need = max(0.0, tomorrow - self.written) / DAY
        if self.max_rate and need > self.max_rate:
            need = self.max_rate
        self.r_need = need
        lo, hi = 1.0 - self.change_window, 1.0 + self.change_window
        change = min(max(need / self.r_obs, lo), hi)
        self.factor = min(max(self.factor * change, self.fmin), self.fmax)
        self.written_last = self.written

    def probability(self, size: int, commits: int = 1) -> float:
        """P = clamp(base(size) * factor, 0, 1) for a decision that commits one write; a decision
        committing ``n`` writes (a leaf and its unwritten prefix) uses P / (P + n (1 - P)), so that
        deciding a chain leaf to root writes the share P of its bytes in expectation."""
        base = 1.0
        if self.size_decay:
            base = (self._bitlen_base / max(1, int(size).bit_length())) ** self.size_decay
        P = min(1.0, max(0.0, base * self.factor))
        if commits > 1 and P < 1.0:
            P = P / (P + commits * (1.0 - P))
        return P

    def _draw(self) -> float:
        i = self._ui
        if i >= len(self._ubuf):
            self._ubuf.extend(self.ctx.rng.random(1024).tolist())
        self._ui = i + 1
        return self._ubuf[i]

    def commitment(self, p: int) -> int:
        """Payloads written if ``p`` is admitted: ``p`` and, for an FA chunk, its ancestors with
        neither an SSD copy nor a descendant on the SSD (a deepest run of the ancestor path)."""
        if is_state(p):
            return 1
        st = self.st
        anc = st.ancestors(chunk_of(p))
        if not len(anc):
            return 1
        done = np.flatnonzero((st.res[fa_of(anc)] & IN_SSD) | (st.dcnt[SSD][anc] > 0))
        return 1 + len(anc) - (int(done[-1]) + 1 if len(done) else 0)

    def _admit(self, p: int) -> bool:
        prob = self.probability(int(self.st.size[p]), self.commitment(p))
        ok = prob >= 1.0 or self._draw() < prob
        self._decided.append((p, ok))
        return ok

    def select_victims(self, tier, bytes_needed, now):
        if tier != DRAM:
            return select_gated(self, self.walkers[tier], tier, bytes_needed)
        if self._ui > 4096:
            del self._ubuf[:self._ui]
            self._ui = 0
        u0 = self._ui
        self._decided = []
        out = select_gated(self, self.walkers[DRAM], DRAM, bytes_needed, self._admit)
        if not out:
            self._ui = u0           # give the draws back: a failed selection changes nothing
            return out
        if self.st.cap[SSD] > 0:
            chosen = {p for p, _ in out}
            size = self.st.size
            res = self.st.res
            seen = set()
            for p, ok in reversed(self._decided):      # the last decision on a payload is the one used
                if p in seen or p not in chosen:
                    continue
                seen.add(p)
                s = int(size[p])
                if ok:
                    self.n_admitted += 1
                    self.admitted_bytes += s
                else:
                    self.n_rejected += 1
                    self.rejected_bytes += s
            for p, a in out:
                if a and not res[p] & IN_SSD:
                    self.written += int(size[p])
        return out

    def counters(self):
        d = {"admitted": self.n_admitted, "rejected": self.n_rejected, "admitted_bytes": self.admitted_bytes,
             "rejected_bytes": self.rejected_bytes, "control_updates": self.n_updates,
             "prob_factor_final": self.factor, "target_bytes_per_s": self.target_rate,
             "observed_bytes_per_s_last": self.r_obs}
        d.update(self.tally.as_dict())
        return d
