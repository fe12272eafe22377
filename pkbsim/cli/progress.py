"""Progress on stderr: a rich display on a terminal, plain lines (or nothing) elsewhere."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from pkbsim.validation.cases import Case
from pkbsim.validation.runner import Event

PROGRESS_REFRESH_S = 0.1


class CaseProgress:
    """One progress task per case, driven by the runner's events, on a terminal: shown from the
    machine's probe to the end of the run, then gone. Elsewhere (a log file, a batch job) one
    line per finished case on stderr."""

    def __init__(self, cases: list[Case]) -> None:
        self.console = Console(stderr=True)
        self.live = self.console.is_terminal
        self.started = False
        self.bar = Progress(TextColumn("{task.description}", markup=False), BarColumn(),
                            TimeElapsedColumn(), TextColumn("{task.fields[note]}", markup=False),
                            console=self.console, transient=True)
        self.tasks: dict[str, TaskID] = {
            case.key: self.bar.add_task(case.key, total=1, start=False, note="")
            for case in cases}

    def stop(self) -> None:
        if self.started:
            self.bar.stop()
            self.started = False

    def on_event(self, event: Event) -> None:
        if event.kind == "environment" and self.live:  # options, folder and machine are fine
            self.bar.start()
            self.started = True
        if event.case is None:
            return
        if not self.live:
            if event.kind == "done" and event.result is not None:
                sys.stderr.write(f"pkbsim: [{event.index + 1}/{event.total}] {event.case.key}: "
                                 f"{event.result.status} ({event.result.elapsed_s:.1f} s)\n")
            return
        task = self.tasks[event.case.key]
        if event.kind == "start":
            self.bar.start_task(task)
            self.bar.update(task, total=None, note=f"limit {event.limit_s:g} s")
        elif event.kind == "done" and event.result is not None:
            self.bar.update(task, total=1, completed=1, note=event.result.status)
            self.bar.stop_task(task)


@contextmanager
def sweep_progress() -> Iterator[Callable[[int, int], None] | None]:
    """A rich bar on stderr when it is a terminal. No refresh thread: workers fork safely."""
    if not sys.stderr.isatty():
        yield None
        return
    bar = Progress("sweep", BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                   console=Console(stderr=True), auto_refresh=False, transient=True)
    update = _throttled(bar, bar.add_task("sweep", total=None))

    def sweep_update(done: int, total: int) -> None:
        update(done, total)

    with bar:
        yield sweep_update


@contextmanager
def step_progress(label: str) -> Iterator[Callable[[int, int, str], None] | None]:
    """A rich bar on stderr for work in this process told as (done, total, what), when stderr
    is a terminal; elsewhere None (nothing printed: stdout holds the answer)."""
    if not sys.stderr.isatty():
        yield None
        return
    bar = Progress(TextColumn(label, markup=False), BarColumn(), MofNCompleteColumn(),
                   TimeElapsedColumn(), TextColumn("{task.fields[what]}", markup=False),
                   console=Console(stderr=True), auto_refresh=False, transient=True)
    update = _throttled(bar, bar.add_task(label, total=None, what=""))

    def step_update(done: int, total: int, what: str) -> None:
        update(done, total, what=what)

    with bar:
        yield step_update


def _throttled(bar: Progress, task_id: TaskID) -> Callable[..., None]:
    """Update ``task_id`` on every call; redraw at most every PROGRESS_REFRESH_S, and at the
    end (no refresh thread: workers fork safely)."""
    last = 0.0

    def update(done: int, total: int, **fields: Any) -> None:
        nonlocal last
        bar.update(task_id, completed=done, total=total, **fields)
        now = time.monotonic()
        if now - last >= PROGRESS_REFRESH_S or done == total:
            bar.refresh()
            last = now

    return update
