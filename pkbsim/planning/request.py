"""A sweep request as the command line and the Python API both give it: fixed values and
varied axes to :class:`~pkbsim.planning.axes.Axis` objects, where the points run, and the check
that at least one point succeeded. Nothing here prints."""

from __future__ import annotations

import contextlib
import math
import os
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING

from pkbsim.errors import InfeasibleError, UsageError

if TYPE_CHECKING:
    from pkbsim.planning.axes import Axis
    from pkbsim.planning.sweep import Runner, SweepResult, SweepSpec

EXECUTORS = ("local", "dask")
CPU_MAX = Path("/sys/fs/cgroup/cpu.max")  # a container's CPU quota (cgroup v2): "QUOTA PERIOD"


def usable_cores(cpu_max: Path | None = None) -> int:
    """The cores this process may use: its CPU affinity, capped by a cgroup CPU quota (a
    container's ``--cpus``), where ``os.cpu_count()`` tells the host's."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # no affinity on this platform
        cores = os.cpu_count() or 1
    try:
        quota, period = (cpu_max or CPU_MAX).read_text().split()[:2]
        if quota != "max":
            cores = min(cores, math.ceil(int(quota) / int(period)))
    except (OSError, ValueError):  # no cgroup v2 quota here
        pass
    return max(1, cores)


def default_workers(jobs: int | None, spec: SweepSpec) -> int:
    """``--jobs``, else one worker per usable core, but no more than the sweep has points: a
    worker process (a LocalCluster's above all) costs its start-up whether it runs or not."""
    if jobs is not None:
        return jobs
    return max(1, min(usable_cores(), math.prod(len(axis.values) for axis in spec.axes)))


def sweep_spec(task: str | None, collective: str | None, topology: str, preset: str,
               host_model: str | None, vary: list[str], sizes: str | None,
               world_size: int | None, sets: list[str], metrics: list[str]) -> SweepSpec:
    """The sweep the options describe (``vary`` and ``sets`` as ``NAME=VALUES`` texts)."""
    from pkbsim.planning.evaluate import Target, parse_metrics
    from pkbsim.planning.sweep import SweepSpec

    if task is None and collective is None and any(
            item.partition("=")[0].strip() == "task" for item in vary):
        task = "1"  # a placeholder: every point names its task (--vary task=...)
    target = Target(task=task, collective=collective, topology=topology, preset=preset,
                    host_model=host_model)
    return SweepSpec(target, tuple(build_axes(target, vary, sizes, world_size, sets)),
                     parse_metrics(metrics))


def build_axes(target: object, vary: list[str], sizes: str | None, world_size: int | None,
               sets: list[str]) -> list[Axis]:
    """Fixed values (--world-size, --set) as one-value axes, then --vary, then --sizes."""
    from pkbsim.planning.axes import Axis, check_axes, parse_sizes, parse_vary

    axes: list[Axis] = []
    if world_size is not None:
        axes.append(parse_vary(f"world_size={world_size}"))
    for item in sets:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise UsageError(f"--set {item!r}: expected KEY=VALUE")
        axis = parse_vary(item)
        if len(axis.values) != 1:
            raise UsageError(f"--set {item!r}: one value; vary it with --vary")
        axes.append(axis)
    axes += [parse_vary(item) for item in vary]
    if sizes is not None:
        if getattr(target, "collective", None) is None:
            raise UsageError("--sizes works with --collective; for a task, --vary one of its "
                             "parameters")
        axes.append(Axis("size", tuple(parse_sizes(sizes, "--sizes"))))
    check_axes(axes)
    if not axes:
        raise UsageError("nothing to sweep: give --vary NAME=VALUES (or --sizes)")
    return axes


def runner_for(executor: str, scheduler: str | None, jobs: int | None, workers: int
               ) -> AbstractContextManager[Runner | None]:
    """None for the local pool; for dask, a connected runner (dask imported only here)."""
    if executor not in EXECUTORS:
        raise UsageError(f"--executor {executor!r}: expected one of {', '.join(EXECUTORS)}")
    if executor == "local":
        if scheduler is not None:
            raise UsageError("--scheduler works with --executor dask")
        return contextlib.nullcontext()
    if scheduler is not None and jobs is not None:
        raise UsageError("--jobs sizes a LocalCluster; with --scheduler, the cluster's workers "
                         "run the points")
    from pkbsim.planning import dask_executor

    return dask_executor.connect(scheduler, workers)


def failures(result: SweepResult) -> str | None:
    """An InfeasibleError when no point succeeded (every one failed or does not apply); a
    warning line when some failed; else None. Points that do not apply are no failures."""
    counts = result.counts
    if result.rows and counts.ok == 0:
        from pkbsim.planning.sweep import NOT_APPLICABLE

        if counts.failed:
            first = next(str(r["error"]) for r in result.rows if "error" in r)
            what = (f"every point failed ({counts.failed})" if not counts.not_applicable else
                    f"no point succeeded ({counts.failed} failed, {counts.not_applicable} not "
                    "applicable)")
            raise InfeasibleError(f"{what}; the first: {first}")
        first = next(str(r[NOT_APPLICABLE]) for r in result.rows if NOT_APPLICABLE in r)
        raise InfeasibleError(f"no point applies ({counts.not_applicable}); the first: {first}")
    if counts.failed:
        return f"pkbsim: {counts.failed} of {len(result.rows)} points failed (see the error column)"
    return None


def not_applicable_note(result: SweepResult) -> str | None:
    """A line counting the points that do not apply (a preset their task lacks), or None."""
    skipped = result.counts.not_applicable
    if not skipped:
        return None
    return (f"pkbsim: {skipped} of {len(result.rows)} points not applicable (a preset the task "
            "does not define; see the not_applicable column); not failures")
