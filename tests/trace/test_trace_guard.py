"""The tracer's guard (issue 30): the time limit is enforced outside the traced process, traced
code that kills its guard leaves nothing running, the worker's log and status files are
bounded and checked, a generator target is an error, and without torch one line says how to
install it."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest
from paths import DATA

from pkbsim.errors import PkbsimError
from pkbsim.guard import alive
from pkbsim.limits import RANK_FILE_BYTES, TRACE_LOG_BYTES
from pkbsim.processes import LOG_TAIL_BYTES, CappedLog
from pkbsim.trace.launch import TORCH_HINT, read_status

FN = DATA / "trace" / "hostile_fn.py"


def wait_for(predicate, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


# ---------------------------------------------------------------- fast: no torch process


def test_trace_without_torch_says_how_to_install_it(cli, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # find_spec("torch") is None, as without it
    r = cli("trace", f"{FN}:gen", "--out", str(tmp_path / "t"))
    assert r.code == 2, (r.out, r.err)
    assert r.err.count("\n") == 1 and "Traceback" not in r.err
    assert "pip install torch --index-url https://download.pytorch.org/whl/cpu" in r.err
    assert TORCH_HINT.split(":")[0] in r.err
    assert not (tmp_path / "t").exists()  # nothing started


def test_the_cpu_install_is_documented() -> None:
    """README and docs/trace.md give the one command that installs the tracer with CPU torch
    (not the CUDA build pip takes from PyPI), and name the extra pyproject defines."""
    root = DATA.parents[1]
    command = "pip install torch --index-url https://download.pytorch.org/whl/cpu"
    pyproject = (root / "pyproject.toml").read_text()
    assert 'trace = ["torch>=' in pyproject
    for page in ("README.md", "docs/trace.md"):
        text = (root / page).read_text()
        assert f"{command} && pip install '.[trace]'" in text, page


def test_capped_log_keeps_its_start_and_its_end(tmp_path: Path) -> None:
    path = tmp_path / "log"
    with path.open("wb") as handle:
        log = CappedLog(handle, 200_000)
        for i in range(1000):
            log.add(b"%06d" % i + b"." * 993 + b"\n")  # 1000 lines of 1000 bytes
        log.close()
    data = path.read_bytes()
    assert len(data) < 200_000 + 200
    assert data.startswith(b"000000") and data.endswith(b"." * 993 + b"\n")
    assert b"000999" in data[-LOG_TAIL_BYTES:]  # the last line, where an error would be
    assert b"[pkbsim: 800,000 bytes of output left out here" in data
    with (tmp_path / "small").open("wb") as handle:  # under the cap: as it came
        log = CappedLog(handle, 200_000)
        log.add(b"a\n")
        log.add(b"b\n")
        log.close()
    assert (tmp_path / "small").read_bytes() == b"a\nb\n"


@pytest.mark.parametrize("content, field", [
    ("{not json", None),
    ('["a list"]', "(top level)"),
    ('{"status": "ok", "seconds": 1}', "target"),
    ('{"target": "t.f", "status": "done", "seconds": 1}', "status"),
    ('{"target": "t.f", "status": "ok"}', "seconds"),
    ('{"target": "t.f", "status": "ok", "seconds": "soon"}', "seconds"),
    ('{"target": "t.f", "status": "ok", "seconds": -1}', "seconds"),
    ('{"target": "t.f", "status": "error", "seconds": 1, "error": 3}', "error"),
    ('{"target": "other.f", "status": "ok", "seconds": 1}', "target"),
])
def test_a_malformed_status_is_one_line_naming_the_file(tmp_path: Path, content: str,
                                                        field: str | None) -> None:
    path = tmp_path / "t.f.0.json"
    path.write_text(content)
    with pytest.raises(PkbsimError) as caught:
        read_status(path, "t.f")
    line = caught.value.one_line()
    assert line.startswith(str(path)) and "\n" not in line
    if field:
        assert caught.value.field == field


def test_a_huge_status_file_is_refused_without_reading_it(tmp_path: Path) -> None:
    path = tmp_path / "t.f.0.json"
    with path.open("wb") as handle:  # sparse: a 400 MB file that costs no disk
        handle.truncate(400 * 10**6)
    with pytest.raises(PkbsimError) as caught:
        read_status(path, "t.f")
    assert str(path) in caught.value.one_line()
    assert f"over the limit of {RANK_FILE_BYTES.value:,}" in caught.value.one_line()


def test_a_status_the_worker_writes_is_read(tmp_path: Path) -> None:
    path = tmp_path / "t.f.0.json"
    assert read_status(path, "t.f") is None
    path.write_text('{"target": "t.f", "status": "running"}')
    assert read_status(path, "t.f").state == "running"  # type: ignore[union-attr]
    path.write_text('{"target": "t.f", "status": "error", "error": "ValueError:  x\\ny", '
                    '"seconds": 1.5}')
    status = read_status(path, "t.f")
    assert status is not None and (status.state, status.seconds, status.error) == (
        "error", 1.5, "ValueError: x y")


# ---------------------------------------------------------------- slow: the worker runs


needs_torch = pytest.mark.skipif(
    __import__("importlib").util.find_spec("torch") is None, reason="needs torch")


@pytest.mark.slow
@needs_torch
def test_a_target_holding_the_interpreter_lock_is_stopped_on_time(cli, tmp_path: Path) -> None:
    """sum(range(10**11)) never lets a thread of its process run: the limit is kept from the
    parent (it took 60 s more, the job's start-up allowance, with a watchdog thread)."""
    started = time.monotonic()
    r = cli("trace", f"{FN}:spin", "--timeout", "3", "--out", str(tmp_path / "t"))
    took = time.monotonic() - started
    assert r.code == 1 and "hostile_fn.spin: error" in r.out, r.out + r.err
    assert "fake tensors: ran past its time limit (3 s); real tensors not tried" in r.out
    assert took < 30, took  # start-up (torch's import) + 3 s + 2 s of grace, on a busy VM


@pytest.mark.slow
@needs_torch
def test_code_that_kills_its_guard_leaves_no_process(cli, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PKBSIM_TEST_FOLDER", str(tmp_path))
    r = cli("trace", f"{FN}:kill_guard", "--mode", "fake", "--timeout", "120",
            "--out", str(tmp_path / "t"))
    pids = json.loads((tmp_path / "pids.json").read_text())
    try:
        assert r.code == 1 and "killed by SIGKILL" in r.out, r.out + r.err
        assert wait_for(lambda: not any(alive(pid) for pid in pids.values()), 5), \
            f"left behind: {[name for name, pid in pids.items() if alive(pid)]}"
    finally:
        for pid in pids.values():
            if alive(pid):
                os.kill(pid, 9)


@pytest.mark.slow
@needs_torch
def test_a_flood_of_output_is_capped_in_the_log(cli, tmp_path: Path) -> None:
    r = cli("trace", f"{FN}:flood", "--mode", "fake", "--out", str(tmp_path))
    assert r.code == 1 and "ValueError: flooded, then failed" in r.out, r.out + r.err
    log = tmp_path / "worker_fake_1.log"
    size = log.stat().st_size
    assert TRACE_LOG_BYTES.value - LOG_TAIL_BYTES < size < TRACE_LOG_BYTES.value + 4096, size
    assert b"bytes of output left out here" in log.read_bytes()


@pytest.mark.slow
@needs_torch
def test_a_status_with_a_wrong_type_is_one_line(cli, tmp_path: Path) -> None:
    r = cli("trace", f"{FN}:bad_status", "--mode", "fake", "--out", str(tmp_path))
    assert r.code == 1, r.out + r.err
    path = tmp_path / "status" / "hostile_fn.bad_status.0.json"
    assert "hostile_fn.bad_status: error (" in r.out
    assert f"status file {path}: seconds: not a status the tracer writes" in r.out
    assert len(r.out.strip().splitlines()) == 1 and "Traceback" not in r.out + r.err


@pytest.mark.slow
@needs_torch
def test_a_generator_target_is_an_error(cli, tmp_path: Path) -> None:
    r = cli("trace", f"{FN}:gen", "--mode", "fake", "--out", str(tmp_path))
    assert r.code == 1, r.out + r.err
    assert "hostile_fn.gen is a generator function (it contains yield)" in r.out
    assert not (tmp_path / "hostile_fn.gen.json").exists()


def test_generators_and_coroutines_are_refused_before_tracing() -> None:
    worker = pytest.importorskip("pkbsim.trace.worker")  # imports torch

    def gen():  # type: ignore[no-untyped-def]
        yield 1

    async def coro():  # type: ignore[no-untyped-def]
        return 1

    async def agen():  # type: ignore[no-untyped-def]
        yield 1

    worker.runs_its_body(3, "t.f")  # a function that returned a value ran
    worker.runs_its_body(None, "t.f")
    for fn, what in ((gen, "a generator function"), (coro, "a coroutine function"),
                     (agen, "an async generator function")):
        with pytest.raises(TypeError, match=f"t.f is {what}"):
            worker.runs_its_body(fn(), "t.f")
