"""Compiled kernels of the greedy flash translation layer (numba); the model, its parameters
and the Python side are in :mod:`cluster_sim.ftl`.

State is plain int64 arrays (no per-payload objects):

* ``BL[row, block]``: valid bytes, bytes written, state (free / open / closed), kind of the
  stream that opened it, head of its piece list, piece count; ``free``: a stack of free blocks;
  ``openb``: the open block of every write point (host points, then GC points), -1 if none;
* ``PC[row, piece]``: owner, bytes, block, next piece in the block, next / previous piece of
  the owner, kind, live; ``pfree``: a stack of free pieces. A piece is linked into its block's
  list (walked when the block is cleaned) and its owner's doubly linked list (walked by a trim;
  a relocated piece is unlinked in O(1)); pieces go back to the pool when their block is erased;
* ``ohead[owner]``: the owner's first piece, -1 if it has none, ``PENDING`` if its write waits;
* ``Q[row, i]``: writes waiting for room (owner, bytes, kind, counted), in arrival order;
* ``T``: a min-tree over the blocks' valid bytes (closed blocks; others +inf): the root is the
  greedy victim's valid bytes, the leftmost minimum its index;
* ``CFG`` = (block bytes, user bytes, host write points, tree leaves), ``M`` meta, ``K`` counters.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ._ftl_ops import OP_TRIM, OP_WRITE

INF = np.int64(1) << np.int64(62)
PENDING = -2
FREE, OPEN, CLOSED = 0, 1, 2
B_VALID, B_FILL, B_STATE, B_KIND, B_HEAD, B_NP = range(6)
N_BL = 6
P_OWNER, P_LEN, P_BLK, P_NB, P_NO, P_PO, P_KIND, P_LIVE = range(8)
N_PC = 8
Q_OWNER, Q_BYTES, Q_KIND, Q_COUNTED = range(4)
N_Q = 4
C_B, C_USER, C_NHP, C_P = range(4)
N_CFG = 4
M_NFREE, M_NPCFREE, M_QHEAD, M_QTAIL, M_STATUS = range(5)
N_META = 5
# kernel status (M[M_STATUS]) when it returns before the end of the events
OK, NEED_PIECES, NEED_QUEUE, FAIL = range(4)
# counters: counted = events of counted requests (warm-up excluded); *_ALL = every event
K_HOST, K_NAND, K_ERASES, K_RELOC0, K_RELOC1, K_HOST_ALL, K_NAND_ALL, K_ERASES_ALL, K_VALID, \
    K_OVERWRITES, K_CANCELLED = range(11)
N_COUNTERS = 11


# ---------------------------------------------------------------------------- min-tree
@njit(cache=True)
def _tree_set(T, P, b, v):
    j = P + b
    T[j] = v
    j >>= 1
    while j >= 1:
        a = T[2 * j]
        c = T[2 * j + 1]
        T[j] = a if a <= c else c
        j >>= 1


@njit(cache=True)
def _tree_argmin(T, P):
    j = 1
    while j < P:
        j = 2 * j if T[2 * j] <= T[2 * j + 1] else 2 * j + 1
    return j - P


# ---------------------------------------------------------------------------- blocks and pieces
@njit(cache=True)
def _append(pt, owner, nbytes, kind, CFG, BL, PC, free, pfree, openb, ohead, T, M):
    """Append ``nbytes`` of ``owner`` at write point ``pt`` (the caller made sure enough free
    blocks and pieces exist): new pieces head the owner's list and their blocks' lists."""
    B = CFG[C_B]
    while nbytes > 0:
        b = openb[pt]
        if b < 0:
            nf = M[M_NFREE] - 1
            M[M_NFREE] = nf
            b = free[nf]
            openb[pt] = b
            BL[B_STATE, b] = OPEN
            BL[B_KIND, b] = kind
            BL[B_FILL, b] = 0
            BL[B_VALID, b] = 0
            BL[B_HEAD, b] = -1
            BL[B_NP, b] = 0
        take = B - BL[B_FILL, b]
        if take > nbytes:
            take = nbytes
        n = M[M_NPCFREE] - 1
        M[M_NPCFREE] = n
        q = pfree[n]
        PC[P_OWNER, q] = owner
        PC[P_LEN, q] = take
        PC[P_BLK, q] = b
        PC[P_KIND, q] = kind
        PC[P_LIVE, q] = 1
        PC[P_NB, q] = BL[B_HEAD, b]
        BL[B_HEAD, b] = q
        BL[B_NP, b] += 1
        h = ohead[owner]
        PC[P_NO, q] = h
        PC[P_PO, q] = -1
        if h >= 0:
            PC[P_PO, h] = q
        ohead[owner] = q
        BL[B_FILL, b] += take
        BL[B_VALID, b] += take
        nbytes -= take
        if BL[B_FILL, b] == B:
            BL[B_STATE, b] = CLOSED
            openb[pt] = -1
            _tree_set(T, CFG[C_P], b, BL[B_VALID, b])


@njit(cache=True)
def _trim(owner, CFG, BL, PC, ohead, T, K):
    """Invalidate every piece of ``owner`` (its blocks lose the bytes at once: TRIM)."""
    q = ohead[owner]
    while q >= 0:
        b = PC[P_BLK, q]
        BL[B_VALID, b] -= PC[P_LEN, q]
        K[K_VALID] -= PC[P_LEN, q]
        PC[P_LIVE, q] = 0
        if BL[B_STATE, b] == CLOSED:
            _tree_set(T, CFG[C_P], b, BL[B_VALID, b])
        q = PC[P_NO, q]
    ohead[owner] = -1


@njit(cache=True)
def _clean(v, counted, CFG, BL, PC, free, pfree, openb, ohead, T, M, K):
    """Clean closed block ``v``: append its valid pieces at the GC write point of its stream
    (counted as NAND writes), then erase it and return its pieces to the pool."""
    nhp = CFG[C_NHP]
    pt = nhp + BL[B_KIND, v] if nhp > 1 else 1
    q = BL[B_HEAD, v]
    moved = 0
    while q >= 0:
        nxt = PC[P_NB, q]
        if PC[P_LIVE, q]:
            owner = PC[P_OWNER, q]
            ln = PC[P_LEN, q]
            a = PC[P_PO, q]
            c = PC[P_NO, q]
            if a >= 0:
                PC[P_NO, a] = c
            else:
                ohead[owner] = c
            if c >= 0:
                PC[P_PO, c] = a
            PC[P_LIVE, q] = 0
            BL[B_VALID, v] -= ln
            _append(pt, owner, ln, PC[P_KIND, q], CFG, BL, PC, free, pfree, openb, ohead, T, M)
            moved += ln
            if counted:
                K[K_RELOC0 if PC[P_KIND, q] == 0 else K_RELOC1] += ln
        q = nxt
    q = BL[B_HEAD, v]
    n = M[M_NPCFREE]
    while q >= 0:
        pfree[n] = q
        n += 1
        q = PC[P_NB, q]
    M[M_NPCFREE] = n
    BL[B_HEAD, v] = -1
    BL[B_NP, v] = 0
    BL[B_VALID, v] = 0
    BL[B_FILL, v] = 0
    BL[B_STATE, v] = FREE
    _tree_set(T, CFG[C_P], v, INF)
    free[M[M_NFREE]] = v
    M[M_NFREE] += 1
    K[K_NAND_ALL] += moved
    K[K_ERASES_ALL] += 1
    if counted:
        K[K_NAND] += moved
        K[K_ERASES] += 1


@njit(cache=True)
def _place(owner, nbytes, kind, counted, CFG, BL, PC, free, pfree, openb, ohead, T, M, K):
    """Write ``nbytes`` of ``owner`` (whose bytes fit within the user capacity): clean blocks,
    greedily, until the write's blocks plus one per GC write point are free, then append.
    Returns OK, or NEED_PIECES / FAIL having written nothing (cleanings done stay done)."""
    B = CFG[C_B]
    nhp = CFG[C_NHP]
    pt = kind if nhp > 1 else 0
    b = openb[pt]
    room = B - BL[B_FILL, b] if b >= 0 else 0
    need = 0 if nbytes <= room else (nbytes - room + B - 1) // B
    if M[M_NPCFREE] < need + 2:                 # this write makes at most need + 1 pieces
        return NEED_PIECES
    guard = 0
    while M[M_NFREE] < need + nhp:
        guard += 1
        if T[1] >= B or guard > 64 * BL.shape[1] + 64:
            return FAIL                          # no closed block gives bytes back
        v = _tree_argmin(T, CFG[C_P])
        if M[M_NPCFREE] < BL[B_NP, v] + need + 4:   # a cleaning makes at most its pieces + 1
            return NEED_PIECES
        _clean(v, counted, CFG, BL, PC, free, pfree, openb, ohead, T, M, K)
    _append(pt, owner, nbytes, kind, CFG, BL, PC, free, pfree, openb, ohead, T, M)
    K[K_VALID] += nbytes
    K[K_HOST_ALL] += nbytes
    K[K_NAND_ALL] += nbytes
    if counted:
        K[K_HOST] += nbytes
        K[K_NAND] += nbytes
    return OK


@njit(cache=True)
def _drain(CFG, BL, PC, free, pfree, openb, Q, ohead, T, M, K):
    """Place waiting writes, oldest first, while they fit within the user capacity."""
    while M[M_QHEAD] < M[M_QTAIL]:
        j = M[M_QHEAD]
        nb = Q[Q_BYTES, j]
        if nb >= 0:
            if K[K_VALID] + nb > CFG[C_USER]:
                return OK                        # waits for the host's next trims
            owner = Q[Q_OWNER, j]
            ohead[owner] = -1
            r = _place(owner, nb, Q[Q_KIND, j], Q[Q_COUNTED, j] == 1, CFG, BL, PC, free, pfree, openb, ohead, T,
                       M, K)
            if r != OK:
                ohead[owner] = PENDING
                return r
        M[M_QHEAD] = j + 1
    M[M_QHEAD] = 0
    M[M_QTAIL] = 0
    return OK


@njit(cache=True)
def _cancel(owner, Q, M, K):
    """The host evicts a payload whose write still waits: it was sent, so its bytes count as
    host and NAND writes, but it is invalid on arrival and takes no block."""
    for j in range(M[M_QHEAD], M[M_QTAIL]):
        if Q[Q_OWNER, j] == owner and Q[Q_BYTES, j] >= 0:
            nb = Q[Q_BYTES, j]
            Q[Q_BYTES, j] = -1
            K[K_HOST_ALL] += nb
            K[K_NAND_ALL] += nb
            K[K_CANCELLED] += 1
            if Q[Q_COUNTED, j] == 1:
                K[K_HOST] += nb
                K[K_NAND] += nb
            return


@njit(cache=True)
def apply_events(ev, start, CFG, BL, PC, free, pfree, openb, Q, ohead, T, M, K):
    """Apply events ``ev[start:]`` (rows ``(op, owner, bytes, kind)``) in order; returns the index
    of the first event not applied (``len(ev)`` when done) with ``M[M_STATUS]`` saying why it
    stopped: the piece pool or the queue must grow (the caller grows it and calls again from
    that index), or FAIL. An event is applied whole or not at all, so a retry is exact.

    A write that would take the valid bytes beyond the user capacity waits, in order, until the
    host's trims make room: the node admits a payload and then evicts for it within one step,
    while a drive only takes writes to space the host has freed."""
    M[M_STATUS] = _drain(CFG, BL, PC, free, pfree, openb, Q, ohead, T, M, K)
    if M[M_STATUS] != OK:
        return start
    i = start
    n = ev.shape[0]
    while i < n:
        op = ev[i, 0]
        owner = ev[i, 1]
        if op == OP_TRIM:
            if ohead[owner] == PENDING:
                _cancel(owner, Q, M, K)
                ohead[owner] = -1
            else:
                _trim(owner, CFG, BL, PC, ohead, T, K)
            i += 1
            r = _drain(CFG, BL, PC, free, pfree, openb, Q, ohead, T, M, K)
            if r != OK:
                M[M_STATUS] = r
                return i
            continue
        nbytes = ev[i, 2]
        kind = ev[i, 3]
        counted = op == OP_WRITE
        if ohead[owner] != -1:
            # the host rewrote a payload it had not trimmed: the old bytes become invalid
            if ohead[owner] == PENDING:
                _cancel(owner, Q, M, K)
                ohead[owner] = -1
            else:
                _trim(owner, CFG, BL, PC, ohead, T, K)
            K[K_OVERWRITES] += 1
        if M[M_QHEAD] == M[M_QTAIL] and K[K_VALID] + nbytes <= CFG[C_USER]:
            r = _place(owner, nbytes, kind, counted, CFG, BL, PC, free, pfree, openb, ohead, T, M, K)
            if r != OK:
                M[M_STATUS] = r
                return i
        else:
            t = M[M_QTAIL]
            if t == Q.shape[1]:
                M[M_STATUS] = NEED_QUEUE
                return i
            Q[Q_OWNER, t] = owner
            Q[Q_BYTES, t] = nbytes
            Q[Q_KIND, t] = kind
            Q[Q_COUNTED, t] = 1 if counted else 0
            M[M_QTAIL] = t + 1
            ohead[owner] = PENDING
        i += 1
    M[M_STATUS] = OK
    return i
