"""Inputs nobody here wrote (issue #17): each is one line naming what is wrong and where, exit 2,
checked before the simulation where it can be, and a failed run leaves no run folder behind."""
from __future__ import annotations

import gzip
import json
import os
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

import cluster_sim
from cluster_sim.errors import ConfigError
from simhelpers import run_cli

QUIET = ["tracking.enabled=false", "report.figures=false"]


def _subagents(depth: int) -> str:
    inner = '[{"t": 0, "type": "n", "in": 64, "out": 1, "hash_ids": [1]}]'
    for _ in range(depth):
        inner = '[{"t": 0, "type": "subagent", "requests": ' + inner + '}]'
    return '{"id": "s", "requests": ' + inner + '}\n'


def _parquet_with_block_tokens(path: Path, value: bytes) -> None:
    from cluster_sim.trace.schema import build_table
    t = build_table(arrival_s=[0.0], input_tokens=[10], output_tokens=[1], block_hashes=[[1]], block_tokens=64,
                    source="x")
    pq.write_table(t.replace_schema_metadata({**t.schema.metadata, b"block_tokens": value}), path)


MOONCAKE_OK = '{"timestamp": 0, "input_length": 600, "output_length": 1, "hash_ids": [1, 2]}\n'
DEEP = MOONCAKE_OK[:-2] + ', "x": ' + "[" * 100000 + "]" * 100000 + "}\n"
AZURE_HEAD = "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n"


def _case(name: str, d: Path) -> tuple[list[str], list[str]]:
    """(overrides, what the one error line must contain) for each hostile input of the issue."""
    def f(fname, text):
        p = d / fname
        p.write_bytes(text if isinstance(text, bytes) else text.encode())
        return str(p)

    if name == "mooncake deep JSON":
        path = f("deep.jsonl", DEEP)
        return (["workload=mooncake", f"workload.path={path}"], ["deep.jsonl:1", "nested too deeply"])
    if name == "claude code sub-agents 900 deep":
        return (["workload=claude_code", f"workload.path={f('cc.jsonl', _subagents(900))}", "workload.cache=false"],
                ["cc.jsonl:1", "nested too deeply"])
    if name == "claude code sub-agents 150 deep":
        return (["workload=claude_code", f"workload.path={f('cc.jsonl', _subagents(150))}", "workload.cache=false"],
                ["cc.jsonl:1", "requests[0].requests", "nested more than 100 deep"])
    if name == "parquet block_tokens of 23 digits":
        _parquet_with_block_tokens(d / "bt.parquet", b"1" * 23)
        return (["workload.format=parquet", f"workload.path={d / 'bt.parquet'}"], ["bt.parquet", "'block_tokens'",
                                                                                   "too large"])
    if name == "azure year 3071":
        return (["workload=azure", f"workload.path={f('a.csv', AZURE_HEAD + '3071-11-16 18:15:46,374,44' + chr(10))}"],
                ["a.csv:3", "'TIMESTAMP'", "292 years"])
    if name == "azure bare CR":
        return (["workload=azure", f"workload.path={f('a.csv', AZURE_HEAD + '2023-11-16 18:15:47,37' + chr(13) + '4,44' + chr(10))}"],
                ["a.csv:3", "fields"])
    if name == "summary_path is a directory":
        (d / "sdir").mkdir()
        return ([f"output.summary_path={d / 'sdir'}"], ["output.summary_path", "is a directory"])
    if name == "output.dir cannot be created":
        f("blocker", "x")
        return ([f"output.dir={d / 'blocker' / 'out'}"], ["output.dir", "blocker is not a directory"])
    if name == "hydra.run.dir cannot be created":
        f("blocker", "x")
        return ([f"hydra.run.dir={d / 'blocker' / 'run'}"], ["hydra.run.dir", "blocker is not a directory"])
    if name == "tracking.uri under a regular file":
        f("blocker", "x")
        return (["tracking.enabled=true", f"tracking.uri=sqlite:///{d / 'blocker' / 'm.db'}"],
                ["tracking.uri", "blocker is not a directory"])
    if name == "nodes.parquet beside the summary is a directory":
        (d / "res" / "nodes.parquet").mkdir(parents=True)
        return ([f"output.summary_path={d / 'res' / 'summary.json'}"], ["output.summary_path", "nodes.parquet",
                                                                         "is a directory"])
    if name == "mooncake timestamp 1e300":
        return (["workload=mooncake", f"workload.path={f('t.jsonl', MOONCAKE_OK + MOONCAKE_OK.replace('0,', '1e300,', 1))}"],
                ["t.jsonl:2", "'timestamp'", "too large"])
    if name == "dram_bytes beyond int64":
        return (["hardware.dram_bytes=1e30"], ["hardware.dram_bytes", "too large"])
    if name == "chunk_tokens 64e12":
        return (["cache.chunk_tokens=64e12"], ["cache.chunk_tokens", "2147483647"])
    if name == "chunk longer than every prompt":
        return (["cache.chunk_tokens=204800000"], ["cache.chunk_tokens", "longer than every prompt"])
    if name == "more hash ids than the prompt has blocks":
        return (["workload=mooncake", f"workload.path={f('t.jsonl', MOONCAKE_OK.replace('[1, 2]', '[1, 2, 3, 4]'))}"],
                ["t.jsonl:1", "'block_hashes'", "more hashes than the prompt has blocks"])
    # -- beyond the list
    if name == "JSON integer of 5000 digits (Mooncake)":
        return (["workload=mooncake", f"workload.path={f('t.jsonl', MOONCAKE_OK.replace('600', '6' * 5000))}"],
                ["t.jsonl:1", "'input_length'", "more than 4300 digits"])
    if name == "JSON integer of 5000 digits (Claude Code)":
        text = _subagents(0).replace('"out": 1', '"out": ' + "7" * 5000)
        return (["workload=claude_code", f"workload.path={f('cc.jsonl', text)}", "workload.cache=false"],
                ["cc.jsonl:1", "'out'", "more than 4300 digits"])
    if name == "CSV count of 5000 digits (Azure)":
        return (["workload=azure", f"workload.path={f('a.csv', AZURE_HEAD.replace(',374,', ',' + '3' * 5000 + ','))}"],
                ["a.csv:2", "'ContextTokens'", "too large"])
    if name == "an override of 5000 digits":
        return (["workload.limit_requests=" + "9" * 5000], ["workload.limit_requests", "more than 4300 digits"])
    if name == "a FIFO as the trace (process substitution)":
        os.mkfifo(d / "pipe")
        return (["workload=claude_code", f"workload.path={d / 'pipe'}"], ["workload.path", "not a regular file"])
    if name == "time_scale that stretches arrivals to infinity":
        return (["workload.time_scale=1e-300"], ["workload.time_scale", "beyond"])
    if name == "epoch_s that makes 2^53 epochs":
        return (["fleet.epoch_s=1e-300"], ["fleet.epoch_s", "2^53 epochs"])
    if name == "an empty trace":
        return (["workload=mooncake", f"workload.path={f('e.jsonl', '')}"], ["e.jsonl", "has no requests"])
    raise KeyError(name)


CASES = ["mooncake deep JSON", "claude code sub-agents 900 deep", "claude code sub-agents 150 deep",
         "parquet block_tokens of 23 digits", "azure year 3071", "azure bare CR", "summary_path is a directory",
         "output.dir cannot be created", "hydra.run.dir cannot be created", "tracking.uri under a regular file",
         "nodes.parquet beside the summary is a directory", "mooncake timestamp 1e300", "dram_bytes beyond int64",
         "chunk_tokens 64e12", "chunk longer than every prompt", "more hash ids than the prompt has blocks",
         "JSON integer of 5000 digits (Mooncake)", "JSON integer of 5000 digits (Claude Code)",
         "CSV count of 5000 digits (Azure)", "an override of 5000 digits",
         "a FIFO as the trace (process substitution)", "time_scale that stretches arrivals to infinity",
         "epoch_s that makes 2^53 epochs", "an empty trace"]


@pytest.mark.parametrize("name", CASES)
def test_one_line_exit_2_and_no_run_folder(name, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    overrides, needles = _case(name, tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    rc, _, err = run_cli([*QUIET, *overrides], work)
    assert rc == 2, (rc, err)
    assert len(err) == 1 and err[0].startswith("cluster-sim: error: "), err
    for n in needles:
        assert n in err[0], (n, err[0])
    assert not list(work.iterdir()), "a failed run left files in the directory it ran from"
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert not list(tmp_path.rglob("summary.json"))


def test_trace_stats_deep_json_is_one_line(tmp_path, capsys):
    from cluster_sim.trace_cli import main
    p = tmp_path / "deep.jsonl"
    p.write_text(DEEP)
    assert main(["stats", str(p), "--format", "mooncake"]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and "nested too deeply" in err[0]


@pytest.mark.parametrize("value", ["9" * 5000, "[1, 2", "{a: b: c}"])
def test_trace_stats_option_that_cannot_be_read_is_one_line(value, capsys):
    from cluster_sim.trace_cli import main
    assert main(["stats", "default", "--format", "synthetic", "-o", f"synthetic.num_sessions={value}"]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and err[0].startswith("cluster-sim-trace: error: --option: synthetic.num_sessions"), err


def test_output_paths_are_checked_before_the_trace_is_read(tmp_path, monkeypatch):
    # the trace does not exist, and the error names the summary path: it was checked first
    (tmp_path / "sdir").mkdir()
    rc, _, err = run_cli([*QUIET, f"output.summary_path={tmp_path / 'sdir'}", "workload.path=/no/such.parquet"],
                         tmp_path)
    assert rc == 2 and "output.summary_path" in err[0]
    # the Python API too: no trace is loaded for a summary path that cannot be written
    import cluster_sim.api as api
    monkeypatch.setattr(api, "_prepare", lambda cfg: pytest.fail("the trace was loaded first"))
    with pytest.raises(ConfigError, match="output.summary_path"):
        cluster_sim.run(cluster_sim.compose([f"output.summary_path={tmp_path / 'sdir'}"]))


def test_a_failed_run_in_an_existing_folder_takes_back_only_what_it_added(tmp_path):
    run_dir = tmp_path / "mine"
    run_dir.mkdir()
    (run_dir / "notes.txt").write_text("keep me")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(MOONCAKE_OK.replace("600", "-3"))
    rc, _, err = run_cli([*QUIET, "workload=mooncake", f"workload.path={bad}", f"hydra.run.dir={run_dir}"], tmp_path)
    assert rc == 2 and "bad.jsonl:1" in err[0]
    assert sorted(p.name for p in run_dir.iterdir()) == ["notes.txt"]


def test_a_good_run_keeps_its_folder(tmp_path):
    rc, out, err = run_cli([*QUIET, "workload.limit_requests=50"], tmp_path)
    assert rc == 0 and not err
    (run,) = list((tmp_path / "outputs").glob("*/*"))
    assert (run / "summary.json").exists() and (run / ".hydra").is_dir()


def test_summary_files_are_written_atomically(tmp_path, monkeypatch):
    # a write that fails halfway leaves neither a partial file nor a temporary one
    s = cluster_sim.run(cluster_sim.compose(["workload.limit_requests=50"]), write=False)
    import pyarrow.parquet as pq_mod

    def broken(table, where, *a, **k):
        Path(where).write_bytes(b"PAR1 half")
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(pq_mod, "write_table", broken)
    with pytest.raises(ConfigError, match="No space left on device"):
        s.write(tmp_path / "summary.json")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.json"]    # complete; no nodes.parquet part
    json.loads((tmp_path / "summary.json").read_text())


# --------------------------------------------------------------------------- MLflow unavailable


@pytest.mark.parametrize("store", ["http", "corrupt sqlite"])
def test_mlflow_unavailable_never_costs_results(store, tmp_path, closed_port):
    if store == "http":
        uri = f"http://127.0.0.1:{closed_port}"
    else:
        db = tmp_path / "bad.db"
        db.write_bytes(np.random.default_rng(0).bytes(4096))
        uri = f"sqlite:///{db}"
    t0 = time.monotonic()
    rc, out, err = run_cli(["report.figures=false", "workload.limit_requests=100", "tracking.enabled=true",
                            f"tracking.uri={uri}", f"output.summary_path={tmp_path / 'res' / 'summary.json'}"],
                           tmp_path)
    assert time.monotonic() - t0 < 60                      # HTTP retries are bounded to seconds
    assert rc == 3, err
    assert len(err) == 1 and err[0].startswith("cluster-sim: warning: MLflow tracking failed"), err
    assert "not logged" in err[0] and str(tmp_path / "res") in err[0]
    data = json.loads((tmp_path / "res" / "summary.json").read_text())
    assert data["fleet"]["requests"] == 100
    assert (tmp_path / "res" / "nodes.parquet").exists() and (tmp_path / "res" / "epochs.parquet").exists()
    assert "chunk miss ratio" in out and "MLflow run:" not in out


def test_http_retries_are_bounded_by_default(monkeypatch):
    from cluster_sim import tracking
    for k in tracking.HTTP_DEFAULTS:
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "7")       # the user's own setting wins
    tracking._quiet()
    assert os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] == "2" and os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] == "7"
    retries, backoff = 2, 1
    assert sum(backoff * 2 ** i for i in range(retries)) + (retries + 1) * 5 <= 20   # worst case of the defaults


def test_tracking_store_checks_before_the_run(tmp_path):
    from cluster_sim.tracking import check_settings
    (tmp_path / "f").write_text("x")
    with pytest.raises(ConfigError, match="tracking.uri"):
        check_settings({"uri": f"sqlite:///{tmp_path / 'f' / 'x.db'}"})
    with pytest.raises(ConfigError, match="unknown tracking store scheme"):
        check_settings({"uri": "nosuchscheme://x"})
    with pytest.raises(ConfigError, match="tracking.artifact_root"):
        check_settings({"uri": f"sqlite:///{tmp_path / 'ok.db'}", "artifact_root": str(tmp_path / "f" / "a")})
    check_settings({"uri": f"sqlite:///{tmp_path / 'new' / 'ok.db'}"})      # a folder to be created is fine
    check_settings({"uri": "http://127.0.0.1:1"})                           # servers are contacted only later
    assert not (tmp_path / "new").exists()
