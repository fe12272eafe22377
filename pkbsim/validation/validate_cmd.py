"""``pkbsim validate``: list the cases, or run them with a progress bar and a summary table.

Exit code 0 when every case that ran is ok or waived, 1 when one failed or timed out, 2 for a
bad option, 130 on Ctrl-C (the cases done are kept). SystemExit, not typer.Exit: typer returns
the latter's code from a non-standalone app, where the entry point drops it.
"""

from __future__ import annotations

import contextlib
import math
import shlex
import signal
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from pkbsim.errors import UsageError
from pkbsim.report.table import to_text
from pkbsim.validation.cases import Case, select
from pkbsim.validation.results import STATUSES, Results
from pkbsim.validation.runner import Event, run_suite


def validate_command(*, gpus: int | None, quick: bool, patterns: str | None, out: Path,
                     allow_multicast: bool, timeout_s: float | None, nnodes: int,
                     rdzv_endpoint: str | None, list_only: bool) -> None:
    check_options(gpus, timeout_s, nnodes, rdzv_endpoint)
    cases = select(patterns)
    if list_only:
        sys.stdout.write(case_table(cases))
        return
    command = command_line(gpus, quick, patterns, out, allow_multicast, timeout_s, nnodes,
                           rdzv_endpoint)
    progress = _Progress(cases)
    try:
        with terminate_as_interrupt():
            results = run_suite(cases, out, gpus, quick, allow_multicast, timeout_s, nnodes,
                                rdzv_endpoint, progress.on_event, command=command)
    except KeyboardInterrupt:  # the runner has written the cases done and killed the child
        progress.stop()
        sys.stderr.write(f"pkbsim: interrupted; the cases done so far are in "
                         f"{out / 'results.json'}\n")
        raise SystemExit(130) from None
    finally:
        progress.stop()
    ran = {case.key for case in cases}
    sys.stdout.write(summary(results, ran))
    if any(c.status in ("failed", "timeout") for c in results.cases if c.key in ran):
        raise SystemExit(1)


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM (a batch system cancelling the job) takes Ctrl-C's path: the running case's
    processes are killed and the results so far kept."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def check_options(gpus: int | None, timeout_s: float | None, nnodes: int,
                  rdzv_endpoint: str | None) -> None:
    if gpus is not None and gpus < 1:
        raise UsageError(f"--gpus {gpus}: expected 1 or more")
    if timeout_s is not None and not (timeout_s > 0 and math.isfinite(timeout_s)):
        raise UsageError(f"--timeout {timeout_s}: expected a number of seconds > 0")
    if nnodes < 1:
        raise UsageError(f"--nnodes {nnodes}: expected 1 or more")
    if nnodes > 1 and not rdzv_endpoint:
        raise UsageError(f"--nnodes {nnodes}: needs --rdzv-endpoint HOST:PORT (the same on "
                         "every node)")
    if rdzv_endpoint is not None:
        if nnodes == 1:
            raise UsageError("--rdzv-endpoint: only used with --nnodes 2 or more")
        host, _, port = rdzv_endpoint.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise UsageError(f"--rdzv-endpoint {rdzv_endpoint!r}: expected HOST:PORT")


def command_line(gpus: int | None, quick: bool, patterns: str | None, out: Path,
                 allow_multicast: bool, timeout_s: float | None, nnodes: int,
                 rdzv_endpoint: str | None) -> str:
    """The pkbsim command these options stand for (recorded in results.json)."""
    args = ["pkbsim", "validate"]
    args += ["--gpus", str(gpus)] if gpus is not None else []
    args += ["--quick"] if quick else []
    args += ["--cases", patterns] if patterns is not None else []
    args += ["--out", str(out)]
    args += ["--allow-multicast"] if allow_multicast else []
    args += ["--timeout", f"{timeout_s:g}"] if timeout_s is not None else []
    args += ["--nnodes", str(nnodes), "--rdzv-endpoint", str(rdzv_endpoint)] if nnodes > 1 \
        else []
    return shlex.join(args)


def case_table(cases: list[Case]) -> str:
    table = _table("key", "GPUs", "launcher", "limit s (quick)", "description")
    for case in cases:
        launcher = case.launcher + (", multicast" if case.multicast else "")
        table.add_row(case.key, str(case.gpus), launcher,
                      f"{case.timeout_s:g} ({case.quick_timeout_s:g})", case.description)
    return to_text(table)


def summary(results: Results, ran: set[str]) -> str:
    env = results.environment
    gpu = f"{env.get('gpu_count', 0)} x {env['gpu_name']}" if env.get("gpu_name") else "no GPU"
    soft = ", ".join(f"{name} {env[name]}" for name in ("driver", "cuda", "nccl", "torch")
                     if env.get(name))
    table = _table("case", "status", "measurements", "elapsed s", "note")
    counts: Counter[str] = Counter()
    for case in results.cases:
        if case.key not in ran:
            continue
        counts[case.status] += 1
        table.add_row(case.key, case.status, str(len(case.measurements)),
                      f"{case.elapsed_s:.1f}", case.error or "")
    tally = ", ".join(f"{counts[s]} {s}" for s in STATUSES if counts[s])
    folder = Path(results.file).parent
    return (f"Machine {env.get('hostname')}: {gpu}" + (f" ({soft})" if soft else "") + "\n"
            + to_text(table)
            + f"{tally}. Results: {results.file} (logs in {folder / 'logs'})\n")


def _table(*columns: str) -> Table:
    table = Table(show_edge=False, pad_edge=False)
    for col in columns:
        table.add_column(col, overflow="fold")
    return table


class _Progress:
    """One progress task per case, driven by the runner's events, on a terminal: shown from the
    machine's probe to the end of the run, then gone. Elsewhere (a log file, a batch job) one
    line per finished case on stderr."""

    def __init__(self, cases: list[Case]) -> None:
        self.console = Console(stderr=True)
        self.live = self.console.is_terminal
        self.started = False
        self.bar = Progress(TextColumn("{task.description}"), BarColumn(),
                            TimeElapsedColumn(), TextColumn("{task.fields[note]}"),
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
