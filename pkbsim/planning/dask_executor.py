"""Sweep points as tasks on a Dask cluster: ``pkbsim sweep --executor dask [--scheduler ADDR]``.

The pending points go out in batches (the local pool's chunking, sized for a task's overhead),
one Dask task each; rows come back to the client as the tasks finish and run_sweep streams them
to its file, so resume, progress and the finished file are those of the local executor. A batch
whose task still fails after Dask's retries (an exception, or workers lost while running it)
becomes error rows for its points. Losing the scheduler raises ClusterError; the rows already
written stay for a resume.

Imported only for ``--executor dask``: dask is the optional extra ``cluster``. Nothing prints.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import signal
import socket
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

from pkbsim import __version__
from pkbsim.errors import PkbsimError, UsageError
from pkbsim.planning import fork_server
from pkbsim.planning.sweep import Items, Record, Row, SweepSpec, chunks, evaluate_chunk

try:
    import dask
    import distributed
    from distributed.comm.addressing import get_address_host_port
    from distributed.comm.core import connect as dask_connect
except ImportError:
    raise UsageError("--executor dask needs dask.distributed: pip install 'pkbsim[cluster]'"
                     ) from None

CONNECT_TIMEOUT_S = 10.0  # to reach the scheduler, and for it to have a worker
RETRIES = 2  # Dask's retries of a batch that raised; a lost worker's batch is rerun as well
BATCH_S = 0.25  # a batch of cheap points takes about this long (a task costs about 1 ms)
MAX_BATCH_POINTS = 256

Rows = list[tuple[int, Row]]  # a batch's rows by point index
# The LocalCluster's background work, which shares the cores with the points: no statistical
# profiler in the workers, and slower monitors (the defaults are 10 to 500 ms)
QUIET = {"distributed.worker.profile.enabled": False,
         "distributed.admin.tick.interval": "1s",
         "distributed.worker.memory.monitor-interval": "1s",
         "distributed.admin.system-monitor.interval": "2s"}


class ClusterError(PkbsimError):
    """The Dask scheduler cannot be reached, has no workers, or was lost during the sweep."""


@dataclass(frozen=True)
class DaskRunner:
    """run_sweep's Runner on a connected client."""

    client: distributed.Client
    retries: int = RETRIES

    def __call__(self, spec: SweepSpec, items: Items, record: Record, point_s: float) -> None:
        threads = max(1, sum(self.client.nthreads().values()))
        batches = chunks(items, threads, point_s, BATCH_S, MAX_BATCH_POINTS)
        futures = {self.client.submit(evaluate_chunk, spec.target, spec.metrics, batch,
                                      retries=self.retries, pure=False,
                                      priority=len(batches) - k): batch  # costly first
                   for k, batch in enumerate(batches)}
        try:
            for future in distributed.as_completed(futures, loop=self.client.loop):
                batch = futures.pop(future)
                for i, row in self.rows(future, batch):
                    record(i, row)
        finally:
            if futures:  # interrupted: what has not run is dropped on the scheduler
                self.client.cancel(list(futures))

    def rows(self, future: distributed.Future[Rows], batch: Items) -> Rows:
        """A finished task's rows; error rows for its points when it failed for good.

        The result is waited for even when as_completed has yielded the future: a result lost
        with its worker before it was gathered is computed again (its status goes back to
        pending)."""
        try:
            return list(future.result())
        except (concurrent.futures.CancelledError, asyncio.CancelledError):
            raise ClusterError("lost the Dask scheduler (its tasks were cancelled); the "
                               "finished points are kept: run the same command to resume"
                               ) from None
        except Exception as exc:  # the task's own exception, or KilledWorker
            error = failure(exc, self.retries)
            return [(i, {**point, "error": error}) for i, point in batch]
        finally:
            future.release()


def failure(exc: BaseException, retries: int) -> str:
    """An error row's text for a batch that failed on the cluster."""
    if isinstance(exc, distributed.KilledWorker):
        return "the Dask workers running this point died (KilledWorker)"
    what = exc.one_line() if isinstance(exc, PkbsimError) else f"{type(exc).__name__}: {exc}"
    return PkbsimError(f"failed on the Dask cluster after {retries} retries: {what}").one_line()


@contextmanager
def connect(scheduler: str | None, workers: int) -> Iterator[DaskRunner]:
    """A runner on the cluster at ``scheduler``, or on a LocalCluster of ``workers`` processes
    (one thread each) started here; the client, and the LocalCluster, close on exit."""
    with ExitStack() as stack:
        stack.enter_context(quiet_client_logs())
        if scheduler is None:
            fork_server.start()  # where the command has not started it already
            cluster = stack.enter_context(local_cluster(workers))
            client = stack.enter_context(distributed.Client(cluster))
            client.register_plugin(LeaveInterruptToClient(), name="pkbsim-sweep")
        else:
            client = stack.enter_context(reach(scheduler, CONNECT_TIMEOUT_S))
        yield DaskRunner(client)


def local_cluster(workers: int) -> distributed.LocalCluster:
    """A LocalCluster of ``workers`` single-threaded processes; ClusterError if they do not
    start, most often because they re-ran a script that starts a sweep at import."""
    # the workers come from the fork server (planning/fork_server.py), not from this process
    start = {"distributed.worker.multiprocessing-method": fork_server.METHOD}
    try:
        with dask.config.set({**QUIET, **start}):
            return distributed.LocalCluster(
                n_workers=workers, threads_per_worker=1, processes=True,
                dashboard_address="127.0.0.1:0", silence_logs=logging.ERROR)
    except RuntimeError as exc:  # distributed: "Nanny failed to start."
        raise ClusterError(
            f"the LocalCluster's worker processes did not start ({exc}). Each one imports the "
            "main script, as Python's forkserver and spawn start methods do: in a script, "
            "call the sweep under `if __name__ == \"__main__\":`") from None


@contextmanager
def quiet_client_logs() -> Iterator[None]:
    """distributed's log lines on stderr (a lost worker, a lost scheduler) are held back: what
    they report ends up in error rows or in one ClusterError line."""
    handlers = [h for h in logging.getLogger("distributed").handlers
                if isinstance(h, logging.StreamHandler)]
    levels = [h.level for h in handlers]
    for handler in handlers:
        handler.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for handler, level in zip(handlers, levels, strict=True):
            handler.setLevel(level)


def reach(scheduler: str, timeout_s: float) -> distributed.Client:
    """A client of the scheduler at ``scheduler`` that has at least one worker. What answers
    there is asked who it is first, within ``timeout_s`` (``probe``): distributed's own
    Client waits without end on a listener that never answers."""
    where = f"--scheduler {scheduler}"
    try:
        host, port = get_address_host_port(scheduler)
    except ValueError as exc:  # checked first: a Client of a bad address hangs at exit
        raise UsageError(f"{where}: not a Dask scheduler address ({exc}); expected "
                         "tcp://HOST:PORT") from None
    probe(scheduler, host, port, timeout_s)
    try:
        client = distributed.Client(scheduler, timeout=timeout_s, set_as_default=False)
    except (OSError, ValueError, TypeError) as exc:
        raise ClusterError(f"{where}: cannot reach the Dask scheduler within {timeout_s:g} s "
                           f"({_reason(exc)})") from None
    try:
        client.wait_for_workers(1, timeout=timeout_s)
        check_workers(client, where)
    except (OSError, TimeoutError):
        client.close()
        raise ClusterError(f"{where}: the Dask scheduler has no worker after {timeout_s:g} s; "
                           f"start some with: dask worker {scheduler}") from None
    except BaseException:
        client.close()
        raise
    return client


def probe(scheduler: str, host: str, port: int, timeout_s: float) -> None:
    """ClusterError unless a Dask scheduler at ``scheduler`` says who it is within
    ``timeout_s``: a closed port, a silent listener, an HTTP server, a Dask worker, a tls://
    address without Dask's TLS settings each end in one line naming the address."""
    where = f"--scheduler {scheduler}"
    unreachable = f"{where}: cannot reach the Dask scheduler within {timeout_s:g} s"
    try:  # the host and port first, so a closed port is told apart from a silent listener
        socket.create_connection((host, port), timeout=timeout_s).close()
    except OSError as exc:
        raise ClusterError(f"{unreachable} ({_reason(exc)})") from None
    outcome: list[BaseException | dict[str, Any]] = []

    def ask() -> None:
        try:
            outcome.append(asyncio.run(asyncio.wait_for(_identity(scheduler), timeout_s)))
        except BaseException as exc:  # reported by the caller's thread
            outcome.append(exc)

    thread = threading.Thread(target=ask, name="pkbsim-dask-probe", daemon=True)
    thread.start()
    thread.join(timeout_s + 5)  # asyncio.wait_for ends it; the margin is for a stuck loop
    found = outcome[0] if outcome else TimeoutError()
    if isinstance(found, (TimeoutError, asyncio.TimeoutError)):
        raise ClusterError(f"{unreachable}: something listens on {host}:{port} but sent no "
                           "Dask handshake (not a Dask scheduler?)")
    if isinstance(found, TypeError) and scheduler.startswith("tls://"):
        raise ClusterError(f"{unreachable}: tls:// needs Dask's TLS settings "
                           "(distributed.comm.tls.ca-file, .client.cert and .client.key)")
    if isinstance(found, BaseException):
        raise ClusterError(f"{unreachable}: what answers on {host}:{port} does not speak "
                           f"Dask's protocol ({_reason(found)})")
    if found.get("type") != "Scheduler":
        raise ClusterError(f"{where}: a Dask {found.get('type', 'server')} answers there, "
                           "not a scheduler")


async def _identity(address: str) -> dict[str, Any]:
    """What the Dask server at ``address`` says it is (its ``identity``)."""
    args = distributed.Security().get_connection_args("client")
    comm = await dask_connect(address, **args)
    try:
        await comm.write({"op": "identity", "reply": True})
        answer = await comm.read()
    finally:
        comm.abort()
    return answer if isinstance(answer, dict) else {"type": type(answer).__name__}


def _reason(exc: BaseException) -> str:
    """An exception as a short phrase (one line, at most 200 characters)."""
    text = " ".join(str(exc).split())[:200]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def check_workers(client: distributed.Client, where: str) -> None:
    """The workers run this client's pkbsim version (else their rows could differ)."""
    try:
        versions = set(client.run(pkbsim_version).values())
    except Exception as exc:  # pkbsim missing there: the function cannot be unpickled
        raise ClusterError(f"{where}: a Dask worker cannot run pkbsim ({type(exc).__name__}: "
                           f"{exc}); install pkbsim {__version__} on every worker") from None
    if versions != {__version__}:
        raise ClusterError(f"{where}: the Dask workers run pkbsim "
                           + ", ".join(sorted(versions)) + f", this client {__version__}; "
                           "install the same version on both")


def pkbsim_version() -> str:
    """Run on each worker: its own pkbsim's version."""
    return __version__


class LeaveInterruptToClient(distributed.WorkerPlugin):
    """On the LocalCluster's workers: Ctrl-C, which a terminal sends to every process of the
    sweep, is the client's to handle (it cancels the tasks and closes the cluster)."""

    def setup(self, worker: Any) -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
