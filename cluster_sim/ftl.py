"""A flash translation layer with greedy garbage collection, driven by a node's SSD writes
and evictions (``hardware.ssd.ftl=greedy``; simulation-model §6, docs/decisions.md item 31).

The drive is modelled as one log-structured FTL over ``N`` erase blocks of ``B`` bytes
(``hardware.ssd.erase_block_bytes``; ``auto`` = the user capacity / 293.6, the number of
reclaim units a Samsung PM9D3a 3.84 TB reports). Its raw capacity is
``user / (1 - overprovision)``: the share ``overprovision`` of it is hidden from the host.

* **Write.** A payload's bytes are appended to the open block of its write point; a block
  that fills is closed and the next write opens a free one. Bytes are kept exactly: a
  payload is a list of *pieces* ``(block, bytes)``, usually one or two, since a payload
  may straddle a block boundary. This is the granularity: a byte-exact extent map, no
  pages or mapping units (a KV payload is MBs, written and trimmed whole).
* **Trim.** Evicting a payload invalidates its pieces; the drive learns it at once (TRIM /
  deallocate), so invalid bytes are never relocated.
* **Garbage collection.** Before a write that needs new blocks, while fewer than
  ``needed + R`` blocks are free (``R`` = one per GC write point), the closed block with
  the fewest valid bytes (lowest index among equals) is cleaned: its valid pieces are
  appended to the GC write point of its stream and counted as NAND writes, then it is
  erased. A min-tree over the blocks' valid bytes finds it in O(log N).
* **Waiting writes.** The node admits a payload and then evicts to make room; a write that
  would take the valid bytes beyond the user capacity waits, in order, for the trims that
  follow (a drive only takes writes into space the host has freed). A payload evicted while
  its write waits counts as host and NAND bytes but takes no block.
* **Streams.** ``none``: one host and one GC write point. ``by_kind``: each payload kind
  (FA, STATE) has its own host and GC write points, as NVMe streams / FDP reclaim unit
  handles with persistent isolation allow, so the kinds never share a block.

The kernels are compiled (numba) and run on batches of events the node queues
(``write``/``trim`` are list appends); results are exact integers and deterministic.
Nothing here knows about Ray, MLflow or Hydra.
"""
from __future__ import annotations

import math

import numpy as np

from ._ftl_ops import OP_TRIM, OP_WRITE, OP_WRITE_UNCOUNTED
from .errors import ConfigError

FTL_MODES = ("ideal", "greedy")
STREAM_MODES = ("none", "by_kind")

# ``erase_block_bytes: auto``: the drive keeps as many erase units, per byte of user capacity,
# as a Samsung PM9D3a 3.84 TB (MZOL63T8HDLT) reports for FDP: Reclaim Unit Nominal Size
# 13,079,937,024 B (``nvme fdp configs``, see docs/decisions.md item 31) over 3.84 TB.
RU_BYTES_PM9D3A = 13_079_937_024
USER_BYTES_PM9D3A = 3_840_000_000_000
AUTO_BLOCKS_PER_USER_CAPACITY = USER_BYTES_PM9D3A / RU_BYTES_PM9D3A    # 293.6



def auto_erase_block_bytes(user_bytes: int) -> int:
    return max(1, int(round(user_bytes / AUTO_BLOCKS_PER_USER_CAPACITY)))


def geometry(user_bytes: int, overprovision: float, erase_block_bytes: int) -> tuple[int, int]:
    """``(blocks, spare_blocks)``: ``floor(raw / B)`` erase blocks, of which those beyond
    ``ceil(user / B)`` are spare."""
    raw = user_bytes / (1.0 - overprovision)
    n = int(math.floor(raw / erase_block_bytes))
    return n, n - -(-user_bytes // erase_block_bytes)


def min_spare_blocks(streams: str) -> int:
    """Spare blocks the FTL needs to be able to free a block whatever the host does: the open
    host and GC blocks of every stream, one free block per GC write point, two of margin."""
    k = 2 if streams == "by_kind" else 1
    return 3 * k + 2


def check_geometry(user_bytes: int, overprovision: float, erase_block_bytes: int, streams: str,
                   prefix: str = "hardware.ssd") -> None:
    n, spare = geometry(user_bytes, overprovision, erase_block_bytes)
    need = min_spare_blocks(streams)
    if spare < need:
        raise ConfigError(f"{prefix}.overprovision",
                          f"{overprovision:g} leaves {spare} spare erase block(s) of {erase_block_bytes:,} B "
                          f"on a {user_bytes:,} B SSD (ftl=greedy, streams={streams} needs at least {need}); "
                          f"raise it or lower {prefix}.erase_block_bytes")


def make_ftl(hw, n_owners: int) -> "GreedyFTL | None":
    """The FTL of a node with hardware ``hw`` (None with ``ftl=ideal`` or no SSD)."""
    s = hw.ssd
    if s.ftl != "greedy" or hw.ssd_bytes <= 0:
        return None
    return GreedyFTL(hw.ssd_bytes, s.overprovision, s.erase_block_bytes, s.streams, n_owners)


def _kernels():
    from . import _ftl_jit
    return _ftl_jit


class GreedyFTL:
    """One node's FTL. ``write``/``trim`` queue events (a list append); :meth:`flush` applies
    them in order with the compiled kernel (``FLUSH_EVENTS`` at a time, and before results).

    ``n_owners``: payload handles are ints in ``[0, n_owners)``; ``kind`` is 0 (FA) or 1 (STATE).
    """

    FLUSH_EVENTS = 8192

    def __init__(self, user_bytes: int, overprovision: float, erase_block_bytes: int | str, streams: str,
                 n_owners: int, prefix: str = "hardware.ssd"):
        J = self.J = _kernels()
        if erase_block_bytes == "auto":
            erase_block_bytes = auto_erase_block_bytes(user_bytes)
        B = int(erase_block_bytes)
        check_geometry(user_bytes, overprovision, B, streams, prefix)
        self.prefix = prefix
        self.user_bytes = int(user_bytes)
        self.overprovision = float(overprovision)
        self.block_bytes = B
        self.streams = streams
        n, _ = geometry(user_bytes, overprovision, B)
        self.n_blocks = n
        k = 2 if streams == "by_kind" else 1
        P = 1
        while P < n:
            P *= 2
        self.CFG = np.array([B, self.user_bytes, k, P], dtype=np.int64)
        self.T = np.full(2 * P, J.INF, dtype=np.int64)
        self.BL = np.zeros((J.N_BL, n), dtype=np.int64)
        self.BL[J.B_HEAD] = -1
        self.free = np.arange(n - 1, -1, -1, dtype=np.int64)   # popped from the end: block 0 first
        self.openb = np.full(2 * k, -1, dtype=np.int64)        # host points, then GC points
        self.M = np.zeros(J.N_META, dtype=np.int64)
        self.M[J.M_NFREE] = n
        self.K = np.zeros(J.N_COUNTERS, dtype=np.int64)
        self.ohead = np.full(int(n_owners), -1, dtype=np.int32)   # first piece per payload (4 B each)
        self.PC = np.zeros((J.N_PC, 0), dtype=np.int64)
        self.pfree = np.zeros(0, dtype=np.int64)
        self._grow_pieces(max(4096, 4 * n))
        self.Q = np.zeros((J.N_Q, 1024), dtype=np.int64)
        self._buf: list[int] = []
        self._limit = 4 * self.FLUSH_EVENTS
        self.flush()                # compiles (or loads) the kernels now, outside any timed replay

    def _grow_pieces(self, cap: int) -> None:
        """Grow the piece pool to ``cap`` (pieces keep their index; new ones are popped lowest first)."""
        J = self.J
        n0 = self.PC.shape[1]
        PC = np.full((J.N_PC, cap), -1, dtype=np.int64)
        PC[:, :n0] = self.PC
        PC[J.P_LIVE, n0:] = 0
        nf = int(self.M[J.M_NPCFREE])
        pf = np.empty(cap, dtype=np.int64)
        pf[:nf] = self.pfree[:nf]
        fresh = np.arange(cap - 1, n0 - 1, -1, dtype=np.int64)
        pf[nf:nf + len(fresh)] = fresh
        self.PC, self.pfree = PC, pf
        self.M[J.M_NPCFREE] = nf + len(fresh)

    def _grow_queue(self) -> None:
        J = self.J
        h, t = int(self.M[J.M_QHEAD]), int(self.M[J.M_QTAIL])
        Q = np.zeros((J.N_Q, 2 * self.Q.shape[1]), dtype=np.int64)
        Q[:, :t - h] = self.Q[:, h:t]
        self.Q = Q
        self.M[J.M_QHEAD], self.M[J.M_QTAIL] = 0, t - h

    # ---- the node's hooks ----------------------------------------------------------------
    def write(self, owner: int, nbytes: int, kind: int, counted: bool) -> None:
        """The host writes ``nbytes`` of payload ``owner`` (of ``kind``); ``counted``: in the metrics."""
        self._buf += (OP_WRITE if counted else OP_WRITE_UNCOUNTED, owner, nbytes, kind)
        if len(self._buf) >= self._limit:
            self.flush()

    def trim(self, owner: int) -> None:
        """The host evicts payload ``owner``: its bytes become invalid."""
        self._buf += (OP_TRIM, owner, 0, 0)
        if len(self._buf) >= self._limit:
            self.flush()

    def flush(self) -> None:
        ev = np.asarray(self._buf, dtype=np.int64).reshape(-1, 4)
        self._buf = []
        self.apply(ev)

    def apply(self, ev: np.ndarray) -> None:
        """Apply event rows ``ev`` (``(op, owner, bytes, kind)``, int64, C order), after the queued
        ones: what the compiled engine logs (its ``elog`` rows) in the order of :meth:`write` / :meth:`trim`."""
        if self._buf:
            self.flush()
        J = self.J
        i = 0
        while True:
            i = J.apply_events(ev, i, self.CFG, self.BL, self.PC, self.free, self.pfree, self.openb, self.Q,
                               self.ohead, self.T, self.M, self.K)
            status = int(self.M[J.M_STATUS])
            if status == J.OK:
                return
            if status == J.NEED_PIECES:
                self._grow_pieces(2 * self.PC.shape[1])
            elif status == J.NEED_QUEUE:
                self._grow_queue()
            else:
                raise ConfigError(f"{self.prefix}.overprovision",
                                  f"the flash translation layer found no erase block to clean (valid "
                                  f"{int(self.K[J.K_VALID]):,} B on a {self.user_bytes:,} B SSD, "
                                  f"{self.n_blocks} blocks of {self.block_bytes:,} B): raise it or lower "
                                  f"{self.prefix}.erase_block_bytes")

    # ---- results ---------------------------------------------------------------------------
    def counters(self) -> dict:
        """Counted (warm-up excluded) host, NAND and relocated bytes and erases; ``*_all`` with
        warm-up; bytes valid now and bytes of writes waiting for room; rewrites of a payload not
        trimmed first (0 from a node); writes evicted while they waited."""
        self.flush()
        J, K = self.J, self.K
        h, t = int(self.M[J.M_QHEAD]), int(self.M[J.M_QTAIL])
        waiting = self.Q[J.Q_BYTES, h:t]
        return {"host_bytes": int(K[J.K_HOST]), "nand_bytes": int(K[J.K_NAND]), "erases": int(K[J.K_ERASES]),
                "relocated_bytes_kind0": int(K[J.K_RELOC0]), "relocated_bytes_kind1": int(K[J.K_RELOC1]),
                "host_bytes_all": int(K[J.K_HOST_ALL]), "nand_bytes_all": int(K[J.K_NAND_ALL]),
                "erases_all": int(K[J.K_ERASES_ALL]), "valid_bytes": int(K[J.K_VALID]),
                "waiting_bytes": int(waiting[waiting >= 0].sum()), "overwrites": int(K[J.K_OVERWRITES]),
                "cancelled": int(K[J.K_CANCELLED])}

    def check(self) -> None:
        """Internal consistency (tests): per-block valid bytes equal the live pieces in them, the
        tree holds exactly the closed blocks, the free stack counts the free blocks, every live
        piece's owner has a list, valid bytes never exceed the user capacity."""
        self.flush()
        J, BL, PC = self.J, self.BL, self.PC
        live = PC[J.P_LIVE] == 1
        per_block = np.bincount(PC[J.P_BLK, live], weights=PC[J.P_LEN, live], minlength=self.n_blocks)
        assert np.array_equal(per_block.astype(np.int64), BL[J.B_VALID]), "valid bytes per block"
        assert int(BL[J.B_VALID].sum()) == int(self.K[J.K_VALID]) <= self.user_bytes, "valid total"
        P = int(self.CFG[J.C_P])
        leaves = self.T[P:P + self.n_blocks]
        closed = BL[J.B_STATE] == J.CLOSED
        assert np.array_equal(leaves[closed], BL[J.B_VALID, closed]) and (leaves[~closed] == J.INF).all(), "tree"
        assert int((BL[J.B_STATE] == J.FREE).sum()) == int(self.M[J.M_NFREE]), "free count"
        assert (BL[J.B_FILL] <= self.block_bytes).all(), "block fill"
        owners = np.unique(PC[J.P_OWNER, live])
        assert (self.ohead[owners] >= 0).all(), "owner lists"
