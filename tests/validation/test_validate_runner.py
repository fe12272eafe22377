"""The validation runner without a GPU: the case registry, waived logic, child processes (fake
scripts that succeed, crash, hang or write bad lines), results.json after each case, merging,
and ``pkbsim validate`` on this GPU-less machine."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from paths import ROOT

from pkbsim import processes
from pkbsim.errors import UsageError
from pkbsim.processes import NO_MULTICAST, error_tail
from pkbsim.validation.cases import CASES, Case, select
from pkbsim.validation.results import load
from pkbsim.validation.runner import (
    ValidationError,
    child_command,
    child_env,
    read_raw,
    run_suite,
    waiver,
)

# A fake validate/: environment.py reports FAKE_GPUS GPUs on host FAKE_HOST.
FAKE_ENVIRONMENT = """
import json, os
n = int(os.environ.get("FAKE_GPUS", "0"))
print("a warning before the object")
print(json.dumps({"gpu_count": n, "gpu_name": "Fake GPU" if n else None,
                  "hostname": os.environ.get("FAKE_HOST", "fakehost")}))
"""
HEAD = """
import json, os, subprocess, sys, time
args = sys.argv[1:]
out = args[args.index("--out") + 1]
key = args[args.index("--case") + 1]

def line(obj):
    with open(out, "a") as f:
        f.write(json.dumps(obj) + "\\n")

def measure(size, t):
    line({"measurement": {"op": "d2d_copy_engine", "size_bytes": size, "time_us": t,
                          "bandwidth_GBps": size / t / 1e3, "repeats": 3,
                          "params": {"case": key}}})
"""
FAKES = {
    "ok.py": HEAD + """
measure(1024, 2.0)
measure(2048, 3.0)
names = ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS",
         "CUDA_VISIBLE_DEVICES", "PYTHONUNBUFFERED", "FAKE_EXTRA", "NCCL_ALGO")
line({"data": {"env": {n: os.environ.get(n) for n in names}, "argv": args}})
""",
    "crash.py": HEAD + """
measure(1024, 2.0)
with open(out, "a") as f:
    f.write('{"measurement": {"op": "d2d_copy')  # cut short by the crash
print("some progress", flush=True)
print("boom: the device is on fire", file=sys.stderr)
sys.exit(3)
""",
    "hang.py": HEAD + """
import signal
grandchild = subprocess.Popen([sys.executable, "-c",
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"])
with open(out + ".pid", "w") as f:
    f.write(str(grandchild.pid))
measure(1024, 2.0)
time.sleep(600)
""",
    "corrupt.py": HEAD + """
measure(1024, 2.0)
line({"measurement": {"op": "d2d_copy_engine", "size_bytes": 1024, "time_us": 0}})
with open(out, "a") as f:
    f.write("not json\\n")
""",
    "sleep.py": HEAD + """
with open(out + ".pid", "w") as f:
    f.write(str(os.getpid()))
measure(1024, 2.0)
time.sleep(600)
""",
    "seen.py": HEAD + """
from pathlib import Path
results = json.loads((Path(out).parents[1] / "results.json").read_text())
line({"data": {"seen": [c["key"] for c in results["cases"]]}})
""",
}


def case(key: str, script: str, gpus: int = 1, **kw: object) -> Case:
    return Case(key, f"fake {key}", gpus, script, **kw)  # type: ignore[arg-type]


@pytest.fixture
def scripts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "validate"
    folder.mkdir()
    (folder / "environment.py").write_text(FAKE_ENVIRONMENT)
    for name, text in FAKES.items():
        (folder / name).write_text(text)
    monkeypatch.setenv("FAKE_GPUS", "1")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(processes, "KILL_GRACE_S", 1.0)
    return folder


def gone(pid: int) -> bool:
    """No such process, or only its zombie left."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def wait_gone(pid: int, within_s: float = 5.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if gone(pid):
            return True
        time.sleep(0.05)
    return False


# --- the registry ---------------------------------------------------------------------------

def test_registry() -> None:
    keys = [c.key for c in CASES]
    assert len(keys) == len(set(keys)) == 18
    assert keys[:9] == ["topology.discover", "hbm.copy_engine", "hbm.sm_copy", "launch.kernel",
                        "host.dispatch", "host.copy", "kernels.kinds", "pkb.references",
                        "host.dispatch_multi"]
    assert keys[-5:] == ["nccl.collectives", "nccl.ring_ll", "nccl.ring_ll128",
                         "nccl.ring_simple", "nccl.nvls"]
    by_key = {c.key: c for c in CASES}
    assert [c.key for c in CASES if c.gpus == 1] == keys[:8]
    assert all(c.gpus == 2 for c in CASES[8:])
    assert [c.key for c in CASES if c.launcher == "torchrun"] == ["host.dispatch_multi",
                                                                  *keys[-5:]]
    assert [c.key for c in CASES if c.multicast] == ["nccl.nvls"]
    assert by_key["nccl.nvls"].env == {"NCCL_NVLS_ENABLE": "1", "NCCL_ALGO": "NVLS"}
    assert by_key["nccl.ring_ll128"].env == {"NCCL_ALGO": "Ring", "NCCL_PROTO": "LL128"}
    for key in ("nccl.ring_ll", "nccl.ring_ll128", "nccl.ring_simple", "nccl.nvls"):
        assert by_key[key].args == ("--collectives", "all_reduce")
    assert {c.script for c in CASES if c.key.startswith("peer.")} == {"peer.py"}
    for c in CASES:
        assert 60 <= c.quick_timeout_s <= 180 and c.quick_timeout_s < c.timeout_s <= 600
        assert c.timeout_s >= 300 or c.key == "topology.discover"
        assert (ROOT / "validate" / c.script).is_file(), c.script


def test_select() -> None:
    assert [c.key for c in select("hbm.*")] == ["hbm.copy_engine", "hbm.sm_copy"]
    assert [c.key for c in select("nccl.ring_*, hbm.sm_copy,hbm.*")] == [
        "hbm.copy_engine", "hbm.sm_copy", "nccl.ring_ll", "nccl.ring_ll128", "nccl.ring_simple"]
    assert select(None) == list(CASES)
    with pytest.raises(UsageError) as err:
        select("hbm.*,nope*")
    text = err.value.one_line()
    assert "'nope*'" in text and "matches no case" in text and "peer.tma" in text
    with pytest.raises(UsageError):
        select(" , ")


# --- waived logic, environment and command of a child ----------------------------------------

TWO = case("x.two", "ok.py", gpus=2)
ONE = case("x.one", "ok.py", gpus=1)
MULTI = case("x.nvls", "ok.py", gpus=2, launcher="torchrun", multicast=True,
             env={"NCCL_NVLS_ENABLE": "1", "NCCL_ALGO": "NVLS"})


@pytest.mark.parametrize(("present", "gpus", "c", "allow", "why"), [
    (0, None, ONE, False, "needs 1 GPU, 0 present"),
    (0, None, MULTI, True, "needs 2 GPUs, 0 present"),
    (1, None, ONE, False, None),
    (1, None, TWO, False, "needs 2 GPUs, 1 present"),
    (2, None, TWO, False, None),
    (2, 1, TWO, False, "needs 2 GPUs, 1 present (--gpus 1)"),
    (2, 4, TWO, False, None),
    (2, None, MULTI, False, "uses NVLink multicast; pass --allow-multicast"),
    (2, None, MULTI, True, None),
])
def test_waiver(present: int, gpus: int | None, c: Case, allow: bool, why: str | None) -> None:
    assert waiver(c, {"gpu_count": present}, gpus, allow) == why


def test_waiver_counts_every_node_for_torchrun_only() -> None:
    dist = case("x.dist", "ok.py", gpus=2, launcher="torchrun")
    assert waiver(dist, {"gpu_count": 1}, None, False, nnodes=2) is None
    assert waiver(TWO, {"gpu_count": 1}, None, False, nnodes=2) == "needs 2 GPUs, 1 present"
    assert waiver(case("x.d4", "ok.py", gpus=4, launcher="torchrun"), {"gpu_count": 1}, None,
                  False, nnodes=2) == "needs 4 GPUs, 1 per node x 2 nodes present"


def test_child_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "1")  # the user's own setting does not win
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    env = child_env(MULTI, {"gpu_count": 4}, None, allow_multicast=False)
    assert {k: env[k] for k in NO_MULTICAST} == NO_MULTICAST
    assert env["NCCL_ALGO"] == "NVLS" and env["PYTHONUNBUFFERED"] == "1"
    assert "CUDA_VISIBLE_DEVICES" not in env
    env = child_env(MULTI, {"gpu_count": 4}, 2, allow_multicast=True)
    assert env["NCCL_NVLS_ENABLE"] == "1" and env["CUDA_VISIBLE_DEVICES"] == "0,1"
    nvls_env = case("x.plain", "ok.py", env={"NCCL_NVLS_ENABLE": "1"})
    assert child_env(nvls_env, {"gpu_count": 4}, None, True)["NCCL_NVLS_ENABLE"] == "0"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5,6,7")
    assert child_env(ONE, {"gpu_count": 3}, 2, False)["CUDA_VISIBLE_DEVICES"] == "5,6"


def test_child_command(tmp_path: Path) -> None:
    script, raw = tmp_path / "s.py", tmp_path / "raw" / "k.jsonl"
    ring = case("nccl.ring_ll", "s.py", gpus=2, launcher="torchrun",
                args=("--collectives", "all_reduce"))
    assert child_command(ONE, script, raw, quick=True, nproc=1) == [
        sys.executable, str(script), "--case", "x.one", "--out", str(raw), "--quick"]
    assert child_command(ring, script, raw, quick=False, nproc=8) == [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "8",
        str(script), "--case", "nccl.ring_ll", "--out", str(raw), "--collectives", "all_reduce"]
    multi = child_command(ring, script, raw, False, 4, nnodes=2, rdzv_endpoint="node1:29500")
    assert multi[3:13] == ["--nnodes", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint",
                           "node1:29500", "--rdzv-id", "pkbsim-nccl.ring_ll",
                           "--nproc-per-node", "4"]


# --- child processes ---------------------------------------------------------------------------

def test_ok_case(scripts: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_GPUS", "4")
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "1")
    extra = case("x.ok", "ok.py", env={"FAKE_EXTRA": "yes"}, args=("--flag", "v"))
    events: list[str] = []
    res = run_suite([extra], tmp_path / "out", gpus=2, quick=True, scripts=scripts,
                    command="pkbsim validate", on_event=lambda e: events.append(e.kind))
    assert events == ["environment", "start", "done"]
    (c,) = res.cases
    assert c.status == "ok" and c.error is None
    assert [(m.size_bytes, m.time_us) for m in c.measurements] == [(1024, 2.0), (2048, 3.0)]
    assert c.measurements[0].bandwidth_GBps == pytest.approx(0.512)
    assert c.data["env"] == {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                             "NVSHMEM_DISABLE_NVLS": "1", "CUDA_VISIBLE_DEVICES": "0,1",
                             "PYTHONUNBUFFERED": "1", "FAKE_EXTRA": "yes", "NCCL_ALGO": None}
    assert c.data["argv"][-3:] == ["--quick", "--flag", "v"]
    assert c.command[0] == sys.executable and c.command[-1] == "v"
    on_disk = load(tmp_path / "out")
    assert on_disk.cases == res.cases
    assert on_disk.environment["gpu_count"] == 4
    assert on_disk.environment["command"] == "pkbsim validate"
    assert on_disk.environment["pkbsim_version"]
    assert on_disk.options["gpus_used"] == 2 and on_disk.options["quick"] is True
    log = (tmp_path / "out" / "logs" / "x.ok.log").read_text()
    assert log.startswith("$ ") and "ok.py" in log


def test_crash_keeps_what_was_measured(scripts: Path, tmp_path: Path) -> None:
    res = run_suite([case("x.crash", "crash.py")], tmp_path, scripts=scripts)
    (c,) = res.cases
    assert c.status == "failed"
    assert len(c.measurements) == 1  # the line cut short is skipped, not an error
    assert c.error == "exit 3: some progress | boom: the device is on fire"


@pytest.mark.slow
def test_hang_times_out_and_its_process_group_dies(scripts: Path, tmp_path: Path) -> None:
    start = time.monotonic()
    res = run_suite([case("x.hang", "hang.py")], tmp_path, timeout_s=2.0, scripts=scripts)
    elapsed = time.monotonic() - start
    (c,) = res.cases
    assert c.status == "timeout" and c.error is not None and "2 s" in c.error
    assert len(c.measurements) == 1
    assert 2.0 <= c.elapsed_s < 2.0 + processes.KILL_GRACE_S + 2.0 and elapsed < 10
    grandchild = int((tmp_path / "raw" / "x.hang.jsonl.pid").read_text())
    assert wait_gone(grandchild), "the grandchild (ignoring SIGTERM) survived"


def test_corrupt_line_fails_the_case(scripts: Path, tmp_path: Path) -> None:
    (c,) = run_suite([case("x.bad", "corrupt.py")], tmp_path, scripts=scripts).cases
    assert c.status == "failed" and len(c.measurements) == 1
    assert c.error == ("raw/x.bad.jsonl line 2: measurement.time_us: expected a time > 0, "
                       "got 0.0 (and 1 more bad lines)")


def test_missing_script_fails(scripts: Path, tmp_path: Path) -> None:
    (c,) = run_suite([case("x.none", "absent.py")], tmp_path, scripts=scripts).cases
    assert c.status == "failed" and "absent.py: no such script" in (c.error or "")


def test_results_written_after_each_case(scripts: Path, tmp_path: Path) -> None:
    cases = [case("x.crash", "crash.py"), case("x.two", "ok.py", gpus=2),
             case("x.seen", "seen.py")]
    res = run_suite(cases, tmp_path, scripts=scripts)
    assert [c.status for c in res.cases] == ["failed", "waived", "ok"]
    assert res.cases[2].data["seen"] == ["x.crash", "x.two"]
    assert load(tmp_path / "results.json").cases == res.cases


@pytest.mark.parametrize(("gpus", "statuses"), [
    ("0", ["waived", "waived", "waived"]),
    ("1", ["ok", "waived", "waived"]),
    ("2", ["ok", "ok", "waived"]),
])
def test_waived_by_gpu_count(scripts: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                             gpus: str, statuses: list[str]) -> None:
    monkeypatch.setenv("FAKE_GPUS", gpus)
    cases = [case("x.one", "ok.py"), case("x.two", "ok.py", gpus=2),
             case("x.mc", "ok.py", gpus=2, multicast=True)]
    res = run_suite(cases, tmp_path, scripts=scripts)
    assert [c.status for c in res.cases] == statuses
    assert res.cases[2].error is not None
    assert all(c.measurements == () for c in res.cases if c.status == "waived")


def test_merge_with_an_earlier_run(scripts: Path, tmp_path: Path) -> None:
    run_suite([case("x.crash", "crash.py"), case("x.ok", "ok.py")], tmp_path, scripts=scripts)
    (scripts / "crash.py").write_text(FAKES["ok.py"])  # fixed, run again alone
    res = run_suite([case("x.crash", "crash.py")], tmp_path, scripts=scripts)
    assert [(c.key, c.status) for c in res.cases] == [("x.crash", "ok"), ("x.ok", "ok")]
    assert load(tmp_path).cases == res.cases


def test_refuses_another_machines_results(scripts: Path, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    run_suite([case("x.ok", "ok.py")], tmp_path, scripts=scripts)
    before = (tmp_path / "results.json").read_text()
    monkeypatch.setenv("FAKE_HOST", "elsewhere")
    with pytest.raises(UsageError) as err:
        run_suite([case("x.ok", "ok.py")], tmp_path, scripts=scripts)
    assert "another machine" in err.value.one_line() and "--out" in err.value.one_line()
    assert (tmp_path / "results.json").read_text() == before


def test_corrupt_results_file_is_kept(scripts: Path, tmp_path: Path) -> None:
    (tmp_path / "results.json").write_text('{"schema": "pkbsim.validation/1", "cases": 3')
    with pytest.raises(UsageError) as err:
        run_suite([case("x.ok", "ok.py")], tmp_path, scripts=scripts)
    assert str(tmp_path / "results.json") in err.value.one_line()
    assert (tmp_path / "results.json").read_text().endswith('"cases": 3')


def test_probe_failure(scripts: Path, tmp_path: Path) -> None:
    (scripts / "environment.py").write_text("import sys; sys.exit('no luck')")
    with pytest.raises(ValidationError, match=r"probe failed \(exit 1\): no luck"):
        run_suite([case("x.ok", "ok.py")], tmp_path, scripts=scripts)


def test_ctrl_c_kills_the_case_and_keeps_the_others(scripts: Path, tmp_path: Path) -> None:
    # Ctrl-C as a terminal delivers it, even where this runs as a background job (which a
    # shell starts with SIGINT ignored)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    pid_file = tmp_path / "raw" / "x.hang.jsonl.pid"
    stop = threading.Event()

    def ctrl_c_once_hanging() -> None:
        while not stop.is_set() and not pid_file.exists():
            time.sleep(0.05)
        time.sleep(0.2)
        if not stop.is_set():
            os.kill(os.getpid(), signal.SIGINT)

    thread = threading.Thread(target=ctrl_c_once_hanging)
    thread.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            run_suite([case("x.ok", "ok.py"), case("x.hang", "hang.py"),
                       case("x.never", "ok.py")], tmp_path, timeout_s=60.0, scripts=scripts)
    finally:
        stop.set()
        thread.join()
        signal.signal(signal.SIGINT, previous)
    res = load(tmp_path)
    assert [(c.key, c.status, c.error) for c in res.cases] == [
        ("x.ok", "ok", None), ("x.hang", "failed", "interrupted")]
    assert len(res.cases[1].measurements) == 1
    assert wait_gone(int(pid_file.read_text()))


@pytest.mark.slow
def test_torchrun_case_times_out_with_its_workers(scripts: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    monkeypatch.setenv("FAKE_GPUS", "2")
    (c,) = run_suite([case("x.dist", "hang.py", gpus=2, launcher="torchrun")], tmp_path,
                     timeout_s=15.0, scripts=scripts).cases
    assert c.status == "timeout"
    assert c.command[1:6] == ("-m", "torch.distributed.run", "--standalone",
                              "--nproc-per-node", "2")
    # both workers append to the same file; each started a grandchild that ignores SIGTERM
    raw = (tmp_path / "raw" / "x.dist.jsonl").read_text()
    assert raw.count("\n") == 2 and len(c.measurements) == 2
    grandchild = int((tmp_path / "raw" / "x.dist.jsonl.pid").read_text())
    assert wait_gone(grandchild)


# --- pure helpers ------------------------------------------------------------------------------

def test_error_tail_drops_torchruns_report() -> None:
    log = "\n".join([
        "$ python -m torch.distributed.run ...",
        "nccl_collectives: all_reduce at 1024 B: wrong result on rank 1: element 0 is nan",
        "W1203 12:00:00.000 torch.distributed.elastic.multiprocessing.api: Sending SIGTERM",
        "Traceback (most recent call last):",
        '  File "run.py", line 9, in <module>',
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
        "=====", "nccl_collectives.py FAILED", "exitcode  : 1 (pid: 12)", "====="])
    assert error_tail(log) == ("nccl_collectives: all_reduce at 1024 B: wrong result on rank 1: "
                               "element 0 is nan")
    assert error_tail("a\nb\n\nc\nd\n") == "b | c | d"
    assert error_tail("x" * 1000, max_chars=50) == "..." + "x" * 47


def test_read_raw(tmp_path: Path) -> None:
    good = {"op": "launch_graph_node", "size_bytes": 0, "time_us": 1.5, "bandwidth_GBps": None}
    path = tmp_path / "k.jsonl"
    path.write_text(json.dumps({"data": {"a": 1}}) + "\n" + json.dumps({"measurement": good})
                    + "\n" + json.dumps({"data": {"b": 2}}) + "\n" + '{"measu')
    ms, data, err = read_raw(path, "k")
    assert err is None and data == {"a": 1, "b": 2} and ms[0].time_us == 1.5
    path.write_text(json.dumps({"measurement": {**good, "op": "warp_drive"}}) + "\n"
                    + json.dumps({"other": 1}) + "\n")
    ms, data, err = read_raw(path, "k")
    assert ms == [] and err == "k line 1: measurement.op: unknown op 'warp_drive' (and 1 more " \
                               "bad lines)"
    assert read_raw(tmp_path / "absent.jsonl", "k") == ([], {}, None)


# --- the command line --------------------------------------------------------------------------

def test_cli_list(cli) -> None:
    r = cli("validate", "--list", "--cases", "nccl.*")
    assert r.code == 0, r.err
    assert "nccl.ring_ll128" in r.out and "torchrun, multicast" in r.out
    assert "hbm.copy_engine" not in r.out


@pytest.mark.slow
def test_cli_runs_and_waives_without_a_gpu(cli, tmp_path: Path) -> None:
    if shutil.which("nvidia-smi"):
        pytest.skip("this machine has GPUs")
    out = tmp_path / "run"
    r = cli("validate", "--out", str(out), "--cases", "hbm.*", "--quick", "--allow-no-gpu")
    assert r.code == 0, r.err
    res = load(out)
    assert res.environment["gpu_count"] == 0 and res.environment["hostname"]
    assert res.environment["command"] == f"pkbsim validate --quick --cases 'hbm.*' --out {out}"
    assert [(c.key, c.status, c.error) for c in res.cases] == [
        ("hbm.copy_engine", "waived", "needs 1 GPU, 0 present"),
        ("hbm.sm_copy", "waived", "needs 1 GPU, 0 present")]
    assert "2 waived" in r.out and str(out / "results.json") in r.out
    assert r.err == ("pkbsim: [1/2] hbm.copy_engine: waived (0.0 s)\n"
                     "pkbsim: [2/2] hbm.sm_copy: waived (0.0 s)\n")


def test_cli_nothing_measured_is_exit_code_3(cli, scripts: Path, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """No GPU: every case waived; that is said on stderr and is no success (issue 30: it
    exited 0), unless --allow-no-gpu."""
    monkeypatch.setenv("FAKE_GPUS", "0")
    r = cli("validate", "--out", str(tmp_path / "a"), "--cases", "hbm.*")
    assert r.code == 3
    assert "2 waived" in r.out
    assert r.err.splitlines()[-1] == (
        "pkbsim: nothing was measured: all 2 cases were waived (0 GPUs here; the first: needs 1 "
        "GPU, 0 present); pass --allow-no-gpu to accept that (exit 0)")
    ok = cli("validate", "--out", str(tmp_path / "b"), "--cases", "hbm.*", "--allow-no-gpu")
    assert ok.code == 0 and "nothing was measured" not in ok.err
    assert [c.status for c in load(tmp_path / "a").cases] == ["waived", "waived"]


@pytest.mark.parametrize(("args", "text"), [
    (["--gpus", "0"], "--gpus 0: expected an integer >= 1 and <= 100,000"),
    (["--timeout", "0"], "--timeout 0.0: expected a number > 0 and <= 10,000,000"),
    (["--nnodes", "2"], "needs --rdzv-endpoint"),
    (["--nnodes", "2", "--rdzv-endpoint", "node1"], "expected HOST:PORT"),
    (["--rdzv-endpoint", "node1:29500"], "only used with --nnodes 2 or more"),
    (["--cases", "hbm.*,gpu.*"], "'gpu.*': matches no case"),
])
def test_cli_bad_options(cli, args: list[str], text: str) -> None:
    r = cli("validate", *args)
    assert r.code == 2 and r.out == ""
    assert r.err.count("\n") == 1 and text in r.err


def test_cli_refuses_a_corrupt_results_file(cli, tmp_path: Path) -> None:
    (tmp_path / "results.json").write_text("{")
    r = cli("validate", "--out", str(tmp_path), "--cases", "hbm.*")
    assert r.code == 2 and r.err.count("\n") == 1
    assert "results.json: not JSON" in r.err and (tmp_path / "results.json").read_text() == "{"


def test_cli_exit_code_1_when_a_case_fails(cli, scripts: Path, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PKBSIM_VALIDATE_DIR", str(scripts))
    (scripts / "hbm.py").write_text(FAKES["crash.py"])
    r = cli("validate", "--out", str(tmp_path), "--cases", "hbm.copy_engine,peer.tma")
    assert r.code == 1
    assert "exit 3: some progress | boom: the device is on fire" in r.out
    assert "1 waived, 1 failed" in r.out
    assert [c.status for c in load(tmp_path).cases] == ["failed", "waived"]


def test_cli_sigterm_kills_the_case_and_keeps_the_results(scripts: Path, tmp_path: Path) -> None:
    (scripts / "hbm.py").write_text(FAKES["ok.py"])
    (scripts / "launch.py").write_text(FAKES["sleep.py"])
    out = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-m", "pkbsim", "validate", "--out", str(out), "--cases",
         "hbm.copy_engine,launch.kernel,host.copy"],
        env={**os.environ, "PKBSIM_VALIDATE_DIR": str(scripts)}, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    pid_file = out / "raw" / "launch.kernel.jsonl.pid"
    deadline = time.monotonic() + 60
    while not pid_file.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err.endswith(f"pkbsim: interrupted; the cases done so far are in "
                        f"{out / 'results.json'}\n")
    assert [(c.key, c.status, c.error) for c in load(out).cases] == [
        ("hbm.copy_engine", "ok", None), ("launch.kernel", "failed", "interrupted")]
    assert wait_gone(int(pid_file.read_text()))
