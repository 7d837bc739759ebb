"""Marconi's α-tuning replay compiled (numba): :meth:`SingleTierMarconi.run` over flat arrays.

:class:`cluster_sim.policies.marconi.SingleTierMarconi` is the reference (``run``); :func:`replay`
replays the same requests for each α of a grid and returns the same ``saved`` floats, bit for
bit (tests/test_marconi_jit.py):

* the state is a few int64 rows of one array ``I`` (``FA`` .. ``CPOS``) and the efficiencies
  ``EF``; the candidates (``cl | cs``) are also held in a dense list ``cand`` (``CPOS`` = a
  chunk's place in it, -1: none), so that an eviction scans the candidates only, not every chunk;
* the selection is the reference's: min-max normalised ``1/(clock - t_last)`` plus α times the
  min-max normalised efficiency, the minimum evicted, ties by (t_last, payload id) — a total
  order, so the order the candidates are scanned in does not matter; the bug-compatible credit
  is that of the candidate with the largest payload id;
* a STATE added at ``c`` re-keys the candidates below ``c`` whose parent node lies above ``c``,
  and a STATE removed at ``c`` those whose parent node was ``c``: the reference scans every
  candidate for these; here a walk over the FA-resident subtree below ``c`` finds the same ones
  (FA residency is prefix-closed in the replay and a candidate holds its FA; ``lp`` always names
  an ancestor);
* the FLOP efficiency ``_FlopModel.eff`` and ``ModelSpec.prefill_flops`` are recomputed with the
  same operations in the same order (:func:`prefill_flops`, :func:`eff`); they are exact only when
  the model's four FLOP fields are Python floats, which the caller checks (else it replays with
  the reference).
"""
from __future__ import annotations

import numpy as np
from numba import njit

# rows of I
FA, SR, NCH, STF, STS, PINF, PINS, CL, CS, LP, CPOS = range(11)
N_ROWS = 11
# scalars of V
USED, CLOCK, NCAND = range(3)
# FLOP parameters (float64 vector P)
P_CT, P_FPT_LMF, P_ATTN, P_SWA, P_W, P_KVPT, P_NMLP, P_DH, P_LSB, P_SWAKV = range(10)
N_P = 10


@njit(cache=True)
def _swa_prefix_sum(n, window):
    if n <= 0:
        return 0
    if n <= window + 1:
        return n * (n - 1) // 2
    return window * (window + 1) // 2 + (n - window - 1) * window


@njit(cache=True)
def prefill_flops(start, end, fpt_lmf, attn, swa, window):
    """``ModelSpec.prefill_flops`` (``fpt_lmf`` = flops_per_token + linear_mix_flops_per_token)."""
    n = end - start
    ctx_sum = (start + end - 1) * n // 2
    swa_sum = _swa_prefix_sum(end, window) - _swa_prefix_sum(start, window)
    return n * fpt_lmf + ctx_sum * attn + swa_sum * swa


@njit(cache=True)
def eff(lp, d, P, ct, window, n_mlp, lsb, swakv, bug, has_state):
    """``_FlopModel.eff(lp, d)``."""
    flops = prefill_flops(lp * ct, d * ct, P[P_FPT_LMF], P[P_ATTN], P[P_SWA], window)
    if bug:
        L = float(lp * ct)
        dh = P[P_DH]
        flops += n_mlp * (8.0 * L * dh * dh - 4.0 * L * L * dh)
    mem = d * ct * P[P_KVPT]
    if has_state:
        pos = d * ct
        mem += float(lsb + min(window, pos) * swakv)
    if mem > 0:
        return flops / mem
    return 0.0


@njit(cache=True)
def _cand_set(c, leaf, stc, I, cand, V):
    I[CL, c] = leaf
    I[CS, c] = stc
    p = I[CPOS, c]
    if leaf or stc:
        if p < 0:
            n = V[NCAND]
            cand[n] = c
            I[CPOS, c] = n
            V[NCAND] = n + 1
    elif p >= 0:
        n = V[NCAND] - 1
        last = cand[n]
        cand[p] = last
        I[CPOS, last] = p
        I[CPOS, c] = -1
        V[NCAND] = n


@njit(cache=True)
def _set_eff(c, I, EF, par, dep, P, ip, has_state, bug):
    a = par[c]
    if has_state:
        while a >= 0 and I[SR, a] == 0:
            a = par[a]
    I[LP, c] = a
    EF[c] = eff(dep[a] if a >= 0 else 0, dep[c], P, ip[0], ip[1], ip[2], ip[3], ip[4], bug, has_state)


@njit(cache=True)
def _upd(c, I, EF, cand, V, par, dep, P, ip, has_state, bug):
    leaf = 1 if (I[FA, c] != 0 and I[NCH, c] == 0) else 0
    stc = 1 if (I[SR, c] != 0 and I[NCH, c] == 1) else 0
    was = I[CL, c] != 0 or I[CS, c] != 0
    _cand_set(c, leaf, stc, I, cand, V)
    if (leaf or stc) and not was:
        _set_eff(c, I, EF, par, dep, P, ip, has_state, bug)


@njit(cache=True)
def _add_state(c, seq, I, EF, cand, V, par, dep, S, ks, ko, stack, P, ip, has_state, bug):
    I[SR, c] = 1
    V[USED] += S[c]
    I[STS, c] = V[CLOCK]
    V[CLOCK] += 1
    I[PINS, c] = seq
    _upd(c, I, EF, cand, V, par, dep, P, ip, has_state, bug)
    # candidates strictly below c whose parent node lies above c now stop at c
    dc = dep[c]
    top = 0
    for i in range(ks[c], ks[c + 1]):
        v = ko[i]
        if I[FA, v] != 0:
            stack[top] = v
            top += 1
    while top:
        top -= 1
        v = stack[top]
        if I[CL, v] != 0 or I[CS, v] != 0:
            lv = I[LP, v]
            if lv == -1 or dep[lv] < dc:
                _set_eff(v, I, EF, par, dep, P, ip, has_state, bug)
        for i in range(ks[v], ks[v + 1]):
            w = ko[i]
            if I[FA, w] != 0:
                stack[top] = w
                top += 1


@njit(cache=True)
def _remove_state(c, I, EF, cand, V, par, dep, S, ks, ko, stack, P, ip, has_state, bug):
    I[SR, c] = 0
    V[USED] -= S[c]
    _cand_set(c, I[CL, c], 0, I, cand, V)
    top = 0
    for i in range(ks[c], ks[c + 1]):
        v = ko[i]
        if I[FA, v] != 0:
            stack[top] = v
            top += 1
    while top:
        top -= 1
        v = stack[top]
        if (I[CL, v] != 0 or I[CS, v] != 0) and I[LP, v] == c:
            _set_eff(v, I, EF, par, dep, P, ip, has_state, bug)
        for i in range(ks[v], ks[v + 1]):
            w = ko[i]
            if I[FA, w] != 0:
                stack[top] = w
                top += 1


@njit(cache=True)
def _remove_fa(c, I, cand, V, par, F):
    I[FA, c] = 0
    _cand_set(c, 0, I[CS, c], I, cand, V)
    V[USED] -= F
    p = par[c]
    if p >= 0:
        I[NCH, p] -= 1


@njit(cache=True)
def _minmax(x, K):
    """``marconi._minmax`` of ``x[:K]`` in place: ``(v - lo) / (hi - lo)``, every value 1 if all are equal."""
    lo = x[0]
    hi = x[0]
    for i in range(1, K):
        v = x[i]
        if v < lo:
            lo = v
        if v > hi:
            hi = v
    if hi == lo:
        for i in range(K):
            x[i] = 1.0
    else:
        den = hi - lo
        for i in range(K):
            x[i] = (x[i] - lo) / den


@njit(cache=True)
def _evict_one(seq, alpha, I, EF, cand, V, par, dep, S, gid2, ks, ko, stack, F, P, ip, has_state, bug,
               xs, xk, xt, xe, xr):
    """One Marconi eviction (``SingleTierMarconi._evict_one``): bytes credited, or -1 for None."""
    K = 0
    nc = V[NCAND]
    for i in range(nc):
        c = cand[i]
        if I[CL, c] != 0:
            if I[PINF, c] == seq or (I[SR, c] != 0 and I[PINS, c] == seq):
                continue
            xk[K] = 0
            if I[SR, c] != 0:
                xt[K] = max(I[STF, c], I[STS, c])
                xe[K] = EF[c]
            else:
                xt[K] = I[STF, c]
                xe[K] = EF[c] if not has_state else 0.0
        else:
            if I[PINS, c] == seq:
                continue
            xk[K] = 1
            xt[K] = I[STS, c]
            xe[K] = EF[c]
        xs[K] = c
        K += 1
    if K == 0:
        return -1
    clock = V[CLOCK]
    for i in range(K):
        xr[i] = 1.0 / float(clock - xt[i])
    _minmax(xr, K)
    if alpha:
        _minmax(xe, K)
        for i in range(K):
            xr[i] = xr[i] + alpha * xe[i]
    best = 0
    for i in range(1, K):
        si = xr[i]
        sb = xr[best]
        if si < sb:
            best = i
        elif si == sb:
            if xt[i] < xt[best] or (xt[i] == xt[best] and gid2[xs[i]] + xk[i] < gid2[xs[best]] + xk[best]):
                best = i
    c = xs[best]
    credit = 0
    if bug:      # quirk 2: credit the last candidate visited (scanning by payload id)
        jl = 0
        for i in range(1, K):
            if gid2[xs[i]] + xk[i] > gid2[xs[jl]] + xk[jl]:
                jl = i
        lc = xs[jl]
        if xk[jl]:
            credit = S[lc]
        else:
            credit = F + (S[lc] if I[SR, lc] != 0 else 0)
    if xk[best]:
        got = S[c]
        _remove_state(c, I, EF, cand, V, par, dep, S, ks, ko, stack, P, ip, has_state, bug)
        return got
    before = V[USED]
    if I[SR, c] != 0:
        _remove_state(c, I, EF, cand, V, par, dep, S, ks, ko, stack, P, ip, has_state, bug)
    _remove_fa(c, I, cand, V, par, F)
    top = c
    if has_state:
        a = par[top]
        while a >= 0 and I[FA, a] != 0 and I[SR, a] == 0 and I[NCH, a] == 0 and I[PINF, a] != seq:
            _remove_fa(a, I, cand, V, par, F)
            top = a
            a = par[a]
    p = par[top]
    if p >= 0:
        _upd(p, I, EF, cand, V, par, dep, P, ip, has_state, bug)
    if bug:
        return credit
    return before - V[USED]


@njit(cache=True)
def _replay_one(alpha, pflat, poff, Ls, par, dep, S, gid2, ks, ko, F, cap, mode, P, ip, has_state, bug):
    n = len(par)
    I = np.zeros((N_ROWS, n), dtype=np.int64)
    I[LP, :] = -1
    I[CPOS, :] = -1
    EF = np.zeros(n, dtype=np.float64)
    cand = np.empty(n, dtype=np.int64)
    stack = np.empty(n + 1, dtype=np.int64)
    V = np.zeros(3, dtype=np.int64)
    xs = np.empty(n, dtype=np.int64)
    xk = np.empty(n, dtype=np.int64)
    xt = np.empty(n, dtype=np.int64)
    xe = np.empty(n, dtype=np.float64)
    xr = np.empty(n, dtype=np.float64)
    maxm = 0
    for i in range(len(poff) - 1):
        maxm = max(maxm, poff[i + 1] - poff[i])
    stmark = np.zeros(maxm + 2, dtype=np.int64)
    pk = np.empty(2 * maxm + 2, dtype=np.int64)
    pc = np.empty(2 * maxm + 2, dtype=np.int64)
    ct = ip[0]
    fpt_lmf = P[P_FPT_LMF]
    attn = P[P_ATTN]
    swa = P[P_SWA]
    window = ip[1]
    saved = 0.0
    hs = np.zeros(len(poff) - 1, dtype=np.int64)
    for q in range(len(poff) - 1):
        seq = q + 1
        a0 = poff[q]
        m = poff[q + 1] - a0
        h = 0
        if m:
            path = pflat[a0:a0 + m]
            r = m
            for j in range(m):
                if I[FA, path[j]] == 0:
                    r = j
                    break
            if has_state and r:
                h = 0
                for j in range(r - 1, -1, -1):
                    if I[SR, path[j]] != 0:
                        h = j + 1
                        break
            else:
                h = r
            clock = V[CLOCK]
            for i in range(m):
                I[STF, path[m - 1 - i]] = clock + i
            V[CLOCK] = clock + m
            if has_state and h:
                I[STS, path[h - 1]] = V[CLOCK]
                V[CLOCK] += 1
                I[PINS, path[h - 1]] = seq
            for j in range(h):
                I[PINF, path[j]] = seq
            if r < m:
                for j in range(r, m):
                    I[PINF, path[j]] = seq
                    I[FA, path[j]] = 1
                V[USED] += F * (m - r)
                lo = r - 1 if r else r
                for j in range(lo, m - 1):
                    I[NCH, path[j]] += 1
                if r:
                    _upd(path[r - 1], I, EF, cand, V, par, dep, P, ip, has_state, bug)
                _upd(path[m - 1], I, EF, cand, V, par, dep, P, ip, has_state, bug)
                for j in range(r, m - 1):
                    _cand_set(path[j], 0, 0, I, cand, V)
            if has_state:
                # checkpoint_positions(mode, h, r, m), in its order
                if mode == 0:
                    if h < m:
                        c = path[m - 1]
                        if I[SR, c] == 0:
                            _add_state(c, seq, I, EF, cand, V, par, dep, S, ks, ko, stack, P, ip, has_state, bug)
                            stmark[m] = seq
                elif mode == 1:
                    if r > h and r < m:
                        c = path[r - 1]
                        if I[SR, c] == 0:
                            _add_state(c, seq, I, EF, cand, V, par, dep, S, ks, ko, stack, P, ip, has_state, bug)
                            stmark[r] = seq
                    if h < m:
                        c = path[m - 1]
                        if I[SR, c] == 0:
                            _add_state(c, seq, I, EF, cand, V, par, dep, S, ks, ko, stack, P, ip, has_state, bug)
                            stmark[m] = seq
                else:
                    for k in range(h + 1, m + 1):
                        c = path[k - 1]
                        if I[SR, c] == 0:
                            _add_state(c, seq, I, EF, cand, V, par, dep, S, ks, ko, stack, P, ip, has_state, bug)
                            stmark[k] = seq
            if V[USED] > cap:
                # placed payloads sorted by (position, kind): FA at r+1..m, STATE where stmark
                npl = 0
                for pos in range(h + 1, m + 1):
                    if pos > r:
                        pk[npl] = 0
                        pc[npl] = path[pos - 1]
                        npl += 1
                    if has_state and stmark[pos] == seq:
                        pk[npl] = 1
                        pc[npl] = path[pos - 1]
                        npl += 1
                # _resolve
                while V[USED] > cap:
                    need = V[USED] - cap
                    start = V[USED]
                    credited = 0
                    progressed = False
                    while credited < need or start - V[USED] < need:
                        got = _evict_one(seq, alpha, I, EF, cand, V, par, dep, S, gid2, ks, ko, stack, F, P, ip,
                                         has_state, bug, xs, xk, xt, xe, xr)
                        if got < 0:
                            break
                        credited += got
                        progressed = True
                    if V[USED] <= cap:
                        break
                    if not progressed:
                        while npl and V[USED] > cap:
                            npl -= 1
                            kind = pk[npl]
                            c = pc[npl]
                            if kind == 1 and I[SR, c] != 0:
                                _remove_state(c, I, EF, cand, V, par, dep, S, ks, ko, stack, P, ip, has_state, bug)
                            elif kind == 0 and I[FA, c] != 0:
                                if I[SR, c] != 0:
                                    _remove_state(c, I, EF, cand, V, par, dep, S, ks, ko, stack, P, ip, has_state,
                                                  bug)
                                _remove_fa(c, I, cand, V, par, F)
                                p = par[c]
                                if p >= 0:
                                    _upd(p, I, EF, cand, V, par, dep, P, ip, has_state, bug)
                        break
        hs[q] = h
        L = Ls[q]
        if L > 0:
            start = h * ct
            if start < L:
                rest = prefill_flops(start, L, fpt_lmf, attn, swa, window)
            else:
                rest = prefill_flops(L - 1, L, fpt_lmf, attn, swa, window)
            saved += prefill_flops(0, L, fpt_lmf, attn, swa, window) - rest
    return saved, hs


@njit(cache=True)
def replay(alphas, pflat, poff, Ls, par, dep, S, gid2, ks, ko, F, cap, mode, P, ip, has_state, bug):
    """``saved`` of :meth:`SingleTierMarconi.run` for each α of ``alphas``, and each replay's hit
    lengths (``hs[i, q]``: request ``q`` under ``alphas[i]``).

    ``ip`` = (chunk tokens, SWA window, MLP layers, linear state bytes, SWA KV bytes per token);
    ``P`` = the float parameters (``P_*``); ``mode`` = 0 last, 1 last_and_branch, 2 every_chunk."""
    out = np.zeros(len(alphas), dtype=np.float64)
    hs = np.zeros((len(alphas), len(poff) - 1), dtype=np.int64)
    for i in range(len(alphas)):
        s, h = _replay_one(alphas[i], pflat, poff, Ls, par, dep, S, gid2, ks, ko, F, cap, mode, P, ip,
                           has_state, bug)
        out[i] = s
        hs[i, :] = h
    return out, hs
