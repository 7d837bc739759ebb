"""Azure LLM inference trace 2023 (``../shared/traces/README.md`` §3): arrivals only.

The CSV (plain or gzip) has the header ``TIMESTAMP,ContextTokens,GeneratedTokens``
(columns found by name; extra columns are ignored) and one row per request,
e.g. ``2023-11-16 18:15:46.6805900,374,44``. The timestamp is a wall-clock
datetime with up to 9 fractional digits (``T`` or a space between date and
time; no time zone); it is read exactly, in integer nanoseconds.

There are no block hashes and no sessions, so the trace cannot be replayed on
its own. It serves as

* an arrival process for placing Claude Code sessions
  (``workload.placement=arrivals``, :mod:`cluster_sim.trace.placement`), and
* ``workload.format=azure``: the synthetic generator
  (:mod:`cluster_sim.trace.synthetic`, knobs ``workload.synthetic.*``) with
  **one session per Azure arrival**, session ``k`` starting at the ``k``-th
  arrival and its first user message ``ContextTokens[k]`` tokens long
  (:func:`generate_from_arrivals`).
"""
from __future__ import annotations

import csv
import gzip
import inspect
import io
import json
import re
import zlib
from dataclasses import asdict, replace
from datetime import date
from pathlib import Path

import numpy as np
import pyarrow as pa

from cluster_sim import libm
from cluster_sim.errors import ConfigError, TraceError

__all__ = ["read_azure_arrivals", "generate_from_arrivals", "read_azure_workload", "AZURE_COLUMNS"]

AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
_GZIP_MAGIC = b"\x1f\x8b"
_INT32_MAX = 2**31 - 1
_TS_RE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?$")
_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()


def _is_gzip(path: Path) -> bool:
    if path.name.endswith(".gz"):
        return True
    with open(path, "rb") as fh:
        return fh.read(2) == _GZIP_MAGIC


def _timestamp_ns(text: str) -> int | None:
    """Nanoseconds since 1970-01-01 of a naive ``YYYY-MM-DD HH:MM:SS[.fffffffff]``, or None."""
    m = _TS_RE.match(text.strip())
    if not m:
        return None
    y, mo, d, hh, mm, ss, frac = m.groups()
    try:
        days = date(int(y), int(mo), int(d)).toordinal() - _EPOCH_ORDINAL
    except ValueError:
        return None
    h, mi, s = int(hh), int(mm), int(ss)
    if h > 23 or mi > 59 or s > 60:
        return None
    ns = int((frac or "").ljust(9, "0"))
    return ((days * 24 + h) * 60 + mi) * 60 * 1_000_000_000 + s * 1_000_000_000 + ns


def _format_ns(t: int) -> str:
    days = t // (86_400 * 10**9)
    return date.fromordinal(_EPOCH_ORDINAL + days).isoformat()


def read_azure_arrivals(path: str | Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Read an Azure LLM inference CSV(.gz).

    Returns ``(arrival_s, context_tokens, generated_tokens)``: float64 seconds
    from the first timestamp, and int32 token counts. Raises
    :class:`TraceError` naming the file, the 1-based line (the header is line
    1) and the column for a missing column, a malformed timestamp, a
    timestamp earlier than the previous row's, a token count that is not a
    non-negative integer, or a row with too few fields. An empty file (no
    header) or one without rows is an error too.
    """
    p = Path(path)
    spath = str(path)
    if not p.is_file():
        raise TraceError(spath, "no such file" if not p.exists() else "not a regular file")
    try:
        if _is_gzip(p):
            with gzip.open(p, "rb") as fh:
                data = fh.read()
        else:
            data = p.read_bytes()
        text = data.decode("utf-8-sig")
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise TraceError(spath, f"corrupt or truncated gzip stream ({exc})") from None
    except UnicodeDecodeError as exc:
        raise TraceError(spath, f"not UTF-8 text ({exc})") from None
    except OSError as exc:
        raise TraceError(spath, f"cannot read file ({exc})") from None

    # newline="": the csv module sees every line ending (\n, \r\n and a bare \r) and ends a row there
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        return _rows(reader, spath)
    except csv.Error as exc:   # e.g. a field over the csv module's size limit, a quote in the wrong place
        raise TraceError(spath, f"malformed CSV ({exc})", line=reader.line_num) from None


def _rows(reader, spath: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    header = next(reader, None)
    if header is None:
        raise TraceError(spath, "empty file (expected the header TIMESTAMP,ContextTokens,GeneratedTokens)", line=1)
    names = [h.strip() for h in header]
    cols = []
    for c in AZURE_COLUMNS:
        if c not in names:
            raise TraceError(spath, f"header has no column {c!r} (header: {','.join(names)})", line=1, field=c)
        cols.append(names.index(c))
    i_ts, i_ctx, i_gen = cols
    width = max(cols) + 1

    ts: list[int] = []
    ctx: list[int] = []
    gen: list[int] = []
    last = None
    for row in reader:
        line = reader.line_num
        if not row or (len(row) == 1 and not row[0].strip()):
            continue
        if len(row) < width:
            missing = next(c for c, i in zip(AZURE_COLUMNS, cols) if i >= len(row))
            raise TraceError(spath, f"row has {len(row)} fields, expected {len(names)}", line=line, field=missing)
        t = _timestamp_ns(row[i_ts])
        if t is None:
            raise TraceError(spath, f"expected a timestamp like 2023-11-16 18:15:46.6805900, got {row[i_ts]!r}",
                             line=line, field="TIMESTAMP")
        if last is not None and t < last:
            raise TraceError(spath, f"timestamp {row[i_ts].strip()!r} is earlier than the previous row's; "
                                    "the trace must be sorted by time", line=line, field="TIMESTAMP")
        last = t
        vals = []
        for name, i in (("ContextTokens", i_ctx), ("GeneratedTokens", i_gen)):
            s = row[i].strip()
            if not s.isdigit() or not s.isascii():
                raise TraceError(spath, f"expected a non-negative integer, got {row[i]!r}", line=line, field=name)
            v = int(s) if len(s) <= 12 else _INT32_MAX + 1   # int() refuses more than 4300 digits
            if v > _INT32_MAX:
                raise TraceError(spath, f"too large ({s if len(s) <= 12 else s[:12] + '...'} > {_INT32_MAX})",
                                 line=line, field=name)
            vals.append(v)
        ts.append(t)
        ctx.append(vals[0])
        gen.append(vals[1])
    if not ts:
        raise TraceError(spath, "no rows after the header", line=2)
    # from the first timestamp, in Python ints: a date past 2262 has no int64 nanoseconds since 1970
    t0 = ts[0]
    if ts[-1] - t0 >= 2**63:
        raise TraceError(spath, f"the timestamps span more than 292 years (from {_format_ns(t0)} on)",
                         line=reader.line_num, field="TIMESTAMP")
    t_ns = np.asarray([t - t0 for t in ts], dtype=np.int64)
    arrival = t_ns.astype(np.float64) / 1e9
    return arrival, np.asarray(ctx, dtype=np.int32), np.asarray(gen, dtype=np.int32)


# --------------------------------------------------------------------------- #
# workload.format=azure: the synthetic generator driven by Azure arrivals


def _generate_supports_hooks() -> bool:
    from cluster_sim.trace.synthetic import generate

    params = inspect.signature(generate).parameters
    return "session_starts" in params and "first_message_tokens" in params


def _shift_session_starts(table: pa.Table, starts: np.ndarray) -> pa.Table:
    """Move every session of a generated table so that it starts at ``starts[session_id]``.

    A generated session starts with its turn 1 (the generator always keeps
    it); the session's time offsets are kept. Rows are re-sorted by (arrival,
    session, turn), the generator's own order, and renumbered.
    """
    if table.num_rows == 0:
        return table
    arrival = table.column("arrival_s").to_numpy()
    sess = table.column("session_id").to_numpy()
    turn = table.column("turn").to_numpy()
    n = len(starts)
    orig = np.full(n, np.inf)
    np.minimum.at(orig, sess, arrival)
    new = arrival - orig[sess] + starts[sess]
    order = np.lexsort((turn, sess, new))
    table = table.take(pa.array(order))
    table = table.set_column(0, table.schema.field("arrival_s"), pa.array(new[order], type=pa.float64()))
    return table.set_column(1, table.schema.field("request_id"), pa.array(np.arange(len(order), dtype=np.int64)))


def generate_from_arrivals(spec, seed: int, session_starts: np.ndarray, first_message_tokens: np.ndarray,
                           *, source: str = "azure") -> pa.Table:
    """The synthetic workload of ``spec`` with ``spec.num_sessions`` sessions placed on given starts.

    Session ``k`` starts at ``session_starts[k]`` and its first user message
    is ``first_message_tokens[k]`` tokens long (shortened by the generator
    when it would not fit ``max_input_tokens``).

    When :func:`cluster_sim.trace.synthetic.generate` accepts the keyword
    hooks ``session_starts`` and ``first_message_tokens`` it is called with
    them (exact). Otherwise this falls back to: the starts by post-processing
    (every session shifted in time, keeping its internal gaps), and first
    messages drawn from a lognormal fitted to ``first_message_tokens`` (its
    median and the standard deviation of its logs); the schema metadata key
    ``first_message_tokens`` says which (``exact`` / ``lognormal_fit``).
    """
    from cluster_sim.trace.synthetic import generate

    starts = np.asarray(session_starts, dtype=np.float64)
    first = np.asarray(first_message_tokens, dtype=np.int64)
    n = spec.num_sessions
    if len(starts) != n or len(first) != n:
        raise ValueError(f"need {n} session starts and first-message lengths, got {len(starts)} and {len(first)}")
    if _generate_supports_hooks():
        table = generate(spec, seed, session_starts=starts, first_message_tokens=first)
        mode = "exact"
    else:
        pos = np.maximum(first, 1).astype(np.float64)
        median = max(int(round(float(np.median(pos)))), 1)
        sigma = float(np.std(libm.log(pos))) if len(pos) > 1 else 0.0
        table = _shift_session_starts(generate(replace(spec, first_message_tokens=median,
                                                       first_message_sigma=sigma), seed), starts)
        mode = "lognormal_fit"
    meta = dict(table.schema.metadata or {})
    meta[b"source"] = source.encode()
    meta[b"first_message_tokens"] = mode.encode()
    return table.replace_schema_metadata(meta)


def read_azure_workload(path: str | Path, synthetic_knobs: dict | None, seed: int) -> pa.Table:
    """``workload.format=azure``: one synthetic session per arrival of the Azure CSV at ``path``.

    ``synthetic_knobs`` (``workload.synthetic.*``) override
    :func:`~cluster_sim.trace.synthetic.default_spec`; ``num_sessions``
    defaults to the number of arrivals (a smaller value uses the first ones;
    a larger one is a ConfigError); ``session_rate_per_s`` is not used.
    """
    from cluster_sim.trace.synthetic import default_spec, spec_from_dict

    arrival, ctx, _gen = read_azure_arrivals(path)
    user = dict(synthetic_knobs or {})
    knobs = dict(asdict(default_spec()))
    knobs.update(user)
    n = len(arrival)
    if "num_sessions" in user:
        spec = spec_from_dict(knobs)
        if spec.num_sessions > n:
            raise ConfigError("workload.synthetic.num_sessions",
                              f"{spec.num_sessions} sessions but {path} has only {n} arrivals")
        n = spec.num_sessions
    knobs["num_sessions"] = n
    spec = spec_from_dict(knobs)
    table = generate_from_arrivals(spec, seed, arrival[:n], ctx[:n], source=f"azure:{Path(path).name}")
    meta = dict(table.schema.metadata)
    meta[b"placement"] = json.dumps({"placement": "arrivals", "arrivals": str(path), "sessions": n},
                                    sort_keys=True).encode()
    return table.replace_schema_metadata(meta)
