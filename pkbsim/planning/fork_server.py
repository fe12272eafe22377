"""The process the LocalCluster's workers of ``pkbsim sweep --executor dask`` are forked from.

Forking the command itself is unsafe: by the time the workers start, it runs the cluster's
event-loop thread (and, in a notebook or a test run, others), and a child forked while another
thread holds a lock can hang. Spawning each worker (Dask's default) re-imports distributed and
pkbsim in each. A fork server is a fresh interpreter with no other thread: it imports both once
and forks the workers from there. Started as early as the command knows it needs it, so that its
imports overlap the command's own. Standard library only: it runs before dask is imported.
"""

from __future__ import annotations

import importlib.util
import multiprocessing
from multiprocessing import forkserver

# distributed's start method for the LocalCluster's workers: the fork server where the platform
# has one (Linux, macOS), else Dask's default
METHOD = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
PRELOAD = ["distributed", "pkbsim.planning.sweep"]  # what a worker needs for its first batch


def start() -> None:
    """Start the fork server, importing PRELOAD, unless it runs already (or there is no dask to
    start workers with); returns at once."""
    if METHOD == "forkserver" and importlib.util.find_spec("distributed") is not None:
        forkserver.set_forkserver_preload(PRELOAD)
        forkserver.ensure_running()
