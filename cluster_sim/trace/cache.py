"""A cache of converted traces, keyed by the source's checksum and the reader options.

Converting the full WEKA Claude Code trace (94 M block references) from JSON
takes about 15 s. :func:`cached_table` converts a trace once and stores the
table as an Arrow IPC file (zstd), which reads back in under a second (the
Parquet file it replaced took 3-9 s to decode and verify: decision 122).

* **Where.** ``$CLUSTER_SIM_CACHE/traces/`` (default
  ``~/.cache/cluster_sim/traces/``), never beside the source. If that folder
  cannot be created or written, the table is built and returned uncached.
* **Key.** JSON of: the format, the reader version (:data:`READER_VERSIONS`,
  bumped when a reader's output changes), the sha256 of the source bytes
  (streamed; for a directory, of every session file's name and bytes, in
  sorted order) and the reader options. The file name is
  ``<format>-<source name>-<sha256(key)[:24]>.arrow`` and the full key is
  stored in the file's schema metadata (``cache_key``) and checked on load.
  The checksum is always recomputed (about 0.1 s for the 32 MB WEKA file);
  a changed source therefore never hits a stale entry.
* **What.** The reader's output before any later step: for Claude Code the
  *unplaced* sessions (placement runs after the cache, so changing the
  placement, its rate or the seed reuses the same entry), with whether its
  block hashes are prefix-chained (schema metadata ``block_hashes_chained``;
  :func:`~cluster_sim.trace.rechain.with_chained_verdict`).
* **Integrity.** Files are written to a temporary name and renamed into
  place (atomic), with a sidecar ``<name>.sha256`` holding the sha256 of the
  file's bytes, checked on every load (0.1 s for WEKA's 100 MB); a file that
  is missing its sidecar, fails it, cannot be read or carries another key is
  deleted and rebuilt, with a warning — never a crash. One that fails
  :func:`~cluster_sim.trace.schema.validate_table` (it was written before a
  check got stricter) is deleted and the source read again, which reports
  what is wrong with it. Old entries are not evicted; delete the folder to
  reclaim space (entries of the earlier Parquet format, ``*.parquet``, are no
  longer read).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import warnings
from pathlib import Path
from typing import Callable

import pyarrow as pa
import pyarrow.ipc as ipc

from cluster_sim.errors import TraceError
from cluster_sim.trace.files import source_sha256

__all__ = ["cache_dir", "cache_key", "cache_path", "cached_table", "READER_VERSIONS", "ENV_VAR"]

ENV_VAR = "CLUSTER_SIM_CACHE"
READER_VERSIONS = {"claude_code": 3, "mooncake": 2}   # claude_code 2: request-level signals; 3 and 2: the chained verdict
_KEY_META = b"cache_key"
_SUFFIX = ".arrow"
_DIGEST_SUFFIX = ".sha256"


def cache_dir() -> Path:
    """``$CLUSTER_SIM_CACHE/traces`` (default ``~/.cache/cluster_sim/traces``)."""
    root = os.environ.get(ENV_VAR) or str(Path("~/.cache/cluster_sim").expanduser())
    return Path(root).expanduser() / "traces"


def cache_key(fmt: str, source: str | Path, options: dict, sha: str | None = None) -> dict:
    return {
        "format": fmt,
        "reader_version": READER_VERSIONS.get(fmt, 1),
        "source_sha256": sha or source_sha256(source),
        "options": options,
    }


def cache_path(key: dict, source: str | Path) -> Path:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:24]
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(source).name)[:60]
    return cache_dir() / f"{key['format']}-{stem}-{digest}{_SUFFIX}"


def _digest_path(path: Path) -> Path:
    return path.with_name(path.name + _DIGEST_SUFFIX)


def _load(path: Path, key_json: bytes, validate: Callable[[pa.Table, str], None]) -> pa.Table | None:
    """The cached table, or None if absent; a bad file is removed (and None returned)."""
    if not path.is_file():
        return None
    try:
        data = path.read_bytes()
        try:
            want = _digest_path(path).read_text().strip()
        except OSError:
            raise ValueError("its checksum file is missing") from None
        if hashlib.sha256(data).hexdigest() != want:
            raise ValueError("checksum mismatch")
        with ipc.open_file(pa.py_buffer(data)) as f:
            table = f.read_all()
        del data
        table = table.combine_chunks()  # one chunk per column, as the readers give
        pa.default_memory_pool().release_unused()
        meta = dict(table.schema.metadata or {})
        if meta.get(_KEY_META) != key_json:
            raise ValueError("cache key mismatch")
        del meta[_KEY_META]
        table = table.replace_schema_metadata(meta)
    except Exception as exc:  # noqa: BLE001 - any damage means: rebuild
        warnings.warn(f"cluster_sim: ignoring unreadable trace cache {path} ({exc}); rebuilding", stacklevel=3)
        _unlink(path)
        return None
    try:
        validate(table, str(path))
    except TraceError:   # written before a check got stricter: read the source again, which says what is wrong
        _unlink(path)
        return None
    return table


def _unlink(path: Path) -> None:
    for p in (path, _digest_path(path)):
        try:
            p.unlink()
        except OSError:
            pass


def _store(path: Path, table: pa.Table, key_json: bytes) -> None:
    meta = dict(table.schema.metadata or {})
    meta[_KEY_META] = key_json
    tmps: list[str] = []
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
        os.close(fd)
        tmps.append(tmp)
        t = table.replace_schema_metadata(meta)
        with ipc.new_file(tmp, t.schema, options=ipc.IpcWriteOptions(compression="zstd")) as w:
            w.write_table(t)
        digest = source_sha256(tmp)      # the sha256 of the file's bytes (streamed)
        fd, dtmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
        os.close(fd)
        tmps.append(dtmp)
        Path(dtmp).write_text(digest + "\n")
        os.replace(dtmp, _digest_path(path))     # the checksum first: a file is never read without it
        os.replace(tmp, path)
        tmps = []
    except (OSError, pa.ArrowException) as exc:
        warnings.warn(f"cluster_sim: cannot write the trace cache {path} ({exc}); continuing without it",
                      stacklevel=3)
    finally:
        pa.default_memory_pool().release_unused()
        for tmp in tmps:
            try:
                os.unlink(tmp)
            except OSError:
                pass


#: seconds a conversion runs before it prints its notice line
NOTICE_AFTER_S = 2.0


def cached_table(fmt: str, source: str | Path, options: dict, build: Callable[[], pa.Table], *,
                 validate: Callable[[pa.Table, str], None], enabled: bool = True) -> pa.Table:
    """``build()``'s table for ``source`` read with ``options``, from the cache when it is there.

    ``validate(table, path)`` checks a table loaded from the cache (raise
    TraceError if it is bad). With ``enabled=False`` this just calls ``build``.
    """
    if not enabled:
        return build()
    key = cache_key(fmt, source, options)
    key_json = json.dumps(key, sort_keys=True).encode()
    path = cache_path(key, source)
    table = _load(path, key_json, validate)
    if table is not None:
        return table
    import sys
    import threading

    # a conversion that takes a while says so (a piped first run was silent for half a minute);
    # one that fails at once leaves only its error line
    notice = threading.Timer(NOTICE_AFTER_S, lambda: print(
        f"cluster_sim: converting {Path(source).name}, once (cached under {cache_dir()})",
        file=sys.stderr, flush=True))
    notice.daemon = True
    notice.start()
    try:
        table = build()
    finally:
        notice.cancel()
    _store(path, table, key_json)
    return table
