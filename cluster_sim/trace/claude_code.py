"""Reader for Claude Code agentic sessions (WEKA format, ``../shared/traces/README.md`` §2).

Input
-----
Either a JSONL file (plain or gzip, recognised by its magic bytes or a
``.gz`` suffix) with **one session object per line**, or a **directory** of
upstream one-file-per-session JSON files (``*.json`` / ``*.json.gz``, read in
sorted name order; each file holds one session object). A session::

    {"id": "trace_0026", "block_size": 64, "hash_id_scope": "local",
     "requests": [{"t": 0.0, "type": "n", "model": "...", "in": 15291, "out": 2282,
                   "hash_ids": [1, 2, ...], "api_time": 46.25, ...},
                  {"t": 134.2, "type": "subagent", "requests": [ ...t relative to 134.2... ]},
                  ...]}

Mapping to the canonical table
------------------------------
* **Sessions.** Session ``k`` is the ``k``-th session object of the source
  (0-based: non-blank lines of a JSONL file, files of a directory);
  ``session_id = k``. The upstream ``id`` strings are kept, in that order, as
  the JSON list ``session_names`` in the schema metadata.
* **Sub-agents.** A request with ``"type": "subagent"`` and its own
  ``requests`` list is flattened into the parent's session, recursively, with
  absolute times ``t = parent t + child t``. Category: ``agent`` for the
  session's top-level requests, ``subagent`` for requests nested at any depth.
* **Request-level signals.** ``stop`` becomes ``stop_reason`` (an empty string or
  a missing field is unknown), ``think_time`` → ``think_time_s``, ``api_time`` →
  ``api_time_s`` (null when absent), and ``agent`` is 0 for the session's
  top-level requests and k for the requests of its k-th sub-agent entry (file
  order, nested entries numbered in the same sequence).
* **Order.** ``t`` must never decrease within one request list (a session's
  top-level list or one sub-agent's list; a sub-agent entry's own ``t`` counts
  in its parent list). After flattening, a session's requests are sorted
  stably by absolute time (ties keep file order, parent before nested);
  ``turn`` is the 1-based position in that order.
* **Duplicates.** Of two consecutive entries of one request list (file
  order) that are both plain requests with types ``s`` then ``n`` or ``n``
  then ``s``, identical ``hash_ids`` and the same ``in``, the first is kept
  and the second is dropped (the same call captured twice). Equal ``in`` is
  required because WEKA v8 has 7 ``n`` → ``s`` pairs with identical
  ``hash_ids`` that are distinct requests: a 4-token-output ``s`` request
  about 240 s after the ``n`` (a prompt-cache keep-alive), with ``in`` 14
  tokens larger (inside the unhashed partial block). Pairs are disjoint: a dropped request is not compared again, so
  ``s, n, s`` with equal hashes keeps the first and third. A sub-agent entry
  in between breaks adjacency. The count is the schema metadata
  ``duplicates_dropped`` (a decimal string).
* **Hash ids.** ``hash_id_scope: "local"`` (the default when a session does
  not say) means the ids are per session, sub-agents sharing the parent's
  namespace; they are namespaced as ``((k + 1) << 32) | id`` for session
  ``k``, so a local id must be ``< 2^32`` and two sessions never share an id;
  global (and mixed-scope) ids keep the high 32 bits zero when they are
  ``< 2^32`` and so never collide with a namespaced id. ``"global"`` ids are
  kept as they are. The reader option ``hash_id_scope_override`` (``local``
  / ``global``) forces one scope for every session. Every id is kept
  (``hash_ids`` cover only full blocks in the WEKA traces).
* **Blocks.** ``block_tokens`` is the sessions' ``block_size`` (64 for WEKA;
  every session must agree; 64 when absent).
* ``arrival_s`` of the table returned here is the time from **its session's
  start** (the table is "unplaced"; :mod:`cluster_sim.trace.placement` puts
  the sessions on one clock and orders all requests by arrival).
  ``request_id`` is the row index. The per-request ``model`` name is an extra
  string column (null when absent). The schema metadata also records
  ``session_end_s`` (per session, the latest ``t + api_time`` of its
  requests, ``api_time`` taken as 0 when absent: when the session's last
  response is back; used by lane placement) and ``hash_id_scope``.

Errors
------
A malformed session (invalid or truncated JSON, a missing field, a value of
the wrong type, a negative length, a non-finite or negative time, a time that
decreases within a request list, fewer ``hash_ids`` than the prompt's full
blocks, a local id that does not fit 32 bits) raises :class:`TraceError`
naming the file, the 1-based line (for a directory file: the line where the
session object starts, or the JSON error's line) and the field path, e.g.
``requests[12].requests[3].t``. Nothing is skipped silently.

Speed and memory: each line is parsed with :func:`json.loads`; each
request's ``hash_ids`` becomes one numpy array (type-checked by numpy's dtype
inference), a session's arrays are joined once and copied into the final
buffer, so the full WEKA v8 trace (710 sessions, 94 M block references)
converts in about 13 s with a peak RSS of about 1.4 GiB on 2 cores
(``scripts/bench_load.py``).
"""
from __future__ import annotations

import gzip
import json
import math
import zlib
from pathlib import Path
from typing import Iterator

import numpy as np
import pyarrow as pa

from cluster_sim.errors import ConfigError, TraceError
from cluster_sim.trace._json import loads as _json_loads
from cluster_sim.trace.files import session_files
from cluster_sim.trace.schema import MAX_ARRIVAL_S, build_table, validate_table

__all__ = [
    "read_claude_code",
    "CLAUDE_CODE_BLOCK_TOKENS",
    "LOCAL_ID_BITS",
    "namespace_local_ids",
    "SCOPES",
    "CATEGORIES",
    "validate_table_unplaced",
]

CLAUDE_CODE_BLOCK_TOKENS = 64
LOCAL_ID_BITS = 32
SCOPES = ("local", "global")
CATEGORIES = ("agent", "subagent")  # index 0: top level, 1: nested at any depth

_GZIP_MAGIC = b"\x1f\x8b"
_INT32_MAX = 2**31 - 1
_LOCAL_MAX = 2**LOCAL_ID_BITS - 1
#: sub-agents nested deeper than this are refused (the real traces nest a few levels)
MAX_SUBAGENT_DEPTH = 100
_EMPTY = np.zeros(0, dtype=np.uint64)


def namespace_local_ids(ids: np.ndarray, session_index: int) -> np.ndarray:
    """Session-local ids ``< 2^32`` → ``((session_index + 1) << 32) | id`` (uint64)."""
    return np.asarray(ids, dtype=np.uint64) | np.uint64((session_index + 1) << LOCAL_ID_BITS)


def _is_gzip(path: Path) -> bool:
    if path.name.endswith(".gz"):
        return True
    with open(path, "rb") as fh:
        return fh.read(2) == _GZIP_MAGIC


def _type_name(v) -> str:
    return "null" if v is None else type(v).__name__


class _Session:
    """Flattens one session object; collects its leaf requests in file (DFS) order."""

    __slots__ = ("path", "line", "index", "local", "block", "has_bool", "t", "end", "inp", "out",
                 "cat", "model", "ids", "dropped", "stop", "think", "api", "agent", "n_agents")

    def __init__(self, path: str, line: int, index: int, local: bool, block: int, has_bool: bool):
        self.path = path
        self.line = line
        self.index = index
        self.local = local
        self.block = block
        self.has_bool = has_bool
        self.t: list[float] = []
        self.end: list[float] = []
        self.inp: list[int] = []
        self.out: list[int] = []
        self.cat: list[int] = []
        self.model: list[str | None] = []
        self.ids: list[np.ndarray] = []
        self.dropped = 0
        self.stop: list[str | None] = []
        self.think: list[float] = []
        self.api: list[float] = []
        self.agent: list[int] = []
        self.n_agents = 0

    def fail(self, field: str, message: str):
        raise TraceError(self.path, message, line=self.line, field=field)

    def _number(self, r: dict, key: str, fp: str, *, required: bool) -> float | None:
        if key not in r or (not required and r[key] is None):
            if required:
                self.fail(f"{fp}.{key}", "missing field")
            return None
        v = r[key]
        if type(v) not in (int, float):
            self.fail(f"{fp}.{key}", f"expected a number of seconds, got {_type_name(v)} {v!r}")
        if not math.isfinite(v):
            self.fail(f"{fp}.{key}", f"must be finite, got {v!r}")
        if v < 0:
            self.fail(f"{fp}.{key}", f"must be >= 0, got {v!r}")
        if v > MAX_ARRIVAL_S:
            self.fail(f"{fp}.{key}", f"too large ({v!r} s > {MAX_ARRIVAL_S:g} s)")
        return float(v)

    def _int(self, r: dict, key: str, fp: str) -> int:
        if key not in r:
            self.fail(f"{fp}.{key}", "missing field")
        v = r[key]
        if type(v) is not int:
            self.fail(f"{fp}.{key}", f"expected an integer, got {_type_name(v)} {v!r}")
        if v < 0:
            self.fail(f"{fp}.{key}", f"must be >= 0, got {v}")
        if v > _INT32_MAX:
            self.fail(f"{fp}.{key}", f"too large ({v} > {_INT32_MAX})")
        return v

    def _hashes(self, ids, n_in: int, fp: str) -> np.ndarray:
        f = f"{fp}.hash_ids"
        if type(ids) is not list:
            self.fail(f, f"expected a list of integers, got {_type_name(ids)}")
        if len(ids) < n_in // self.block:
            self.fail(f, f"{len(ids)} hash ids for in={n_in} (needs at least {n_in // self.block} "
                         f"full {self.block}-token blocks)")
        if not ids:
            return _EMPTY
        try:
            arr = np.array(ids)
        except (ValueError, TypeError):
            arr = None
        bad = arr is None or arr.ndim != 1 or arr.dtype.kind not in "iu"
        if not bad and self.has_bool and arr.dtype.kind == "i":
            bad = any(type(h) is bool for h in ids)
        if bad:
            first = next((i for i, h in enumerate(ids) if type(h) is not int or not 0 <= h < 2**64), None)
            if first is None:  # all ints but not representable together (e.g. negative and >= 2^63)
                first = next((i for i, h in enumerate(ids) if h < 0), 0)
            h = ids[first]
            what = "a negative id" if type(h) is int and h < 0 else (
                "an id >= 2^64" if type(h) is int else f"{_type_name(h)} {h!r}")
            self.fail(f, f"expected integer hash ids in [0, 2^64), got {what} at index {first}")
        if arr.dtype.kind == "i":
            if arr.min() < 0:
                first = int(np.flatnonzero(arr < 0)[0])
                self.fail(f, f"expected integer hash ids in [0, 2^64), got a negative id {int(arr[first])} "
                             f"at index {first}")
        if self.local:
            if arr.max() > _LOCAL_MAX:
                first = int(np.flatnonzero(arr > _LOCAL_MAX)[0])
                self.fail(f, f"session-local hash id {int(arr[first])} at index {first} does not fit "
                             f"{LOCAL_ID_BITS} bits (needed to namespace local ids by session)")
            return namespace_local_ids(arr, self.index)
        return arr.astype(np.uint64, copy=False)

    def walk(self, reqs, base_t: float, fp: str, cat: int, agent: int = 0, depth: int = 0) -> None:
        if depth > MAX_SUBAGENT_DEPTH:
            self.fail(fp[:60] + " ... " + fp[-40:], f"sub-agents nested more than {MAX_SUBAGENT_DEPTH} deep")
        if type(reqs) is not list:
            self.fail(fp, f"expected a list of requests, got {_type_name(reqs)}")
        last_t = -math.inf
        prev_type = None  # the previous plain request of this list, for duplicate detection
        prev_in = prev_ids = None
        for i, r in enumerate(reqs):
            rp = f"{fp}[{i}]"
            if type(r) is not dict:
                self.fail(rp, f"expected a request object, got {_type_name(r)}")
            t = self._number(r, "t", rp, required=True)
            if t < last_t:
                self.fail(f"{rp}.t", f"t decreases ({t!r} after {last_t!r}) within one request list")
            last_t = t
            if "type" not in r:
                self.fail(f"{rp}.type", "missing field")
            typ = r["type"]
            if type(typ) is not str:
                self.fail(f"{rp}.type", f"expected a string, got {_type_name(typ)} {typ!r}")
            if typ == "subagent":
                if "requests" not in r:
                    self.fail(f"{rp}.requests", "missing field (a sub-agent needs its own request list)")
                self.n_agents += 1
                self.walk(r["requests"], base_t + t, f"{rp}.requests", 1, self.n_agents, depth + 1)
                prev_type = prev_in = prev_ids = None
                continue
            n_in = self._int(r, "in", rp)
            n_out = self._int(r, "out", rp)
            if "hash_ids" not in r:
                self.fail(f"{rp}.hash_ids", "missing field")
            ids = r["hash_ids"]
            arr = self._hashes(ids, n_in, rp)
            model = r.get("model")
            if model is not None and type(model) is not str:
                self.fail(f"{rp}.model", f"expected a string, got {_type_name(model)} {model!r}")
            api = self._number(r, "api_time", rp, required=False)
            think = self._number(r, "think_time", rp, required=False)
            stop = r.get("stop")
            if stop is not None and type(stop) is not str:
                self.fail(f"{rp}.stop", f"expected a string, got {_type_name(stop)} {stop!r}")
            if (prev_type is not None and prev_type != typ and typ in ("s", "n") and prev_type in ("s", "n")
                    and prev_in == n_in and prev_ids == ids):
                self.dropped += 1
                prev_type = prev_in = prev_ids = None
                continue
            prev_type, prev_in, prev_ids = typ, n_in, ids
            ta = base_t + t
            self.t.append(ta)
            self.end.append(ta + (api or 0.0))
            self.inp.append(n_in)
            self.out.append(n_out)
            self.cat.append(cat)
            self.model.append(model)
            self.ids.append(arr)
            self.stop.append(stop or None)
            self.think.append(math.nan if think is None else think)
            self.api.append(math.nan if api is None else api)
            self.agent.append(agent)


class _Collector:
    def __init__(self, scope_override: str | None):
        self.scope_override = scope_override
        self.block: int | None = None
        self.block_origin: str | None = None
        self.names: list[str | None] = []
        self.scopes: set[str] = set()
        self.t: list[np.ndarray] = []
        self.inp: list[np.ndarray] = []
        self.out: list[np.ndarray] = []
        self.cat: list[np.ndarray] = []
        self.sess: list[np.ndarray] = []
        self.turn: list[np.ndarray] = []
        self.model: list = []
        self.ids: list[np.ndarray] = []     # one array per session
        self.counts: list[np.ndarray] = []  # hashes per request, per session
        self.session_end: list[float] = []
        self.dropped = 0
        self.stop: list = []
        self.think: list[np.ndarray] = []
        self.api: list[np.ndarray] = []
        self.agent: list[np.ndarray] = []

    def add(self, obj, path: str, line: int, has_bool: bool) -> None:
        k = len(self.names)
        if type(obj) is not dict:
            raise TraceError(path, f"expected a session object, got {_type_name(obj)}", line=line)
        name = obj.get("id")
        if name is not None and type(name) not in (str, int):
            raise TraceError(path, f"expected a string, got {_type_name(name)} {name!r}", line=line, field="id")
        block = obj.get("block_size", CLAUDE_CODE_BLOCK_TOKENS)
        if type(block) is not int or block <= 0:
            raise TraceError(path, f"expected a positive integer, got {block!r}", line=line, field="block_size")
        if self.block is None:
            self.block, self.block_origin = block, f"{path}:{line}"
        elif block != self.block:
            raise TraceError(path, f"block_size {block} differs from {self.block} of the first session "
                                   f"({self.block_origin}); one trace must use one block size",
                             line=line, field="block_size")
        scope = obj.get("hash_id_scope", "local")
        if scope not in SCOPES:
            raise TraceError(path, f"must be one of {', '.join(SCOPES)}, got {scope!r}", line=line,
                             field="hash_id_scope")
        scope = self.scope_override or scope
        self.scopes.add(scope)
        if "requests" not in obj:
            raise TraceError(path, "missing field", line=line, field="requests")
        if k + 1 >= 2**32:
            raise TraceError(path, "too many sessions to namespace local hash ids", line=line)
        s = _Session(path, line, k, scope == "local", block, has_bool)
        s.walk(obj["requests"], 0.0, "requests", 0)

        n = len(s.t)
        t = np.asarray(s.t, dtype=np.float64)
        order = np.argsort(t, kind="stable")
        ordered = bool(np.all(order == np.arange(n)))
        take = (lambda a: a) if ordered else (lambda a: a[order])
        self.names.append(None if name is None else str(name))
        self.session_end.append(float(max(s.end)) if n else 0.0)
        self.dropped += s.dropped
        self.t.append(take(t))
        self.inp.append(take(np.asarray(s.inp, dtype=np.int32)))
        self.out.append(take(np.asarray(s.out, dtype=np.int32)))
        self.cat.append(take(np.asarray(s.cat, dtype=np.int8)))
        self.sess.append(np.full(n, k, dtype=np.int64))
        self.turn.append(np.arange(1, n + 1, dtype=np.int32))
        models = s.model if ordered else [s.model[i] for i in order]
        self.model.extend(models)
        self.stop.extend(s.stop if ordered else [s.stop[i] for i in order])
        self.think.append(take(np.asarray(s.think, dtype=np.float64)))
        self.api.append(take(np.asarray(s.api, dtype=np.float64)))
        self.agent.append(take(np.asarray(s.agent, dtype=np.int32)))
        arrays = s.ids if ordered else [s.ids[i] for i in order]
        self.counts.append(np.fromiter((len(a) for a in arrays), dtype=np.int64, count=n))
        # one array per session: the small per-request arrays go back to the heap right away
        self.ids.append(np.concatenate(arrays) if n else _EMPTY)
        s.ids = arrays = None

    def table(self, source: str) -> pa.Table:
        cat_idx = np.concatenate(self.cat) if self.cat else np.zeros(0, dtype=np.int8)
        counts = np.concatenate(self.counts) if self.counts else np.zeros(0, dtype=np.int64)
        offsets = np.zeros(len(counts) + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        # copy into one buffer, releasing each session's array as soon as it is copied: np.empty
        # pages are only touched when written, so the peak stays near one copy of the hashes
        values = np.empty(int(offsets[-1]), dtype=np.uint64)
        ids, self.ids = self.ids, []
        pos = 0
        for i in range(len(ids)):
            m = len(ids[i])
            values[pos:pos + m] = ids[i]
            pos += m
            ids[i] = None
        del ids
        category = pa.DictionaryArray.from_arrays(pa.array(cat_idx.astype(np.int32)), pa.array(list(CATEGORIES)))

        def cat_(parts, dtype):
            return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)

        table = build_table(
            arrival_s=cat_(self.t, np.float64),
            input_tokens=cat_(self.inp, np.int32),
            output_tokens=cat_(self.out, np.int32),
            block_hashes=(offsets, values),
            block_tokens=self.block or CLAUDE_CODE_BLOCK_TOKENS,
            source=source,
            session_id=cat_(self.sess, np.int64),
            category=category,
            turn=cat_(self.turn, np.int32),
            stop_reason=pa.array(self.stop, type=pa.string()),
            think_time_s=cat_(self.think, np.float64),
            api_time_s=cat_(self.api, np.float64),
            agent=cat_(self.agent, np.int32),
        )
        table = table.append_column(pa.field("model", pa.string()), pa.array(self.model, type=pa.string()))
        meta = dict(table.schema.metadata)
        meta.update({
            b"duplicates_dropped": str(self.dropped).encode(),
            b"sessions": str(len(self.names)).encode(),
            b"session_names": json.dumps(self.names).encode(),
            b"session_end_s": json.dumps(self.session_end).encode(),
            b"hash_id_scope": ("mixed" if len(self.scopes) > 1 else next(iter(self.scopes), "local")).encode(),
            b"placement": b"null",
        })
        return table.replace_schema_metadata(meta)


def _jsonl_sessions(p: Path, spath: str) -> Iterator[tuple[object, str, int, bool]]:
    opener = gzip.open if _is_gzip(p) else open
    lineno = 0
    try:
        with opener(p, "rb") as fh:
            for lineno, raw in enumerate(fh, start=1):
                if not raw.strip():
                    continue
                yield _loads(raw, spath, lineno), spath, lineno, (b"true" in raw or b"false" in raw)
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise TraceError(spath, f"corrupt or truncated gzip stream ({exc})", line=lineno + 1) from None
    except OSError as exc:
        raise TraceError(spath, f"cannot read file ({exc})") from None


def _loads(raw: bytes, spath: str, lineno: int, *, multiline: bool = False):
    return _json_loads(raw, spath, lineno, multiline=multiline)


def _dir_sessions(d: Path) -> Iterator[tuple[object, str, int, bool]]:
    files = session_files(d)
    if not files:
        raise TraceError(str(d), "directory holds no session files (*.json, *.json.gz)")
    for f in files:
        spath = str(f)
        opener = gzip.open if _is_gzip(f) else open
        try:
            with opener(f, "rb") as fh:
                raw = fh.read()
        except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
            raise TraceError(spath, f"corrupt or truncated gzip stream ({exc})") from None
        except OSError as exc:
            raise TraceError(spath, f"cannot read file ({exc})") from None
        if not raw.strip():
            raise TraceError(spath, "empty session file", line=1)
        stripped = raw.lstrip()
        start_line = 1 + raw[: len(raw) - len(stripped)].count(b"\n")
        obj = _loads(raw, spath, 1, multiline=True)
        yield obj, spath, start_line, (b"true" in raw or b"false" in raw)


def read_claude_code(path: str | Path, *, hash_id_scope_override: str | None = None) -> pa.Table:
    """Read a Claude Code session trace (JSONL(.gz) file or directory of JSON files).

    Returns the *unplaced* canonical table: sessions in source order, each
    session's requests sorted by time from the session start (see the module
    docstring); :func:`cluster_sim.trace.placement.place_sessions` turns it
    into a replayable trace. Raises :class:`TraceError` for a malformed
    session and :class:`ConfigError` for a bad ``hash_id_scope_override``.
    """
    if hash_id_scope_override is not None and hash_id_scope_override not in SCOPES:
        raise ConfigError("workload.hash_id_scope_override",
                          f"must be one of {', '.join(SCOPES)} (or null), got {hash_id_scope_override!r}")
    p = Path(path)
    spath = str(path)
    if not p.exists():
        raise TraceError(spath, "no such file or directory")
    sessions = _dir_sessions(p) if p.is_dir() else _jsonl_sessions(p, spath)
    col = _Collector(hash_id_scope_override)
    for obj, fpath, line, has_bool in sessions:
        col.add(obj, fpath, line, has_bool)
    del sessions
    table = col.table(f"claude_code:{p.name}")
    del col
    _release_heap()
    validate_table_unplaced(table, spath)
    return table


def _release_heap() -> None:
    """Best effort: hand the C heap's free pages back to the OS (glibc ``malloc_trim``).

    Parsing leaves hundreds of MB of freed small numpy buffers in glibc's heap;
    returning them keeps the peak RSS of the steps that follow lower.
    """
    try:
        import ctypes

        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass


def validate_table_unplaced(table: pa.Table, path: str) -> None:
    """:func:`validate_table` for an unplaced table (arrival times restart in each session)."""
    if table.num_rows == 0:
        validate_table(table, path)
        return
    # the canonical check wants non-decreasing arrivals: check on a session-ordered clock
    arrival = table.column("arrival_s").to_numpy()
    sess = table.column("session_id").to_numpy()
    offset = sess.astype(np.float64) * (float(arrival.max()) + 1.0)
    shifted = table.set_column(0, "arrival_s", pa.array(arrival + offset))
    validate_table(shifted, path, max_arrival_s=None)   # the reader bounds each time (MAX_ARRIVAL_S)
