"""Work without bounds, inputs that are not regular files, outputs that are not regular files,
and untrusted text in terminal tables."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from paths import ROOT

from pkbsim.pkb.runner import RankTime, RunResult, VariantResult, find_problem
from pkbsim.report.run_report import result_table
from pkbsim.report.text import to_text

GRPO = ROOT / "tasks" / "83_vocab_parallel_log_prob_topk_chunked.yaml"
TINY = ROOT / "tests" / "data" / "pkb_tiny"


def one_line(r: Any, *needles: str) -> None:
    assert r.code == 2, (r.code, r.out[-300:], r.err[-300:])
    assert r.err.count("\n") == 1 and r.err.startswith("pkbsim: error: "), r.err
    for needle in needles:
        assert needle in r.err, r.err


# ---------------------------------------------------------------- work

def test_a_simulation_over_its_node_limit_is_refused_up_front(cli, tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(GRPO.read_text().replace("repeat: n_chunks", "repeat: 5000000", 1))
    one_line(cli("simulate", "--task", str(path)), "2,000,000 timed nodes",
             "PKBSIM_MAX_SIM_NODES")
    assert cli("analyze", "--task", str(path), "--no-predict").code == 0  # the roofline is fine


def test_a_limit_is_raised_by_its_variable(cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PKBSIM_MAX_SIM_NODES", "10")
    one_line(cli("simulate", "--task", "grpo"), "limit of 10 timed nodes")
    monkeypatch.setenv("PKBSIM_MAX_SIM_NODES", "lots")
    one_line(cli("simulate", "--task", "grpo"), "PKBSIM_MAX_SIM_NODES='lots'")
    monkeypatch.setenv("PKBSIM_MAX_SIM_FLOWS", "3")
    monkeypatch.delenv("PKBSIM_MAX_SIM_NODES")
    one_line(cli("simulate", "--task", "grpo"), "limit of 3 transfers", "PKBSIM_MAX_SIM_FLOWS")


@pytest.mark.parametrize(("sizes", "needle"), [
    ("1:1TiB:+1", "1,099,511,627,776 is over the limit of 100,000 values"),
    ("1KiB:1GiB:x1.0000001", "over the limit of 100,000 values"),
])
def test_sweep_ranges_are_counted_before_they_are_made(cli, sizes: str, needle: str) -> None:
    one_line(cli("sweep", "--collective", "all_reduce", "--sizes", sizes, "--jobs", "1"), needle)


def test_sweep_points_are_bounded(cli) -> None:
    one_line(cli("sweep", "--collective", "all_reduce", "--sizes", "1:60000:+1", "--vary",
                 "world_size=2,4,8", "--jobs", "1"), "180,000 is over the limit",
             "PKBSIM_MAX_SWEEP_POINTS")


def test_inspecting_a_large_file_is_refused(cli, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "big.py"
    path.write_text("x = 1\n" * 1000)
    monkeypatch.setenv("PKBSIM_MAX_SOURCE_BYTES", "4096")
    one_line(cli("inspect", str(path)), str(path), "6,000 is over the limit of 4,096 bytes",
             "PKBSIM_MAX_SOURCE_BYTES")


def test_deeply_nested_python_is_an_error_not_a_crash(cli, tmp_path: Path) -> None:
    path = tmp_path / "deep.py"
    path.write_text("x = " + "(" * 200_000 + ")" * 200_000 + "\n")
    one_line(cli("inspect", str(path)), str(path))


# ---------------------------------------------------------------- files read

@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pipe.yaml"
    os.mkfifo(path)
    return path


@pytest.mark.parametrize("args", [
    ["analyze", "--task", "{fifo}"],
    ["analyze", "--task", "grpo", "--topology", "{fifo}"],
    ["calibrate", "{fifo}", "--out", "{tmp}/c.yaml"],
    ["compare", "--measured", "{fifo}"],
    ["inspect", "{fifo}"],
    ["simulate", "--task", "grpo", "--strategy", "{fifo}"],
    ["discover", "--from", "{fifo}"],
])
def test_a_fifo_is_never_opened(cli, fifo: Path, tmp_path: Path, args: list[str]) -> None:
    """Reading a FIFO blocks until a writer comes: it is refused by its type, at once."""
    done = threading.Event()
    result: list[Any] = []

    def run() -> None:
        result.append(cli(*(a.format(fifo=fifo, tmp=tmp_path) for a in args)))
        done.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    if not done.wait(20):
        with open(fifo, "wb"):  # release the reader so the thread ends, then fail
            pass
        pytest.fail("pkbsim blocked on a FIFO")
    one_line(result[0], str(fifo))


# ---------------------------------------------------------------- files written

def test_out_through_a_symlink_writes_its_target(cli, tmp_path: Path) -> None:
    target = tmp_path / "target.json"
    target.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    assert cli("analyze", "-t", "grpo", "--format", "json", "--out", str(link)).code == 0
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text().startswith("{")
    dangling = tmp_path / "dangling.json"
    dangling.symlink_to(tmp_path / "new.json")
    assert cli("analyze", "-t", "grpo", "--format", "json", "--out", str(dangling)).code == 0
    assert dangling.is_symlink() and (tmp_path / "new.json").read_text().startswith("{")


def test_a_device_is_written_through_never_replaced(cli) -> None:
    r = cli("analyze", "-t", "grpo", "--out", "/dev/full")
    one_line(r, "/dev/full", "No space left on device")
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)
    assert cli("analyze", "-t", "grpo", "--out", "/dev/null").code == 0
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_dash_and_dev_stdout_print(cli) -> None:
    dash = cli("analyze", "-t", "grpo", "--format", "json", "--out", "-")
    assert dash.code == 0 and dash.out.startswith("{")
    assert os.path.islink("/dev/stdout")
    cli("analyze", "-t", "grpo", "--out", "/dev/stdout")
    assert os.path.islink("/dev/stdout")  # the system's link is still a link


def test_out_into_a_fifo_streams(cli, tmp_path: Path) -> None:
    pipe = tmp_path / "out.fifo"
    os.mkfifo(pipe)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(pipe.read_bytes()), daemon=True)
    reader.start()
    r = cli("analyze", "-t", "grpo", "--format", "json", "--out", str(pipe))
    reader.join(20)
    assert r.code == 0 and got and got[0].startswith(b"{")
    assert stat.S_ISFIFO(os.stat(pipe).st_mode)


def test_a_sweep_stream_must_be_a_file(cli, tmp_path: Path) -> None:
    one_line(cli("sweep", "--collective", "all_reduce", "--sizes", "1KiB:4KiB:x2", "--jsonl",
                 "/dev/null", "--jobs", "1"), "--jsonl /dev/null", "not a regular file")
    one_line(cli("sweep", "--collective", "all_reduce", "--sizes", "1KiB:4KiB:x2", "--jsonl",
                 "-", "--jobs", "1"), "--jsonl -")


def test_a_failed_command_keeps_the_output_it_would_replace(cli, tmp_path: Path) -> None:
    out = tmp_path / "kept.json"
    out.write_text("earlier results")
    one_line(cli("analyze", "-t", "grpo", "--set", "M=nan", "--format", "json", "--out",
                 str(out)))
    assert out.read_text() == "earlier results"


# ---------------------------------------------------------------- untrusted text

def test_markup_in_untrusted_text_prints_as_it_is(tmp_path: Path) -> None:
    problem = find_problem(TINY, "1")

    def variant(status: str, error: str | None) -> VariantResult:
        ranks = (RankTime(0, 10.0, 0.1, 9.0, 11.0),) if status == "ok" else ()
        return VariantResult("cuda", status, error, 2, ranks, 1.0, tmp_path, tmp_path / "c.log",
                             ())

    gloo = ("rank 1: RuntimeError: [/opt/gloo/transport/tcp/pair.cc:534] Connection closed by "
            "peer [127.0.0.1]:5678 [bold]x[/bold] :smile:")
    text = result_table(RunResult(problem, variant("ok", None), variant("crash", gloo)), "cpu")
    for piece in ("[/opt/gloo/transport/tcp/pair.cc:534]", "[127.0.0.1]:5678", "[bold]x[/bold]",
                  ":smile:"):
        assert piece in text.replace("\n", "").replace(" ", "") or piece in text
    assert to_text("[red]not red[/red] [/closing]") == "[red]not red[/red] [/closing]\n"


def test_a_solution_file_named_like_markup(cli, tmp_path: Path) -> None:
    folder = tmp_path / "[bold]sols"
    folder.mkdir()
    (folder / "a[red]b.py").write_text("def solution(x):\n    return x\n")
    (folder / "c.py").write_text("def solution(x):\n    return x\n")
    r = cli("inspect", str(folder))
    assert r.code == 0 and "a[red]b.py" in r.out
    r = cli("inspect", str(folder / "a[red]b.py"))
    assert r.code == 0 and "[bold]sols" in r.out


def test_limits_lists_every_range_and_bound(cli, monkeypatch: pytest.MonkeyPatch) -> None:
    from pkbsim.bounds import QUANTITIES
    from pkbsim.limits import LIMITS

    monkeypatch.setenv("PKBSIM_MAX_SWEEP_POINTS", "123")
    r = cli("limits")
    assert r.code == 0
    for name in (*QUANTITIES, *(lim.env for lim in LIMITS)):
        assert name in r.out
    row = next(line for line in r.out.splitlines() if line.startswith("sweep_points"))
    assert "100,000" in row and "123" in row  # default and the value in force
    md = cli("limits", "--format", "markdown")
    assert md.code == 0 and "| sweep_points | 100,000 | PKBSIM_MAX_SWEEP_POINTS |" in md.out


def test_a_folder_or_an_unreadable_path_is_one_error(tmp_path: Path) -> None:
    from pkbsim.errors import UsageError
    from pkbsim.inputs import read_bytes

    with pytest.raises(UsageError, match="is a folder"):
        read_bytes(tmp_path)
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "f.json").write_text("{}")
    with pytest.raises(UsageError, match=r"cannot read"):
        read_bytes(locked / "f.json" / "x")


def test_bytes_to_dash_go_to_stdout(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "pkbsim", "simulate", "-t", "grpo", "--gantt",
                           "-", "--out", str(tmp_path / "t.txt")], capture_output=True,
                          cwd=ROOT, timeout=120, check=False)
    assert done.returncode == 0 and done.stdout.startswith(b"\x89PNG"), done.stderr


def test_a_failed_atomic_write_leaves_no_temporary_file(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from pkbsim import files

    target = tmp_path / "out.json"
    target.write_text("kept")

    def refuse(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(files.os, "replace", refuse)
    with pytest.raises(OSError):
        files.write_atomic(target, "new")
    assert target.read_text() == "kept" and [p.name for p in tmp_path.iterdir()] == ["out.json"]
