"""A stop signal becomes one Interrupted exception; later ones cannot cut the clean-up short."""

import os
import signal
import time

import pytest

from kskill.interrupts import STOP_SIGNALS, Interrupted, RunInterrupted, as_interrupted, stop_on_signals


@pytest.fixture
def handlers():
    saved = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    stop_on_signals()
    yield
    for s, handler in saved.items():
        signal.signal(s, handler)


@pytest.mark.parametrize("signum", STOP_SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_the_first_signal_raises_and_later_ones_are_ignored(handlers, signum):
    cleaned = False
    with pytest.raises(Interrupted) as caught:
        try:
            os.kill(os.getpid(), signum)
            time.sleep(5)  # the handler runs before this returns
        finally:
            os.kill(os.getpid(), signal.SIGTERM)  # a second signal while cleaning up
            time.sleep(0.05)
            cleaned = True
    assert cleaned
    assert caught.value.signum == signum and caught.value.exit_code == 128 + signum
    assert isinstance(caught.value, KeyboardInterrupt)  # `except Exception` never swallows it


def test_a_plain_ctrl_c_and_a_run_keep_their_meaning():
    assert as_interrupted(KeyboardInterrupt()).signal_name == "SIGINT"
    stopped = RunInterrupted(signal.SIGHUP, "run-x")
    assert as_interrupted(stopped) is stopped and stopped.run_id == "run-x" and stopped.exit_code == 129
