"""Bounds on work: how much one command may simulate, read or parse before it is refused.

Each limit has a default and an environment variable that raises (or lowers) it, for a user who
really needs more; ``docs/limits.md`` lists them. A limit that is hit is one error that names it
and its variable.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from pkbsim.errors import PkbsimError, UsageError


@dataclass(frozen=True)
class Limit:
    name: str
    default: int
    env: str
    what: str
    # a default computed where the command runs (``default`` is its fallback), and how the
    # tables describe it
    computed: Callable[[], int | None] | None = None
    described: str | None = None

    @property
    def default_now(self) -> int:
        """The default in force: the computed one where it can be computed, else ``default``."""
        if self.computed is not None:
            found = self.computed()
            if found is not None and found >= 1:
                return found
        return self.default

    @property
    def value(self) -> int:
        """The default, or the environment's override (a positive integer)."""
        text = os.environ.get(self.env)
        if text is None or not text.strip():
            return self.default_now
        text = text.strip()
        if not text.isdigit() or len(text) > 19 or int(text) < 1:
            raise UsageError(f"{self.env}={text[:40]!r}: expected a positive integer "
                             f"(the limit on {self.what})")
        return int(text)

    def exceeded(self, amount: float, what: str, error: type[PkbsimError] = UsageError,
                 file: str | None = None, field: str | None = None) -> PkbsimError:
        """The error for ``amount`` over this limit."""
        return error(f"{what}: {amount:,.0f} is over the limit of {self.value:,} {self.what} "
                     f"(raise it with {self.env}=N)", file=file, field=field)

    def check(self, amount: float, what: str, error: type[PkbsimError] = UsageError,
              file: str | None = None, field: str | None = None) -> None:
        if amount > self.value:
            raise self.exceeded(amount, what, error, file, field)


_AVAILABLE_MIB: list[int | None] = []


def available_memory_mib() -> int | None:
    """80% of the memory this process may still take when first asked, plus what it holds
    then, in MiB: the least of /proc/meminfo's MemAvailable, a cgroup's (v2) memory.max less
    its memory.current, and the address-space limit (ulimit -v) less the process's size; None
    where none can be read. Read once per process."""
    if not _AVAILABLE_MIB:
        room: list[float] = []
        size = held = 0.0
        try:
            with open("/proc/self/statm") as f:
                pages = f.read().split()
            page = os.sysconf("SC_PAGE_SIZE")
            size, held = int(pages[0]) * page, int(pages[1]) * page
            with open("/proc/meminfo") as f:
                for line in f:
                    if line.startswith("MemAvailable:"):
                        room.append(int(line.split()[1]) * 1024)
        except (OSError, ValueError, IndexError):
            pass
        try:
            with open("/sys/fs/cgroup/memory.max") as f:
                top = f.read().strip()
            with open("/sys/fs/cgroup/memory.current") as f:
                used = int(f.read().strip())
            if top.isdigit():
                room.append(int(top) - used)
        except (OSError, ValueError):
            pass
        try:
            import resource

            soft = resource.getrlimit(resource.RLIMIT_AS)[0]
            if soft != resource.RLIM_INFINITY and size:
                room.append(soft - size)
        except (ImportError, OSError, ValueError):
            pass
        _AVAILABLE_MIB.append(int((0.8 * max(min(room), 0) + held) / 2**20) if room else None)
    return _AVAILABLE_MIB[0]


SIM_NODES = Limit("sim_nodes", 2_000_000, "PKBSIM_MAX_SIM_NODES",
                  "timed nodes (host dispatches, kernels, calls) in one simulation")
SIM_FLOWS = Limit("sim_flows", 10_000_000, "PKBSIM_MAX_SIM_FLOWS",
                  "transfers started in one simulation (custom_best: all its runs and the "
                  "calls it simulates alone)")
SIM_MEMORY = Limit("sim_memory", 8_192, "PKBSIM_MAX_SIM_MEMORY_MB",
                   "MiB of resident memory a simulating process may reach (estimated before "
                   "building, read while running)", computed=available_memory_mib,
                   described="what pkbsim holds at start + 80% of the memory free then "
                             "(else 8,192)")
SIM_CALLS = Limit("sim_calls", 10_000, "PKBSIM_MAX_SIM_CALLS",
                  "collective calls custom_best simulates alone to choose each op's algorithm "
                  "(comm ops x roots x 4 candidates, per piece count tried)")
TASK_OPS = Limit("task_ops", 10_000, "PKBSIM_MAX_TASK_OPS",
                 "ops in one task (each is bounded, simulated and shown in every command)")
SWEEP_POINTS = Limit("sweep_points", 100_000, "PKBSIM_MAX_SWEEP_POINTS", "points in one sweep")
AXIS_VALUES = Limit("axis_values", 100_000, "PKBSIM_MAX_AXIS_VALUES",
                    "values in one sweep axis")
INPUT_BYTES = Limit("input_bytes", 256 * 2**20, "PKBSIM_MAX_INPUT_BYTES",
                    "bytes in one data, results or log file")
SOURCE_BYTES = Limit("source_bytes", 2**20, "PKBSIM_MAX_SOURCE_BYTES",
                     "bytes in one solution file inspected")
SOURCE_FILES = Limit("source_files", 10_000, "PKBSIM_MAX_SOURCE_FILES",
                     "solution files inspected in one command")
SOURCE_TOTAL_BYTES = Limit("source_total_bytes", 8 * 2**20, "PKBSIM_MAX_SOURCE_TOTAL_BYTES",
                           "bytes of solution files inspected in one command")
WALK_ENTRIES = Limit("walk_entries", 100_000, "PKBSIM_MAX_WALK_ENTRIES",
                     "files and folders looked at under the folders inspected in one command")
NESTING = Limit("nesting", 100, "PKBSIM_MAX_NESTING",
                "levels of nesting in a JSON or YAML file")
RANK_FILE_BYTES = Limit("rank_file_bytes", 2**20, "PKBSIM_MAX_RANK_FILE_BYTES",
                        "bytes in one rank's status or timing file (a candidate may write "
                        "over it)")
CPU_RANKS = Limit("cpu_ranks", 64, "PKBSIM_MAX_CPU_RANKS",
                  "ranks of a pkbsim run on CPU (one process each)")
TRACE_LOG_BYTES = Limit("trace_log_bytes", 4 * 2**20, "PKBSIM_MAX_TRACE_LOG_BYTES",
                        "bytes of a tracing job's output kept in its log (the first ones and "
                        "the last 64 KiB)")
KINETO_TRACE_BYTES = Limit("kineto_trace_bytes", 512 * 2**20, "PKBSIM_MAX_KINETO_TRACE_BYTES",
                           "bytes of one PyTorch profiler (Kineto) trace, after decompression")

LIMITS = (SIM_NODES, SIM_FLOWS, SIM_MEMORY, SIM_CALLS, TASK_OPS, SWEEP_POINTS, AXIS_VALUES,
          INPUT_BYTES, SOURCE_BYTES, SOURCE_FILES, SOURCE_TOTAL_BYTES, WALK_ENTRIES, NESTING,
          RANK_FILE_BYTES, CPU_RANKS, TRACE_LOG_BYTES, KINETO_TRACE_BYTES)
