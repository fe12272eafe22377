"""The process's resident memory, watched while a simulation runs (SIM_MEMORY): the safety net
under pkbsim.sim.memory's estimate, so that no simulation is ended by the kernel's
out-of-memory killer without a word."""

from __future__ import annotations

import gc
import os
import resource
import sys
from collections.abc import Callable

from pkbsim.errors import InfeasibleError
from pkbsim.limits import SIM_MEMORY

MIB = 2**20
WATCH_FLOWS = 65_536  # transfers between two reads of the resident size


def resident_bytes() -> int:
    """The process's resident memory now (its peak where /proc cannot be read)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak if sys.platform == "darwin" else peak * 1024


# the reader the check and the guard use (tests replace it)
read_resident: Callable[[], int] = resident_bytes


def watch() -> None:
    """During a simulation: stop it once the process's resident memory passes SIM_MEMORY."""
    if read_resident() / MIB <= SIM_MEMORY.value:
        return
    gc.collect()  # garbage of an earlier simulation, if any
    mib = read_resident() / MIB
    if mib > SIM_MEMORY.value:
        raise SIM_MEMORY.exceeded(mib, "simulation (resident memory, MiB)", InfeasibleError)
