"""Signals, in one place: a batch system's SIGTERM takes Ctrl-C's path, so a command that runs
children (validation cases, PKB runs, sweep workers) stops them and keeps what is done."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block SIGTERM raises KeyboardInterrupt (in the main thread; elsewhere signal
    handlers cannot be set and SIGTERM is left alone)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
