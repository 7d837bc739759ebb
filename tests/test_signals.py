"""SIGTERM is told apart from Ctrl-C even when a library re-raises it as a plain KeyboardInterrupt."""
from __future__ import annotations

import os
import signal

import pytest

from cluster_sim.signals import Terminated, sigterm_as_interrupt, was_terminated


def test_sigterm_raises_terminated_and_is_remembered_when_reraised_plain():
    with sigterm_as_interrupt():
        assert not was_terminated(KeyboardInterrupt())       # Ctrl-C: nothing was received
        with pytest.raises(Terminated):
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(10 ** 7):                          # the handler runs between bytecodes
                pass
        # Ray's ray.get / ray.wait turn what a handler raised into a plain KeyboardInterrupt
        assert was_terminated(KeyboardInterrupt())
    with sigterm_as_interrupt():                             # a new block starts clean
        assert not was_terminated(KeyboardInterrupt())
