"""A min-heap with lazy deletion and re-keying, shared by score-based policies.

Entries are ``(key, tie, item, version)``; an item's current version lives in a
dict, so re-keying is "push a fresh entry" and removal is "forget the version":
stale entries are skipped when they reach the top. When stale entries exceed
``2 x live + slack`` the heap is rebuilt from its live entries, bounding memory.
Ties on equal keys break by ``tie`` (callers pass a deterministic value, e.g. the
logical stamp or the interned id), then by item, so pops are deterministic.
"""
from __future__ import annotations

import heapq
from typing import Iterator


class LazyHeap:
    __slots__ = ("_h", "_ver", "_key", "_next", "stale_pops", "rebuilds", "slack", "journal")

    def __init__(self, slack: int = 64):
        self._h: list[tuple[float, int, int, int]] = []   # (key, tie, item, version)
        self._ver: dict[int, int] = {}
        self._key: dict[int, tuple[float, int]] = {}
        self._next = 0
        self.stale_pops = 0
        self.rebuilds = 0
        self.slack = slack
        self.journal: list | None = None   # when a list: (item, previous key or None) per change

    def undo(self) -> None:
        """Revert every push, pop and discard recorded in ``journal`` since it was set; then stop
        recording. Lets a caller make a tentative series of changes atomic."""
        j, self.journal = self.journal, None
        for item, old in reversed(j or ()):
            if old is None:
                self.discard(item)
            else:
                self.push(item, old[0], tie=old[1])

    def __len__(self) -> int:
        return len(self._ver)

    def __contains__(self, item: int) -> bool:
        return item in self._ver

    @property
    def size_with_stale(self) -> int:
        return len(self._h)

    def push(self, item: int, key: float, tie: int = 0) -> None:
        """Insert ``item`` or re-key it (its older entries become stale)."""
        if self.journal is not None:
            self.journal.append((item, self._key.get(item)))     # (key, tie) or None
        self._next += 1
        v = self._next
        self._ver[item] = v
        self._key[item] = (key, tie)
        heapq.heappush(self._h, (key, tie, item, v))
        if len(self._h) > 2 * len(self._ver) + self.slack:
            self._rebuild()

    def discard(self, item: int) -> None:
        """Forget ``item`` (its entries become stale)."""
        if self._ver.pop(item, None) is not None:
            old = self._key.pop(item)
            if self.journal is not None:
                self.journal.append((item, old))

    def _clean_top(self) -> None:
        h, ver = self._h, self._ver
        while h and ver.get(h[0][2]) != h[0][3]:
            heapq.heappop(h)
            self.stale_pops += 1

    def peek(self) -> tuple[float, int, int] | None:
        """``(key, tie, item)`` of the current minimum, or None."""
        self._clean_top()
        if not self._h:
            return None
        k, t, i, _ = self._h[0]
        return k, t, i

    def pop(self) -> tuple[float, int, int] | None:
        """Remove and return ``(key, tie, item)`` of the current minimum (the item leaves the heap)."""
        self._clean_top()
        if not self._h:
            return None
        k, t, i, _ = heapq.heappop(self._h)
        del self._ver[i]
        del self._key[i]
        if self.journal is not None:
            self.journal.append((i, (k, t)))
        return k, t, i

    def key_of(self, item: int) -> float | None:
        """The current key of ``item``, or None if it is not in the heap (O(1))."""
        e = self._key.get(item)
        return None if e is None else e[0]

    def items(self) -> Iterator[int]:
        return iter(self._ver)

    def _rebuild(self) -> None:
        ver = self._ver
        self._h = [e for e in self._h if ver.get(e[2]) == e[3]]
        heapq.heapify(self._h)
        self.rebuilds += 1
