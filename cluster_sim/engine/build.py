"""Building the compiled engine: compiling each kernel set a run needs once per install and set, under
locks, with numba's cache (:func:`ensure_compiled`), and what a run says meanwhile. Which settings run
compiled and from which sources each set is built is :mod:`cluster_sim.engine.registry`'s (its names
are re-exported here); this module names no policy.
"""
from __future__ import annotations

import contextlib
import sys
import time
from pathlib import Path

import numpy as np

from ..errors import ConfigError
from .adapter import real_setting  # noqa: F401 (build.real_setting, as before)
from .registry import (  # noqa: F401 (build's names, as before)
    ENGINES,
    supported_policies,
    partly_compiled,
    numba_available,
    policy_unsupported,
    supports,
    resolve,
    CORE_SOURCES,
    CORE_HELPERS,
    kernels_of,
    kernel_sources,
    helper_sources,
    compiled_settings,
    _kernel_sets,
    _params_of,
    _kernel_modules,
    _helper_files,
)

#: a fresh compile of one policy's kernel set (_warm_up) on the 2-core machines here: lru 61-67 s
#: (scripts/bench_compile.py, 2026-12-07); every set one after another in one process, about 18 min
#: (the single build of every policy at once took 150-450 s before decision 156)
EXPECTED_COMPILE_S = "60-300"


def _built_path(k) -> Path:
    """The record that kernel set ``k`` was built (beside the build lock, named after this package's
    location, the set and its digest)."""
    return build_lock_path().with_name(f"cluster_sim-kernels-{_location_tag()}-{k.name}-{k.digest[:16]}.ok")


def _cached(settings=None) -> bool:
    """Whether the kernels of ``settings`` (None: every compiled setting) are built, from the sources
    installed now, and the shared helper kernels too (:func:`kernel_digest`)."""
    if _recorded_digest(digest_path()) != kernel_digest():
        return False
    return all(_built_path(k).exists() for k, _, _ in _kernel_sets(settings))


#: The shared helper kernels (:func:`helper_sources`, also ``KERNEL_SOURCES``): kernels that do not take
#: the engine state, so their cache entries carry no kernel set's digest. numba keys each function's cache
#: on the content of its own file only, so a change to a helper in another of these files would leave
#: their cached callers valid in numba's eyes and stale in fact (decision 138): their digest is recorded
#: beside the build, and every engine cache is removed before a build of other sources. (Kernels that
#: take the state are keyed by their kernel set's digest: hooks.Kernels.)


def kernel_digest(root: Path | None = None, sources=None) -> str:
    """SHA-1 of the shared helpers' sources (:func:`helper_sources`; names and contents) under the
    package folder ``root``."""
    import hashlib

    sources = helper_sources() if sources is None else sources
    root = Path(__file__).resolve().parent.parent if root is None else Path(root)
    h = hashlib.sha1()
    for rel in sources:
        h.update(rel.encode() + b"\0")
        h.update((root / rel).read_bytes())
        h.update(b"\0")
    return h.hexdigest()


def digest_path() -> Path:
    """Where the digest of the sources of the last build is recorded: beside the build lock, named
    after this package's location (checkouts sharing a ``$NUMBA_CACHE_DIR`` keep theirs apart)."""
    return build_lock_path().with_name(f"cluster_sim-kernels-{_location_tag()}.sha1")


def _location_tag() -> str:
    """A short name for this package's location (its folder's SHA-1, 12 hex digits)."""
    import hashlib

    return hashlib.sha1(str(Path(__file__).resolve()).encode()).hexdigest()[:12]


def _recorded_digest(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _cache_dir(module) -> Path | None:
    """numba's cache folder of the kernels of ``module`` (from any of its cached dispatchers)."""
    for v in vars(module).values():
        path = getattr(getattr(v, "_cache", None), "_cache_path", None)
        if path:
            return Path(path)
    return None


def _kernel_cache_dirs() -> dict[str, Path]:
    """numba's cache folder of each kernel module, by the file stem its cache files start with."""
    import importlib

    from ..cache import state
    from . import step
    out = {}
    path = getattr(getattr(step.replay, "_cache", None), "_cache_path", None)
    if path:
        for stem in ("_jit", "layout", "queue", "residency", "walk", "cascade", "step"):  # the core's: one folder
            out[stem] = Path(path)
    for rel in helper_sources():
        if rel == "cache/state.py":          # its dispatcher is made on first use
            path = getattr(getattr(state._leaf_events_kernel(), "_cache", None), "_cache_path", None)
            d = Path(path) if path else None
        else:
            d = _cache_dir(importlib.import_module("cluster_sim." + rel[:-3].replace("/", ".")))
        if d is not None:
            out[Path(rel).stem] = d
    return out


def remove_stale_kernels(dirs: dict[str, Path], recorded: str | None, digest: str) -> list[Path]:
    """When ``recorded`` (the digest of the last build's sources) is not ``digest``, remove numba's
    cache files (``<stem>.*.nbi`` / ``.nbc``) of every kernel module in ``dirs``; returns them."""
    if recorded == digest:
        return []
    gone = []
    for stem, folder in dirs.items():
        for ext in ("nbi", "nbc"):
            for f in folder.glob(f"{stem}.*.{ext}"):
                try:
                    f.unlink()
                    gone.append(f)
                except OSError:
                    pass
    return gone


def compile_notice(settings=None) -> str | None:
    """The one-line notice to print before the kernels of ``settings`` ((policy, params) pairs;
    None: every compiled setting) are compiled, or None if they are cached."""
    if _cached(settings):
        return None
    names = sorted({k.name for k, _, _ in _kernel_sets(settings)})
    what = "every policy" if settings is None else ", ".join(names)
    return (f"cluster_sim: compiling the request-step engine for {what} (numba; once per install and "
            f"policy, about {EXPECTED_COMPILE_S} s)")


_READY: set = set()      # the kernel sets (name, digest) this process has loaded

#: environment variable: the most chunk references a run may have to run interpreted under
#: ``cache.engine=auto`` while the kernels are not built (0: never; decision 120)
SMALL_RUN_ENV = "CLUSTER_SIM_SMALL_RUN_REFS"
SMALL_RUN_REFS = 500_000


def small_run_limit() -> int:
    """:data:`SMALL_RUN_REFS`, or the integer in ``$CLUSTER_SIM_SMALL_RUN_REFS``."""
    import os

    raw = os.environ.get(SMALL_RUN_ENV)
    if raw is None or not raw.strip():
        return SMALL_RUN_REFS
    try:
        v = int(raw.strip().replace("_", ""))
    except ValueError:
        v = -1
    if v < 0:
        raise ConfigError(SMALL_RUN_ENV, f"must be a non-negative whole number of chunk references, got {raw!r}")
    return v


def interpreted_first_run(chunk_refs: int, settings=None) -> str | None:
    """Under ``cache.engine=auto``, before the kernels are built: the one-line notice to print
    when a run of ``chunk_refs`` chunk references is small enough to run interpreted (the same
    results, in a fraction of the compile time), else None. A larger run, or
    ``cache.engine=numba``, builds the kernels (decision 120)."""
    limit = small_run_limit()
    if chunk_refs > limit or _cached(settings):
        return None
    return (f"cluster_sim: the compiled engine is not built yet (numba, about {EXPECTED_COMPILE_S} s, once per "
            f"install), so this small run ({chunk_refs:,} chunk references) runs interpreted, with the same "
            f"results; a run of more than {limit:,} references, or cache.engine=numba, builds it")


def ensure_compiled(stream=None, settings=None) -> float:
    """Compile (or load from numba's cache) the kernels of ``settings`` ((policy, params) pairs; None:
    every compiled setting) with the types a run uses, printing :func:`compile_notice` first when
    compiling. Returns the seconds spent building a set, or waiting for another process's build of
    it (0.0 when every set was built already: loading from the cache is not counted). A run calls
    this before its clock starts, so compilation never counts in ``sim_wall_s``; it reports these
    seconds as ``run.jit_compile_s``.

    One build of a kernel set at a time per cache (decision 137): a process that finds a set unbuilt
    builds it under that set's exclusive lock; any other process needing it (a sweep's next point, a
    fleet's worker, a test worker) waits for that build and then loads it. Different sets build in
    parallel. Every build holds the cache's lock shared; the shared helpers' sources changing (an
    update, an edit) is handled under it exclusively: their caches, and every record, are removed."""
    todo = [x for x in _kernel_sets(settings) if (x[0].name, x[0].digest) not in _READY]
    if not todo:
        return 0.0
    spent = 0.0
    digest = kernel_digest()
    if _recorded_digest(digest_path()) != digest:
        with _build_lock(exclusive=True):
            if _recorded_digest(digest_path()) != digest:
                remove_stale_kernels(_kernel_cache_dirs(), _recorded_digest(digest_path()), digest)
                for f in build_lock_path().parent.glob(f"cluster_sim-kernels-{_location_tag()}-*.ok"):
                    with contextlib.suppress(OSError):
                        f.unlink()
                with contextlib.suppress(OSError):
                    digest_path().write_text(digest + "\n")
    with _build_lock(exclusive=False):
        for k, policy, params in todo:
            built = _built_path(k).exists()
            t0 = time.perf_counter()
            with _build_lock(exclusive=not built, name=k.name):
                if not _built_path(k).exists():
                    note = compile_notice([(policy, params)])
                    if note:
                        print(note, file=stream if stream is not None else sys.stderr, flush=True)
                _warm_up(policy, params)
                with contextlib.suppress(OSError):
                    _built_path(k).write_text(k.module + "\n")
            if not built:
                spent += time.perf_counter() - t0
            _READY.add((k.name, k.digest))
    return spent


def build_lock_path():
    """The file whose exclusive lock (``flock``) a process holds while it builds the kernels: in
    ``$NUMBA_CACHE_DIR`` when set, else beside numba's default cache (``__pycache__``), else (not
    writable) in the temporary folder, named after this package's location."""
    import os
    import tempfile

    root = os.environ.get("NUMBA_CACHE_DIR")
    folder = Path(root) if root else Path(__file__).resolve().parent / "__pycache__"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if os.access(folder, os.W_OK):
            return folder / "cluster_sim-build.lock"
    except OSError:
        pass
    return Path(tempfile.gettempdir()) / f"cluster_sim-build-{_location_tag()}.lock"


def set_lock_path(name: str) -> Path:
    """The lock a process holds exclusively while it builds kernel set ``name`` (beside
    :func:`build_lock_path`)."""
    path = build_lock_path()
    return path.with_name(f"{path.stem}-{name}.lock")


@contextlib.contextmanager
def _build_lock(exclusive: bool, name: str | None = None):
    """Hold :func:`build_lock_path`'s lock (``name``: kernel set ``name``'s, beside it), exclusive (a
    build) or shared (a load), blocking while another process holds it exclusively. No lock where
    ``fcntl`` is missing (Windows) or the file cannot be opened: each process then builds on its own,
    as numba alone would."""
    try:
        import fcntl
        fh = open(build_lock_path() if name is None else set_lock_path(name), "a+b")
    except (ImportError, OSError):
        yield
        return
    try:
        fcntl.flock(fh, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield
    finally:
        fh.close()          # closing releases the lock


def _warm_up(policy: str, params=None) -> None:
    """Run the kernels of ``policy`` with ``params`` once on a three-request branch (every tier, STATE
    payloads, trimming), so that no specialisation is compiled after a run's clock starts."""
    from types import SimpleNamespace

    parent = np.array([-1, 0, 1, 1], dtype=np.int32)
    depth = np.array([1, 2, 3, 3], dtype=np.int32)
    flat = np.array([0, 1, 2, 0, 1, 3, 0, 1, 2], dtype=np.int32)
    anchor = np.array([0, 1, 2, 5], dtype=np.int32)
    offsets = np.array([0, 3, 6, 9], dtype=np.int64)
    ssd = SimpleNamespace(ftl="ideal", dwpd=1.0)
    hw = SimpleNamespace(hbm_cache_bytes=100, dram_bytes=150, ssd_bytes=300, ssd=ssd, ssd_write_bytes_per_s=1e9)
    model = SimpleNamespace(has_state=True, state_checkpoints="every_chunk", fa_bytes=lambda ct: 50,
                            state_bytes_array=lambda pos: np.full(len(pos), 20, dtype=np.int64))
    idx = np.arange(3, dtype=np.int64)
    from ..policies.base import policy_class
    from .compiled import CompiledNode
    p = _params_of(policy, params)
    real = policy_class(policy).engine_adapter(p).warm_up_setting(p)
    m, h = (model, hw) if real is None else real
    import warnings

    from numba.core.errors import NumbaIRAssumptionWarning
    with warnings.catch_warnings():
        # numba's own pedantic check on the IR of an inlined hook (a numba note, not a fault of the
        # kernels: the digests are unchanged); a user would read it as an error
        warnings.simplefilter("ignore", NumbaIRAssumptionWarning)
        node = CompiledNode(parent, depth, anchor, flat, 1, m, h, policy, cost=False, params=params)
        if node.needs_future:
            node.adapter.warm_up_future(offsets, flat)
        node.replay_raw(offsets, idx, np.ones(3, dtype=bool), np.array([0.0, 1.0, 100.0]))
        node.finish()          # its kernels too: loading them from the cache took 60 ms in a fresh worker




def __getattr__(name):          # derived from the registry when asked, not when imported
    from . import registry
    return getattr(registry, name)
