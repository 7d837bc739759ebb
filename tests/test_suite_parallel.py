"""The suite runs in parallel (pytest-xdist, decision 132): how many workers ``-n auto`` starts,
and that the README's install brings the plugin that pyproject's ``addopts`` asks for."""
from __future__ import annotations

import os
import tomllib
from types import SimpleNamespace

import conftest


def _workers(monkeypatch, cpus: int, mem: int) -> int:
    import psutil

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cpus)), raising=False)
    monkeypatch.setattr(psutil, "virtual_memory", lambda: SimpleNamespace(total=mem))
    return conftest.pytest_xdist_auto_num_workers(None)


def test_auto_takes_one_worker_per_usable_cpu_capped_by_count_and_memory(monkeypatch):
    gib = 1 << 30
    assert _workers(monkeypatch, 2, 24 * gib) == 2          # the CI machine: 2 cores, 24 GiB
    assert _workers(monkeypatch, 1, 24 * gib) == 1
    assert _workers(monkeypatch, 64, 512 * gib) == conftest.MAX_WORKERS
    assert _workers(monkeypatch, 8, 8 * gib) == 1           # 8 GiB: room for one worker only
    assert _workers(monkeypatch, 8, 2 * gib) == 1           # never zero


def test_addopts_parallel_flag_comes_with_its_plugin_in_the_test_extra():
    py = tomllib.loads((conftest.ROOT / "pyproject.toml").read_text())
    addopts = py["tool"]["pytest"]["ini_options"]["addopts"].split()
    assert "-n" in addopts and addopts[addopts.index("-n") + 1] == "auto"
    assert any(r.replace(" ", "").startswith("pytest-xdist") for r in py["project"]["optional-dependencies"]["test"])
