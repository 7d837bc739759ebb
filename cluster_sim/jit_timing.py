"""Time spent compiling numba kernels, so that a first run's compilation is not counted as
simulation time (``sim_wall_s``). numba announces every compilation as a ``numba:compile``
event (a kernel loaded from numba's cache is not one); nested compilations are counted once.
Without numba this measures nothing."""
from __future__ import annotations


class CompileTimer:
    def __init__(self):
        self._listener = None
        self._ev = None
        self.seconds = 0.0

    def start(self) -> "CompileTimer":
        try:
            import numba.core.event as ev
        except ImportError:   # no numba: nothing is compiled
            return self
        self._ev, self._listener = ev, ev.TimingListener()
        ev.register("numba:compile", self._listener)
        return self

    def stop(self) -> float:
        """Unregister (once) and return the seconds spent compiling since :meth:`start`."""
        if self._listener is not None:
            self._ev.unregister("numba:compile", self._listener)
            if self._listener.done:
                self.seconds = float(self._listener.duration)
            self._listener = None
        return self.seconds


def start() -> CompileTimer:
    return CompileTimer().start()


def cached(module_file: str, stem: str) -> bool:
    """Whether numba's cache holds an index (``<stem>*.nbi``) for a kernel of the module at
    ``module_file``: under ``$NUMBA_CACHE_DIR`` when it is set, else beside the module
    (``__pycache__``, numba's default).
    Used only to decide whether to print a compile notice."""
    import os
    from pathlib import Path

    root = os.environ.get("NUMBA_CACHE_DIR")
    if root:            # numba then caches there only
        return any(Path(root).rglob(f"{stem}*.nbi"))
    return any((Path(module_file).resolve().parent / "__pycache__").glob(f"{stem}*.nbi"))
