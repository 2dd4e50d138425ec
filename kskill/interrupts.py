"""SIGINT, SIGTERM and SIGHUP end any kskill command the same way: as an exception, so clean-up runs.

The first of these signals raises Interrupted in the main thread. Everything below unwinds
through its `finally` blocks: sandboxes are killed with every process in them, review workdirs
are removed, an optimization run is marked `interrupted` in the graph, and the store is closed.
Later signals are ignored while that happens (it is bounded: a sandbox gets a few seconds to
stop before it is killed outright), so a second Ctrl-C cannot cut the clean-up short.
"""

from __future__ import annotations

import signal
from types import FrameType

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupted(KeyboardInterrupt):
    """A stop signal arrived. A KeyboardInterrupt, so `except Exception` never swallows it."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        self.signal_name = signal.Signals(signum).name
        super().__init__(f"interrupted by {self.signal_name}")

    @property
    def exit_code(self) -> int:
        return 128 + self.signum  # what a shell reports for a process this signal ended


class RunInterrupted(Interrupted):
    """An optimization run stopped by a signal; it is marked interrupted and can be resumed."""

    def __init__(self, signum: int, run_id: str) -> None:
        super().__init__(signum)
        self.run_id = run_id


def as_interrupted(exc: KeyboardInterrupt) -> Interrupted:
    """A plain KeyboardInterrupt (a Ctrl-C before the handlers were installed) as an Interrupted."""
    return exc if isinstance(exc, Interrupted) else Interrupted(signal.SIGINT)


def stop_on_signals() -> None:
    """Install the handlers; call once, from the main thread, before any work starts."""
    for signum in STOP_SIGNALS:
        signal.signal(signum, _first_stop)


def _first_stop(signum: int, frame: FrameType | None) -> None:
    for other in STOP_SIGNALS:
        signal.signal(other, signal.SIG_IGN)
    raise Interrupted(signum)
