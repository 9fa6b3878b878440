"""``up``'s stop signals (cli/supervise.py's :class:`Stopper`), sent to this
process: a hang-up asks for the graceful stop as Ctrl-C does, but a repeated
one (a closing terminal can send two) never forces it."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import pytest

from redcron.cli.supervise import Stopper


@pytest.fixture
def stopper() -> Iterator[Stopper]:
    s = Stopper()
    s.install()
    yield s
    s.uninstall()


def send(sig: int) -> None:
    # delivered before kill returns (POSIX, to oneself), and Python runs its
    # handler on the way back from the call: before the next line
    os.kill(os.getpid(), sig)


@pytest.mark.parametrize("first", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_each_stop_signal_asks_for_a_graceful_stop(stopper: Stopper, first: int) -> None:
    send(first)
    assert stopper.event.is_set()
    assert stopper.count == 1


def test_a_second_hang_up_does_not_force_the_stop_a_second_ctrl_c_does(stopper: Stopper) -> None:
    send(signal.SIGHUP)
    send(signal.SIGHUP)
    assert stopper.count == 1
    send(signal.SIGINT)
    assert stopper.count == 2


def test_uninstall_gives_the_signals_back() -> None:
    before = signal.getsignal(signal.SIGHUP)
    s = Stopper()
    s.install()
    assert signal.getsignal(signal.SIGHUP) != before
    s.uninstall()
    assert signal.getsignal(signal.SIGHUP) == before
