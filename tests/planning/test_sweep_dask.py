"""pkbsim sweep --executor dask: a LocalCluster of two worker processes on this machine gives
the local executor's file and rows, resumes, survives a killed worker, turns a batch that keeps
failing into error rows, and reports a missing dask or scheduler in one line."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import socket
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pkbsim.planning import sweep as sweep_module
from pkbsim.planning.axes import parse_vary
from pkbsim.planning.evaluate import Target, parse_metrics
from pkbsim.planning.sweep import SweepSpec, read_results, run_sweep
from pkbsim.report import sweep_report

HAS_DASK = importlib.util.find_spec("distributed") is not None
needs_dask = pytest.mark.skipif(not HAS_DASK, reason="dask.distributed is not installed "
                                "(pip install 'pkbsim[cluster]')")
# a hang (a worker that never starts, a close that never returns) fails here within minutes
pytestmark = pytest.mark.timeout(180)
LINK = "scale_up.link_bandwidth_GBps"
CLI_SWEEP = ("sweep", "--collective", "all_reduce", "--sizes", "1KiB:1MiB:x4", "--vary",
             "world_size=4,8", "--metric", "nccl_reference,busbw")


def grpo_spec() -> SweepSpec:
    """60 cheap roofline points, as in test_planning_sweep."""
    return SweepSpec(Target(task="grpo"), (parse_vary("world_size=2,4,8"),
                                           parse_vary(f"{LINK}=10:200:+10")),
                     parse_metrics(["roofline"]))


def simulated_spec() -> SweepSpec:
    """12 simulated points: the simulator's floats must come back from the workers unchanged."""
    return SweepSpec(Target(collective="all_reduce"),
                     (parse_vary("world_size=4,8"), parse_vary("size=1KiB:1MiB:x4")),
                     parse_metrics(["nccl_reference", "busbw"]))


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    import logging

    from distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address="127.0.0.1:0", silence_logs=logging.CRITICAL) as local:
        yield local


@pytest.fixture
def runner(cluster: Any) -> Iterator[Any]:
    """A runner on the shared cluster, through its scheduler address (a real cluster's path)."""
    from pkbsim.planning import dask_executor

    with dask_executor.connect(cluster.scheduler_address, 0) as connected:
        yield connected


def patch_task(monkeypatch: pytest.MonkeyPatch, task: Callable[..., Any]) -> None:
    """What the runner submits; a closure, so that cloudpickle carries it to the workers."""
    from pkbsim.planning import dask_executor

    monkeypatch.setattr(dask_executor, "evaluate_chunk", task)


@needs_dask
@pytest.mark.parametrize("spec", [grpo_spec(), simulated_spec()], ids=["roofline", "simulated"])
def test_dask_gives_the_local_file_rows_and_outputs(tmp_path: Path, runner: Any,
                                                    spec: SweepSpec) -> None:
    local = run_sweep(spec, tmp_path / "local.jsonl", jobs=2)
    dask = run_sweep(spec, tmp_path / "dask.jsonl", jobs=2, runner=runner)
    assert (tmp_path / "dask.jsonl").read_bytes() == (tmp_path / "local.jsonl").read_bytes()
    assert dask.rows == local.rows and dask.columns == local.columns
    assert dask.counts == local.counts
    for render in (sweep_report.render_table, sweep_report.render_csv,
                   sweep_report.render_json, sweep_report.render_markdown):
        assert render(dask) == render(local)


@needs_dask
def test_interrupted_client_keeps_rows_cancels_tasks_and_resumes(tmp_path: Path, cluster: Any,
                                                                 runner: Any) -> None:
    import time

    fresh = run_sweep(grpo_spec(), None, jobs=1)
    path = tmp_path / "i.jsonl"

    def stop_after_5(done: int, total: int) -> None:
        if done == 5:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_sweep(grpo_spec(), path, progress=stop_after_5, runner=runner)
    kept, _ = read_results(path, grpo_spec())
    assert len(kept) == 5 and len(path.read_text().splitlines()) == 6
    deadline = time.monotonic() + 10
    while cluster.scheduler.tasks and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not cluster.scheduler.tasks  # cancelled: nothing left on the scheduler
    resumed = run_sweep(grpo_spec(), path, runner=runner)
    assert resumed.counts.resumed == 5 and resumed.counts.computed == 55
    assert resumed.rows == fresh.rows
    assert [json.loads(line) for line in path.read_text().splitlines()][1:] == fresh.rows


@needs_dask
def test_a_sweep_the_local_executor_began_resumes_on_dask(tmp_path: Path, runner: Any) -> None:
    path = tmp_path / "l.jsonl"

    def stop_after_25(done: int, total: int) -> None:
        if done == 25:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_sweep(grpo_spec(), path, jobs=2, progress=stop_after_25)
    resumed = run_sweep(grpo_spec(), path, runner=runner)
    run_sweep(grpo_spec(), tmp_path / "whole.jsonl", jobs=2)
    assert resumed.counts.resumed == 25
    assert path.read_bytes() == (tmp_path / "whole.jsonl").read_bytes()


@needs_dask
def test_a_worker_killed_mid_sweep_loses_no_point(tmp_path: Path, runner: Any,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    marker = str(tmp_path / "killed")

    def die_on_the_first_task(target: Any, metrics: Any, batch: Any) -> Any:
        try:
            os.close(os.open(marker, os.O_CREAT | os.O_EXCL))
        except FileExistsError:
            return sweep_module.evaluate_chunk(target, metrics, batch)
        os._exit(1)  # the worker process dies running its task; its nanny starts another

    patch_task(monkeypatch, die_on_the_first_task)
    result = run_sweep(grpo_spec(), tmp_path / "k.jsonl", runner=runner)
    assert os.path.exists(marker)
    assert result.rows == run_sweep(grpo_spec(), None, jobs=1).rows  # rerun on a live worker


@needs_dask
def test_a_batch_that_keeps_failing_becomes_error_rows(tmp_path: Path, runner: Any,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    def fail_at_8_200(target: Any, metrics: Any, batch: Any) -> Any:
        if any(p["world_size"] == 8 and p[LINK] == 200 for _, p in batch):
            raise RuntimeError("out of memory on the worker")
        return sweep_module.evaluate_chunk(target, metrics, batch)

    patch_task(monkeypatch, fail_at_8_200)
    result = run_sweep(grpo_spec(), tmp_path / "f.jsonl", runner=runner)
    fresh = run_sweep(grpo_spec(), None, jobs=1)
    failed = [r for r in result.rows if "error" in r]
    assert 1 <= len(failed) < 60 and result.counts.failed == len(failed)
    assert {(r["world_size"], r[LINK]) for r in failed} >= {(8, 200)}
    for row in failed:
        assert set(row) == {"world_size", LINK, "error"}  # the local executor's error rows
        assert row["error"] == ("failed on the Dask cluster after 2 retries: RuntimeError: out "
                                "of memory on the worker")
    for got, want in zip(result.rows, fresh.rows, strict=True):
        assert got == want or ("error" in got and got["world_size"] == want["world_size"]
                               and got[LINK] == want[LINK])


@needs_dask
@pytest.mark.slow
def test_a_point_whose_workers_always_die_becomes_an_error_row(
        tmp_path: Path, runner: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    def die_at_8_200(target: Any, metrics: Any, batch: Any) -> Any:
        if any(p["world_size"] == 8 and p[LINK] == 200 for _, p in batch):
            os._exit(1)
        return sweep_module.evaluate_chunk(target, metrics, batch)

    patch_task(monkeypatch, die_at_8_200)
    result = run_sweep(grpo_spec(), tmp_path / "d.jsonl", runner=runner)
    failed = [r for r in result.rows if "error" in r]
    assert len(result.rows) == 60 and 1 <= len(failed) < 60
    assert all("died (KilledWorker)" in r["error"] for r in failed), {r["error"] for r in failed}


@needs_dask
@pytest.mark.slow
def test_cli_dask_local_cluster_writes_the_local_files(cli: Any, tmp_path: Path) -> None:
    outputs = {}
    for executor in ("local", "dask"):
        out, jsonl = tmp_path / f"{executor}.csv", tmp_path / f"{executor}.jsonl"
        got = cli(*CLI_SWEEP, "--executor", executor, "--jobs", "2", "--out", str(out),
                  "--jsonl", str(jsonl))
        assert got.code == 0, got.err
        outputs[executor] = (out.read_bytes(), jsonl.read_bytes())
    assert outputs["dask"] == outputs["local"]


@needs_dask
def test_interrupt_closes_the_local_cluster(tmp_path: Path) -> None:
    from pkbsim.planning import dask_executor

    def stop_after_3(done: int, total: int) -> None:
        if done == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt), dask_executor.connect(None, 2) as runner:
        run_sweep(grpo_spec(), tmp_path / "c.jsonl", progress=stop_after_3, runner=runner)
    assert runner.client.status == "closed"
    assert runner.client.cluster.status.name == "closed"
    assert len(read_results(tmp_path / "c.jsonl", grpo_spec())[0]) == 3


@needs_dask
def test_local_cluster_workers_come_from_the_fork_server_not_the_client() -> None:
    """Forking the client, whose event-loop threads may hold locks, can hang a worker (a CI run
    hung at the first forked LocalCluster of this module); the workers' parent must be the fork
    server, a fresh single-threaded process."""
    from pkbsim.planning import dask_executor, fork_server

    if fork_server.METHOD != "forkserver":
        pytest.skip("no fork server on this platform: the workers are spawned")
    with dask_executor.connect(None, 2) as runner:
        parents = set(runner.client.run(os.getppid).values())
        imported = runner.client.run(lambda: "pkbsim.planning.sweep" in sys.modules)
    assert len(parents) == 1 and os.getpid() not in parents
    assert all(imported.values())  # preloaded by the fork server, before the first batch


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@needs_dask
def test_unreachable_scheduler_is_one_line_exit_2(cli: Any, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from pkbsim.planning import dask_executor

    monkeypatch.setattr(dask_executor, "CONNECT_TIMEOUT_S", 1.0)
    address = f"tcp://127.0.0.1:{free_port()}"
    got = cli(*CLI_SWEEP, "--executor", "dask", "--scheduler", address, "--jsonl",
              str(tmp_path / "s.jsonl"))
    assert got.code == 2 and got.err.count("\n") == 1, got.err
    assert got.err.startswith(f"pkbsim: error: --scheduler {address}: cannot reach the Dask "
                              "scheduler within 1 s")
    assert not (tmp_path / "s.jsonl").exists()  # nothing touched


@pytest.mark.parametrize(("args", "message"), [
    (("--scheduler", "tcp://127.0.0.1:8786"), "--scheduler works with --executor dask"),
    (("--executor", "dask", "--scheduler", "tcp://127.0.0.1:8786", "--jobs", "2"),
     "--jobs sizes a LocalCluster"),
    (("--executor", "dask", "--scheduler", "nowhere"),
     "--scheduler nowhere: not a Dask scheduler address"),
    (("--executor", "ray",), "'ray' is not one of 'local', 'dask'"),
])
def test_cli_executor_errors_are_one_line(cli: Any, args: tuple[str, ...], message: str) -> None:
    if "nowhere" in args and not HAS_DASK:
        pytest.skip("dask.distributed is not installed")
    got = cli(*CLI_SWEEP, *args)
    assert got.code == 2 and got.err.count("\n") == 1, got.err
    assert message in got.err


def test_missing_dask_is_one_line_exit_2(cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import pkbsim.planning

    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed fails
    monkeypatch.delitem(sys.modules, "pkbsim.planning.dask_executor", raising=False)
    monkeypatch.delattr(pkbsim.planning, "dask_executor", raising=False)
    got = cli(*CLI_SWEEP, "--executor", "dask")
    assert got.code == 2
    assert got.err == ("pkbsim: error: --executor dask needs dask.distributed: pip install "
                       "'pkbsim[cluster]'\n")


@needs_dask
def test_workers_of_another_pkbsim_version_are_refused(cluster: Any,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from pkbsim.planning import dask_executor

    monkeypatch.setattr(dask_executor, "__version__", "0.0.0-client")
    with pytest.raises(dask_executor.ClusterError) as info, \
            dask_executor.connect(cluster.scheduler_address, 0):
        pass
    assert "the Dask workers run pkbsim " in info.value.one_line()
    assert "this client 0.0.0-client; install the same version on both" in info.value.one_line()


@needs_dask
def test_losing_the_scheduler_is_one_error_and_keeps_the_rows(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import logging

    from distributed import LocalCluster

    from pkbsim.planning import dask_executor

    monkeypatch.setattr(dask_executor, "CONNECT_TIMEOUT_S", 2.0)
    path = tmp_path / "lost.jsonl"
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                      dashboard_address="127.0.0.1:0", silence_logs=logging.CRITICAL) as doomed:
        def close_the_scheduler(done: int, total: int) -> None:
            if done == 5:
                doomed.close()

        with pytest.raises(dask_executor.ClusterError) as info, \
                dask_executor.connect(doomed.scheduler_address, 0) as runner:
            run_sweep(grpo_spec(), path, progress=close_the_scheduler, runner=runner)
    assert info.value.one_line() == ("lost the Dask scheduler (its tasks were cancelled); the "
                                     "finished points are kept: run the same command to resume")
    assert len(read_results(path, grpo_spec())[0]) >= 5


SCRIPT = """import pkbsim
r = pkbsim.sweep(collective="all_reduce", sizes="1KiB,2KiB", metrics=["nccl_reference"],
                 executor="dask", jobs=2)
print("rows", len(r.to_dict()["rows"]))
"""


@needs_dask
@pytest.mark.slow
@pytest.mark.parametrize("guarded", [True, False], ids=["guarded", "unguarded"])
def test_a_script_without_a_main_guard_gets_one_clear_error(tmp_path: Path,
                                                             guarded: bool) -> None:
    """The workers import the main script (forkserver, like spawn): a script must guard its
    sweep; one that does not gets a ClusterError naming the fix, not a hang."""
    import subprocess
    import textwrap

    body = ("if __name__ == '__main__':\n" + textwrap.indent(SCRIPT, "    ")) if guarded \
        else SCRIPT
    script = tmp_path / "planner.py"
    script.write_text(body)
    got = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=120, cwd=tmp_path)
    if guarded:
        assert got.returncode == 0, got.stderr
        assert got.stdout.strip().endswith("rows 2")
    else:
        assert got.returncode != 0
        assert "ClusterError: the LocalCluster's worker processes did not start" in got.stderr
        assert 'call the sweep under `if __name__ == "__main__":`' in got.stderr


def _garbage_server() -> tuple[socket.socket, str]:
    """A server that answers every connection with HTTP's 400 at once (what a web server, or
    Dask's own dashboard port, may say to Dask's binary handshake)."""
    import threading

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)

    def serve() -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = server.accept()
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n" * 4)
                conn.close()

    threading.Thread(target=serve, daemon=True).start()
    return server, f"tcp://127.0.0.1:{server.getsockname()[1]}"


@needs_dask
@pytest.mark.timeout(30)
@pytest.mark.parametrize("kind", ["silent", "http", "tls"])
def test_what_is_not_a_dask_scheduler_is_one_line_exit_2(cli: Any, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch,
                                                         kind: str) -> None:
    from pkbsim.planning import dask_executor

    monkeypatch.setattr(dask_executor, "CONNECT_TIMEOUT_S", 1.0)
    if kind == "http":
        server, address = _garbage_server()
        needle = "does not speak Dask's protocol"
    else:  # a listener that accepts (the kernel's backlog) and never answers
        server = socket.socket()
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        address = f"{'tls' if kind == 'tls' else 'tcp'}://127.0.0.1:{server.getsockname()[1]}"
        needle = ("tls:// needs Dask's TLS settings" if kind == "tls"
                  else "sent no Dask handshake")
    with server:
        got = cli(*CLI_SWEEP, "--executor", "dask", "--scheduler", address, "--jsonl",
                  str(tmp_path / "s.jsonl"))
    assert got.code == 2 and got.err.count("\n") == 1, got.err  # before: a hang, a traceback
    assert got.err.startswith(f"pkbsim: error: --scheduler {address}: cannot reach the Dask "
                              "scheduler within 1 s") and needle in got.err, got.err
    assert not (tmp_path / "s.jsonl").exists()


@needs_dask
@pytest.mark.timeout(30)
def test_a_dask_worker_is_not_taken_for_its_scheduler(cluster: Any) -> None:
    from pkbsim.planning import dask_executor

    worker = next(iter(cluster.scheduler_info["workers"]))
    with pytest.raises(dask_executor.ClusterError, match="a Dask Worker answers there, not a "
                       "scheduler"):
        dask_executor.reach(worker, 2.0)


@pytest.mark.parametrize(("cpu_max", "cores"), [
    ("200000 100000\n", 2), ("150000 100000\n", 2), ("50000 100000\n", 1), ("max 100000\n", 16),
    (None, 16)])
def test_workers_are_the_usable_cores_not_the_hosts(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    cpu_max: str | None, cores: int) -> None:
    from pkbsim.planning.request import default_workers, usable_cores

    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: set(range(16)), raising=False)
    path = tmp_path / "cpu.max"
    if cpu_max is not None:
        path.write_text(cpu_max)  # a container given fewer CPUs than its host has
    assert usable_cores(path) == cores
    monkeypatch.setattr("pkbsim.planning.request.CPU_MAX", path)
    assert default_workers(None, grpo_spec()) == cores  # 60 points: one worker per core
    assert default_workers(None, SweepSpec(Target(collective="all_reduce"), (
        parse_vary("size=1KiB,2KiB"),), parse_metrics(["roofline"]))) == min(cores, 2)
    assert default_workers(3, grpo_spec()) == 3  # --jobs as given
