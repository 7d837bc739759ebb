"""Property-based fuzzing of every trace reader and of the command line (issue #17).

Each property feeds generated hostile input and asserts what a user must see: a
table that simulates, or one clear line (a :class:`UserError`, exit status 2)
— never a Python traceback, never a partial file left behind (no converted-trace
cache entry for a failed read, no temporary file, no run folder for a failed
run). The size of the search is the Hypothesis profile's (``ci``: 50 examples
per property, derandomized, so CI is repeatable and bounded;
``HYPOTHESIS_PROFILE=thorough`` runs 2000).
"""
from __future__ import annotations

import contextlib
import functools
import gzip
import io
import json
import math
import os
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from cluster_sim.config import WorkloadConfig
from cluster_sim.errors import UserError

FUZZ = settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                       HealthCheck.data_too_large], deadline=None)

# --------------------------------------------------------------------------- values a hostile file holds

ints = st.one_of(st.integers(-3, 5000), st.sampled_from([0, 2**31 - 1, 2**31, 2**63, 2**64, 2**64 + 1, -2**63]))
floats = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([1e300, -0.0, 1e15, 1e12 + 1]))
junk = st.one_of(st.none(), st.booleans(), st.text(max_size=5), ints, floats,
                 st.lists(st.integers(-1, 3), max_size=3), st.dictionaries(st.text(max_size=2), st.integers(), max_size=2))
hash_lists = st.one_of(st.lists(st.integers(0, 6), max_size=12), st.lists(ints, max_size=4), junk)


edge = st.one_of(junk, st.sampled_from([-1, 2**31, 2**64, 1e300, math.nan, "", [], {}, [-1], [2**64], [1.5],
                                         [True]]))
mangling = st.sampled_from([0, 0, 0, 0, 1, 2, 3, 4, 5])     # mostly intact files (see _mangle)


@st.composite
def one_change(draw, objects: list[dict], keys: list[str]):
    """Two times in three nothing; else one hostile change: a field removed or replaced, or an object junk."""
    if not objects or draw(st.integers(0, 2)):
        return
    obj = draw(st.sampled_from(objects))
    key = draw(st.sampled_from(keys))
    what = draw(st.integers(0, 2))
    if what == 0:
        obj.pop(key, None)
    elif what == 1:
        obj[key] = draw(edge)
    else:
        obj.clear()
        obj.update(draw(st.dictionaries(st.sampled_from(keys), edge, max_size=2)))


def _hashes(draw, n_in: int, block: int) -> list[int]:
    full, most = n_in // block, -(-n_in // block)
    return draw(st.lists(st.integers(0, 8), min_size=full, max_size=most))


def _mangle(data: bytes, how: int, cut: float) -> bytes:
    """Damage a file: 0 keep, 1 truncate, 2 a stray byte, 3 deep nesting, 4 a 5000-digit integer, 5 bare CRs."""
    if how == 1:
        return data[: int(len(data) * cut)]
    if how == 2:
        i = int(len(data) * cut)
        return data[:i] + bytes([int(cut * 255) % 256]) + data[i:]
    if how == 3:
        return data + b'{"x": ' + b"[" * 5000 + b"]" * 5000 + b"}\n"
    if how == 4:
        return data.replace(b"1", b"1" * 5000, 1)
    if how == 5:
        return data.replace(b"\n", b"\r")
    return data


def _write(path: Path, data: bytes, gz: bool) -> Path:
    if gz:
        path = path.with_name(path.name + ".gz")
        data = gzip.compress(data)
    path.write_bytes(data)
    return path


@contextlib.contextmanager
def _sandbox():
    """A fresh folder that is also the converted-trace cache."""
    with tempfile.TemporaryDirectory() as d:
        old = os.environ.get("CLUSTER_SIM_CACHE")
        os.environ["CLUSTER_SIM_CACHE"] = str(Path(d) / "cache")
        try:
            yield Path(d)
        finally:
            if old is None:
                os.environ.pop("CLUSTER_SIM_CACHE", None)
            else:
                os.environ["CLUSTER_SIM_CACHE"] = old


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


@functools.cache
def _base_config() -> str:
    import cluster_sim
    return json.dumps(cluster_sim.compose(["tracking.enabled=false"]))


def _complete(path: Path) -> bool:
    """A whole cache entry: an Arrow IPC file that reads, or the checksum file beside one."""
    import pyarrow.ipc as ipc
    if path.name.endswith(".sha256"):
        return path.with_name(path.name[:-len(".sha256")]).is_file()
    try:
        with ipc.open_file(path) as f:
            f.read_all()
        return True
    except Exception:  # noqa: BLE001
        return False


def _read_like_the_simulator(fmt: str, path: Path, **options):
    """What a run does with a trace: read (through the cache), filter, chain, chunk."""
    from cluster_sim.api import _prepare
    from cluster_sim.config import SimConfig

    m = json.loads(_base_config())
    m["workload"] = {"format": fmt, "path": str(path), **options}
    cfg = SimConfig.from_mapping(m)
    return _prepare(cfg)[0]


def _check(fmt: str, root: Path, path: Path, **options) -> None:
    """A table that chunks, or one UserError line and nothing left in the cache folder."""
    before = _files(root)
    buf = io.StringIO()
    try:
        with contextlib.redirect_stderr(buf):
            trace = _read_like_the_simulator(fmt, path, **options)
    except UserError as e:
        event("refused in one line")
        msg = str(e)
        assert msg and "\n" not in msg and "Traceback" not in msg, msg
        new = [f for f in _files(root) if f not in before]
        # the cache may keep a complete conversion of a file that parsed (e.g. an empty trace, refused later)
        partial = [f for f in new if not f.endswith((".arrow", ".sha256")) or not _complete(root / f)]
        assert not partial, f"a failed read left {partial}"
    else:
        event("read and chunked")
        assert trace.n_requests >= 1
        assert not [f for f in _files(root) if f.endswith(".tmp")]
    for line in buf.getvalue().splitlines():   # notices are single lines; no Python warning
        assert "Warning" not in line and "Traceback" not in line, buf.getvalue()


# --------------------------------------------------------------------------- Mooncake JSONL

@st.composite
def mooncake_records(draw):
    recs, t = [], 0
    for _ in range(draw(st.integers(1, 6))):
        t += draw(st.sampled_from([0, 0, 3000, 17]))
        n_in = draw(st.integers(0, 2000))
        recs.append({"timestamp": t, "input_length": n_in, "output_length": draw(st.integers(0, 50)),
                     "hash_ids": _hashes(draw, n_in, 512)})
    draw(one_change(recs, ["timestamp", "input_length", "output_length", "hash_ids"]))
    return recs


@FUZZ
@given(rows=mooncake_records(), how=mangling, cut=st.floats(0, 1), gz=st.booleans(), blank=st.booleans())
def test_fuzz_mooncake(rows, how, cut, gz, blank):
    data = b"".join(json.dumps(r).encode() + (b"\n\n" if blank else b"\n") for r in rows)
    with _sandbox() as root:
        path = _write(root / "t.jsonl", _mangle(data, how, cut), gz)
        _check("mooncake", root, path)


# --------------------------------------------------------------------------- Claude Code sessions

REQUEST_KEYS = ["t", "type", "in", "out", "hash_ids", "api_time", "model", "requests"]


@st.composite
def request_list(draw, block: int, depth: int, objects: list):
    out, t = [], 0.0
    for _ in range(draw(st.integers(1 if depth == 0 else 0, 4))):
        t += draw(st.sampled_from([0.0, 1.5, 30.0]))
        if depth < 3 and draw(st.integers(0, 4)) == 0:
            r = {"t": t, "type": "subagent", "requests": draw(request_list(block, depth + 1, objects))}
        else:
            n_in = draw(st.integers(0, 700))
            r = {"t": t, "type": draw(st.sampled_from(["n", "s"])), "in": n_in, "out": draw(st.integers(0, 9)),
                 "hash_ids": _hashes(draw, n_in, block), "api_time": draw(st.floats(0, 50)), "model": "m"}
        objects.append(r)
        out.append(r)
    return out


@st.composite
def sessions(draw):
    block = draw(st.sampled_from([64, 64, 16]))
    scope = draw(st.sampled_from(["local", "global"]))
    objects: list = []
    out = [{"id": f"s{i}", "block_size": block, "hash_id_scope": scope,
            "requests": draw(request_list(block, 0, objects))} for i in range(draw(st.integers(1, 3)))]
    draw(one_change(objects + out, REQUEST_KEYS + ["id", "block_size", "hash_id_scope"]))
    deep = draw(st.sampled_from([0, 0, 0, 60, 101, 400]))
    if deep:   # sub-agents nested far deeper than the strategy above goes
        inner = [{"t": 0, "type": "n", "in": 64, "out": 1, "hash_ids": [1]}]
        for _ in range(deep):
            inner = [{"t": 0, "type": "subagent", "requests": inner}]
        out[0]["requests"] = inner
    return out


@FUZZ
@given(sess=sessions(), how=mangling, cut=st.floats(0, 1), gz=st.booleans(), as_dir=st.booleans())
def test_fuzz_claude_code(sess, how, cut, gz, as_dir):
    with _sandbox() as root:
        if as_dir:
            d = root / "sessions"
            d.mkdir()
            for i, s in enumerate(sess):
                _write(d / f"trace_{i:04d}.json", _mangle(json.dumps(s, indent=1).encode(), how, cut), gz)
            path = d
        else:
            data = b"".join(json.dumps(s).encode() + b"\n" for s in sess)
            path = _write(root / "t.jsonl", _mangle(data, how, cut), gz)
        _check("claude_code", root, path, placement="lanes", lanes=2)


# --------------------------------------------------------------------------- Azure CSV

hostile_timestamps = st.one_of(
    st.tuples(st.integers(1, 9999), st.integers(0, 13), st.integers(0, 32), st.integers(0, 25),
              st.integers(0, 61), st.integers(0, 61), st.text("0123456789", max_size=11)).map(
        lambda t: f"{t[0]:04d}-{t[1]:02d}-{t[2]:02d} {t[3]:02d}:{t[4]:02d}:{t[5]:02d}" + (f".{t[6]}" if t[6] else "")),
    st.sampled_from(["3071-11-16 18:15:46", "0001-01-01 00:00:00", "", "2023-11-16T18:15:46+00:00"]),
    st.text(max_size=8))
hostile_cells = st.one_of(st.sampled_from(["1e3", "", " 7 ", "x", "9" * 30, '"3"', "-4", "٣"]), st.text(max_size=4))


@FUZZ
@given(header=st.sampled_from(["TIMESTAMP,ContextTokens,GeneratedTokens"] * 3 +
                              ["ContextTokens,TIMESTAMP,GeneratedTokens,X", "TIMESTAMP,ContextTokens", ""]),
       n=st.integers(1, 6), gaps=st.lists(st.integers(0, 10**9), min_size=6, max_size=6), data=st.data(),
       change=st.sampled_from([None, None, "TIMESTAMP", "ContextTokens", "GeneratedTokens", "extra"]),
       how=mangling, cut=st.floats(0, 1), gz=st.booleans(), bom=st.booleans())
def test_fuzz_azure(header, n, gaps, data, change, how, cut, gz, bom):
    names = header.split(",")
    lines, t = [header], 1_700_000_000 * 10**9
    for i in range(n):
        t += gaps[i]
        ts = np.datetime_as_string(np.datetime64(t, "ns")).replace("T", " ")
        vals = {"TIMESTAMP": ts, "ContextTokens": str(data.draw(st.integers(0, 5000))),
                "GeneratedTokens": str(data.draw(st.integers(0, 500))), "X": "x"}
        if change and i == n - 1:
            if change == "extra":
                vals["X"] = "x,y"
            else:
                vals[change] = data.draw(hostile_timestamps if change == "TIMESTAMP" else hostile_cells)
        lines.append(",".join(vals.get(c, "") for c in names))
    raw = ("\ufeff" if bom else "").encode() + ("\n".join(lines) + "\n").encode()
    with _sandbox() as root:
        path = _write(root / "t.csv", _mangle(raw, how, cut), gz)
        _check("azure", root, path)


# --------------------------------------------------------------------------- Parquet


@FUZZ
@given(n=st.integers(1, 5), data=st.data(),
       change=st.sampled_from([None, None, "drop", "retype", "null", "meta", "value"]),
       column=st.sampled_from(["arrival_s", "request_id", "session_id", "category", "turn", "input_tokens",
                               "output_tokens", "block_hashes"]),
       meta=st.sampled_from([b"1" * 23, b"0", b"-5", b"abc", b"\xff", b"2147483648", None]),
       how=st.sampled_from([0, 0, 0, 1, 2]), cut=st.floats(0, 1))
def test_fuzz_parquet(n, data, change, column, meta, how, cut):
    from cluster_sim.trace.schema import build_table

    bt = data.draw(st.sampled_from([64, 512, 1]))
    n_in = data.draw(st.lists(st.integers(0, 3 * bt), min_size=n, max_size=n))
    table = build_table(arrival_s=np.cumsum(data.draw(st.lists(st.floats(0, 100), min_size=n, max_size=n))),
                        input_tokens=n_in, output_tokens=[1] * n,
                        block_hashes=[_hashes(data.draw, k, bt) for k in n_in], block_tokens=bt, source="fuzz",
                        session_id=[0] * n, turn=list(range(1, n + 1)), category="agent")
    i = table.column_names.index(column)
    if change == "drop":
        table = table.remove_column(i)
    elif change == "retype":
        alt = {"block_hashes": pa.list_(pa.int64()), "category": pa.string()}.get(column, pa.float32())
        try:
            table = table.set_column(i, pa.field(column, alt), table.column(i).cast(alt))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            table = table.set_column(i, pa.field(column, pa.string()), pa.array(["x"] * n))
    elif change == "null":
        col = table.column(i).combine_chunks()
        table = table.set_column(i, table.schema.field(i).with_nullable(True), pa.nulls(n, col.type))
    elif change == "meta":
        md = dict(table.schema.metadata)
        md.pop(b"block_tokens") if meta is None else md.update({b"block_tokens": meta})
        table = table.replace_schema_metadata(md)
    elif change == "value" and column in ("arrival_s", "input_tokens", "output_tokens", "turn", "request_id"):
        col = table.column(i).to_pylist()
        col[-1] = data.draw(st.sampled_from([-1, 0, 2**31 - 1] if column != "arrival_s" else [-1.0, 1e300, math.nan,
                                                                                             math.inf, 1e12 + 1]))
        table = table.set_column(i, table.schema.field(i), pa.array(col, table.schema.field(i).type))
    with _sandbox() as root:
        path = root / "t.parquet"
        pq.write_table(table, path)
        if how:
            path.write_bytes(_mangle(path.read_bytes(), how, cut))
        _check("parquet", root, path)


# --------------------------------------------------------------------------- the command line

KEYS = ["hardware.dram_bytes", "hardware.ssd_bytes", "hardware.hbm_cache_bytes", "hardware.mfu",
        "hardware.gpus_per_node", "hardware.ssd.dwpd", "cache.chunk_tokens", "workload.until_s", "workload.warmup_s",
        "workload.time_scale", "workload.replays_per_day_scale", "workload.rechain", "fleet.nodes", "fleet.epoch_s",
        "fleet.router", "seed", "metrics.lifetime_cap_years", "model.state_checkpoints", "policy.k",
        "output.summary_path", "output.dir", "hydra.run.dir", "workload.path", "nope.key"]
VALUES = st.one_of(
    st.sampled_from(["0", "1", "2", "-1", "1e30", "64e12", "1e-300", "nan", "inf", "-inf", "", "null", "[1,2]",
                     "{a:1}", "x", "true", "256", "1GB", "12QB", "4TiB", "25GB/s", "1e400", "2**70", "'3'", "auto",
                     "always", "never", "lru", "round_robin", "every_chunk", "9" * 30, "9" * 5000]),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=6))
PATHS = ["A_FILE", "A_FILE/under", "A_DIR", "new/deep/dir", "A_DIR/s.json"]
GROUPS = ["policy=lru", "policy=lru_k", "policy=write_through", "policy=nope", "fleet=four", "model=gemma3_27b",
          "model=nope", "hardware=h100_8x", "workload=synthetic", "workload=mooncake"]


def _override(key: str, value: str, root: Path) -> str:
    if key in ("output.summary_path", "output.dir", "hydra.run.dir", "workload.path") and not value.startswith("x"):
        value = str(root / PATHS[len(value) % len(PATHS)])
    return f"{key}={value}"


@FUZZ
@given(picks=st.lists(st.tuples(st.sampled_from(KEYS), VALUES) | st.sampled_from(GROUPS).map(lambda g: (g, None)),
                      min_size=1, max_size=3))
def test_fuzz_command_line(picks):
    from cluster_sim.cli import main

    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        (root / "A_FILE").write_text("x")
        (root / "A_DIR").mkdir()
        argv = ["tracking.enabled=false", "report.figures=false", "workload.limit_requests=40"]
        for key, value in picks:
            argv.append(key if value is None else _override(key, value, root))
            if key == "workload=synthetic":
                argv.append("++workload.synthetic.num_sessions=3")
        before = _files(root)
        out, err = io.StringIO(), io.StringIO()
        cwd = os.getcwd()
        os.chdir(root)
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                rc = main(argv)
        finally:
            os.chdir(cwd)
        event(f"exit status {rc}")
        text = err.getvalue()
        assert "Traceback" not in text and "Warning" not in text, (argv, text)
        lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("cluster_sim: ")]
        if rc == 2:
            assert len(lines) == 1 and lines[0].startswith("cluster-sim: error: "), (argv, text)
            assert _files(root) == before, (argv, sorted(set(_files(root)) - set(before)))   # nothing left
            assert not (root / "outputs").exists(), argv
        else:
            assert rc == 0 and not lines, (argv, rc, text)
            assert not [f for f in _files(root) if f.endswith(".tmp")]
            assert math.isfinite(json.loads(next(root.rglob("summary.json")).read_text())["fleet"]["chunk_miss_ratio"]) \
                if list(root.rglob("summary.json")) else True


def test_fuzz_suite_covers_every_reader():
    """A new reader gets a fuzz property here too."""
    from cluster_sim.trace.load import READERS
    fuzzed = {name[len("test_fuzz_"):] for name in globals() if name.startswith("test_fuzz_")}
    assert set(READERS) - {"synthetic"} <= fuzzed, set(READERS) - fuzzed


def test_a_workload_config_is_what_the_fuzzers_read_through():
    # the fuzzers build WorkloadConfig through compose + SimConfig; a bad option fails there, in one line
    with pytest.raises(UserError):
        WorkloadConfig.from_mapping({"format": "mooncake", "path": "x", "placement": "lanes"})
