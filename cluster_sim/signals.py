"""SIGTERM handled like Ctrl-C (SIGINT) by the command line and the sweep driver.

A ``kill`` (SIGTERM, what schedulers, ``timeout`` and container stops send) raises
:class:`Terminated`, a :class:`KeyboardInterrupt`, in the main thread: whatever
handles Ctrl-C handles it too (a sweep marks its parent run KILLED and can be
resumed; a single run leaves no run folder). ``ray.init`` installs its own
SIGTERM handler in the driver (``sys.exit``), so :func:`reclaim` puts ours back
after Ray starts.
"""
from __future__ import annotations

import signal
import threading
from contextlib import contextmanager

__all__ = ["Terminated", "sigterm_as_interrupt", "reclaim", "was_terminated"]

_depth = 0
_received = False


class Terminated(KeyboardInterrupt):
    """SIGTERM was received."""


def _handler(signum, frame):  # noqa: ARG001 - signal handler signature
    global _received
    _received = True
    raise Terminated()


def was_terminated(e: BaseException) -> bool:
    """Whether the interruption ``e`` came from SIGTERM. Ray's blocking calls (``ray.get``,
    ``ray.wait``) run signal handlers from C++ and re-raise whatever they raise as a plain
    ``KeyboardInterrupt``, so the type alone does not tell: the handler also leaves a mark."""
    return isinstance(e, Terminated) or _received


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextmanager
def sigterm_as_interrupt():
    """Within the block (main thread only), SIGTERM raises :class:`Terminated`."""
    global _depth
    if not _main_thread():
        yield
        return
    global _received
    previous = signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, _handler)
    _received = False
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)


def reclaim() -> None:
    """Inside :func:`sigterm_as_interrupt`, make SIGTERM ours again (after a library replaced it)."""
    if _depth and _main_thread() and signal.getsignal(signal.SIGTERM) is not _handler:
        signal.signal(signal.SIGTERM, _handler)
