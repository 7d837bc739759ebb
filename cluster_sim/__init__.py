"""cluster_sim: trace-driven simulation of KV-cache tiering (HBM -> DRAM -> SSD)
for hybrid LLMs across a fleet of serving nodes.

    import cluster_sim
    summary = cluster_sim.run(cluster_sim.compose(["policy=lru", "model=qwen3_next_80b_a3b"]))
    print(summary.table())
"""
import os as _os

# numba vectorises math calls with Intel's SVML when the optional icc_rt package is installed, and
# SVML's results differ from the C library's in the last bit: keep every kernel on the C library,
# so that both engines and every machine agree (decision 131). Set before numba is first imported.
_os.environ.setdefault("NUMBA_DISABLE_INTEL_SVML", "1")

from ._version import __version__  # noqa: E402


def run(config, **kw):
    """Run one simulation; see :func:`cluster_sim.api.run`."""
    from .api import run as _run
    return _run(config, **kw)


def compose(overrides=None) -> dict:
    """Compose ``conf/`` with Hydra overrides into a plain mapping (same as the command line)."""
    from .cli import compose as _compose
    return _compose(overrides or [])


__all__ = ["run", "compose", "__version__"]
