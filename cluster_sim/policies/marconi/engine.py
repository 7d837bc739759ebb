"""``marconi`` on the compiled engine: its radix tree's arrays (``PX``, laid out by ``tree.py``), alpha, the
bootstrap multiplier and the FLOP parameters (``FX``), and its alpha tuning, due at a request's tick and
run here between requests by the single-tier model (compiled, ``policies._marconi_jit``)."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from ...cache.state import DRAM, HBM, SSD
from . import layout as L
from ...engine.adapter import Adapter as _Base
from ...errors import ConfigError


class Adapter(_Base):
    keyed = True                # its DRAM and SSD selections are its own (tree.py): no walker there

    def __init__(self, node):
        super().__init__(node)
        self.seen = None        # alpha=auto: (offsets, request ids) replayed until it tunes
        self.alpha = 0.0

    @classmethod
    def warm_up_setting(cls, params):
        from ...engine.adapter import real_setting
        return real_setting()       # it prices with the cost model's FLOPs

    def arrays(self, ctx) -> dict:
        """PX (a header, then its segments: tree.py) and FX (alpha, the bootstrap multiplier, the FLOP
        parameters of policies._marconi_jit, the efficiency keys per tier)."""
        from .. import _marconi_jit as MJ
        from . import SingleTierMarconi, _FlopModel
        from . import tree as MC
        node = self.node
        p, m, U = node.params, node.model, node.n_chunks
        if not SingleTierMarconi.compiled_ok(SimpleNamespace(model=m)):
            raise ConfigError("cache.engine", "numba cannot run this setting: marconi's FLOP fields of this model "
                              "are not floats (their arithmetic would not be the interpreted policy's)")
        fm = _FlopModel(m, node.ct, bool(p.bug_compatible))
        lens = MC.segment_lengths(U)
        offs, words = MC.layout(U)
        PX = np.zeros(words, dtype=np.int64)
        for k, name in enumerate(MC.SEGMENTS):
            PX[MC.H_O + k] = offs[name]
        PX[MC.N_HEADER - 1] = words
        PI = PX.view(np.int32)

        def seg(name):      # an int32 segment
            a = offs[name]
            return PI[a:a + lens[name]]
        seg("GUARD")[:] = -1
        seg("CPOS")[:] = -1
        seg("ROW")[:] = -1
        if fm.has_state and U:
            par = np.asarray(node.S.parent, dtype=np.int64)
            seg("KO")[:U] = np.argsort(par, kind="stable")
            seg("KS")[:] = np.cumsum(np.bincount(par + 1, minlength=U + 1))
        PX[MC.H_K] = 0 if p.candidates == "all" else max(int(p.candidates) // 2, 1)
        PX[MC.H_SSDON] = int(node.caps[SSD] > 0)
        PX[MC.H_HAS] = int(fm.has_state)
        PX[MC.H_BUG] = int(bool(p.bug_compatible))
        PX[MC.H_AUTO] = int(p.alpha == "auto")
        PX[MC.H_TUNED] = -1
        PX[MC.H_R0] = -1
        PX[MC.H_CT] = node.ct
        PX[MC.H_WIN] = int(m.swa_window)
        PX[MC.H_NMLP] = int(fm.n_mlp)
        PX[MC.H_LSB] = int(m.linear_state_bytes)
        PX[MC.H_SWAKV] = int(m.swa_kv_bytes_per_token)
        PX[MC.H_U] = U
        FX = np.zeros(MC.F_EKEY + 4 * U, dtype=np.float64)
        FX[MC.F_ALPHA] = 0.0 if p.alpha == "auto" else float(p.alpha)
        FX[MC.F_BOOT] = float(p.bootstrap_multiplier)
        P = FX[MC.F_P:MC.F_P + MJ.N_P]
        P[MJ.P_FPT_LMF] = m.flops_per_token + m.linear_mix_flops_per_token
        P[MJ.P_ATTN] = m.attn_flops_per_ctx_token
        P[MJ.P_SWA] = m.swa_flops_per_ctx_token
        P[MJ.P_KVPT] = fm.kvpt
        P[MJ.P_DH] = fm.d_hidden
        self.alpha = 0.0 if p.alpha == "auto" else p.alpha
        self.seen = [] if p.alpha == "auto" else None
        return {"PX": PX, "FX": FX}

    def after_call(self, offsets, ids) -> None:
        if self.seen is not None:
            self.seen.append((offsets, ids))

    def grow(self, g: int) -> None:
        if g & L.GROW_MC_TUNE:
            self._tune()

    def _tune(self) -> None:
        """``MarconiPolicy._tune`` at the request where its ``tick`` tunes: the requests seen so far
        replayed by its single-tier model for each alpha of the grid."""
        from . import ALPHA_GRID, SingleTierMarconi
        from . import tree as MC
        node = self.node
        S = node.S
        n = int(S.PX[MC.H_NSEEN])
        if node.input_tokens is None:
            raise RuntimeError("marconi's alpha tuning needs the requests' input tokens (CompiledNode.replay)")
        reqs = []
        for offsets, ids in self.seen:
            for i in ids.tolist():
                reqs.append((np.asarray(S.flat[offsets[i]:offsets[i + 1]], dtype=np.int64), int(node.input_tokens[i])))
        reqs = reqs[:n]
        assert len(reqs) == n, (len(reqs), n)
        st = SimpleNamespace(parent=np.asarray(S.parent, dtype=np.int64), depth=np.asarray(S.depth, dtype=np.int64),
                             anchor=np.asarray(S.anchor, dtype=np.int64), flat=np.asarray(S.flat, dtype=np.int64))
        caps = node.caps
        cap = caps[HBM] + caps[DRAM] if caps[HBM] + caps[DRAM] > 0 else caps[SSD]
        sim = SingleTierMarconi(st, node.model, node.ct, cap, reqs, bug=bool(node.params.bug_compatible))
        savings = sim.savings(ALPHA_GRID)
        best = max(range(len(ALPHA_GRID)), key=lambda i: (savings[i], -i))
        self.alpha = ALPHA_GRID[best]
        S.FX[MC.F_ALPHA] = float(self.alpha)
        S.PX[MC.H_TUNED] = n
        self.seen = None

    def counters(self) -> dict:
        from . import tree as MC
        PX, p = self.node.S.PX, self.node.params
        d = dict(zip(MC.COUNTER_NAMES, PX[MC.H_C0:MC.H_C0 + len(MC.COUNTER_NAMES)].tolist()))
        d["alpha"] = self.alpha
        d["alpha_auto"] = int(p.alpha == "auto")
        d["alpha_tuned_at_request"] = int(PX[MC.H_TUNED])
        d["bootstrap_r0"] = int(PX[MC.H_R0])
        d["candidates"] = -1 if p.candidates == "all" else p.candidates
        d["bug_compatible"] = int(bool(p.bug_compatible))
        return d
