"""Nothing a user owns is lost or loosened: an output written over an existing file keeps its
mode, owner, group and links; a file that is not a sweep is never taken for one; trace leaves
other files in its status folder alone; a path the system cannot use (too long, a loop of
links, the wrong kind of file) is one error line, never a traceback."""

from __future__ import annotations

import importlib.util
import json
import os
import stat
import threading
from pathlib import Path
from typing import Any

import pytest
from paths import DATA

from pkbsim.planning.axes import parse_vary
from pkbsim.planning.evaluate import Target, parse_metrics
from pkbsim.planning.sweep import SweepSpec, run_sweep

FN = DATA / "trace" / "user_fn.py"
LINK = "scale_up.link_bandwidth_GBps"
OTHER = 65534  # nobody / nogroup: an owner and group that are not the test's


def one_line(r: Any, *needles: str) -> None:
    assert r.code == 2, (r.code, r.out[-300:], r.err[-300:])
    assert r.err.count("\n") == 1 and r.err.startswith("pkbsim: error: "), r.err
    assert "Traceback" not in r.err
    for needle in needles:
        assert needle in r.err, r.err


def owned_elsewhere(path: Path, mode: int) -> tuple[int, int, int]:
    """Give ``path`` ``mode`` and, where the test may (as root), another owner and group; its
    (mode, uid, gid) as they now are."""
    os.chmod(path, mode)
    if os.geteuid() == 0:
        os.chown(path, OTHER, OTHER)
    info = os.stat(path)
    return stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid


def metadata(path: Path) -> tuple[int, int, int]:
    info = os.stat(path)
    return stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid


# ---------------------------------------------------------------- outputs over existing files

def test_out_over_a_file_keeps_its_mode_owner_and_group(cli, tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    out.write_text("old results")
    before = owned_elsewhere(out, 0o600)
    assert cli("analyze", "-t", "grpo", "--no-predict", "--format", "json", "--out",
               str(out)).code == 0
    assert out.read_text().startswith("{") and metadata(out) == before


def test_out_over_a_hard_linked_file_writes_every_name(cli, tmp_path: Path) -> None:
    out, twin = tmp_path / "report.json", tmp_path / "twin.json"
    out.write_text("old results")
    os.link(out, twin)
    before = owned_elsewhere(out, 0o640)
    inode = os.stat(out).st_ino
    assert cli("analyze", "-t", "grpo", "--no-predict", "--format", "json", "--out",
               str(out)).code == 0
    assert os.stat(out).st_ino == inode == os.stat(twin).st_ino and os.stat(out).st_nlink == 2
    assert twin.read_text() == out.read_text() and out.read_text().startswith("{")
    assert metadata(out) == before


def test_out_through_a_symlink_keeps_its_targets_metadata(cli, tmp_path: Path) -> None:
    target, link = tmp_path / "target.json", tmp_path / "link.json"
    target.write_text("old")
    link.symlink_to(target)
    before = owned_elsewhere(target, 0o640)
    assert cli("simulate", "-t", "grpo", "--format", "json", "--out", str(link)).code == 0
    assert link.is_symlink() and target.read_text().startswith("{")
    assert metadata(target) == before  # not a new 0644 file of the test's user


def test_a_new_output_gets_the_umask_mode(cli, tmp_path: Path) -> None:
    out = tmp_path / "new.json"
    mask = os.umask(0o027)
    try:
        assert cli("analyze", "-t", "grpo", "--no-predict", "--format", "json", "--out",
                   str(out)).code == 0
    finally:
        os.umask(mask)
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o640


def test_a_resumed_sweep_file_keeps_its_mode(cli, tmp_path: Path) -> None:
    jsonl = tmp_path / "s.jsonl"
    args = ("sweep", "--task", "grpo", "--vary", "world_size=2,4", "--metric", "t_roof",
            "--jsonl", str(jsonl))
    assert cli(*args, "--jobs", "1").code == 0
    before = owned_elsewhere(jsonl, 0o600)
    jsonl.write_text("\n".join(jsonl.read_text().splitlines()[:2]) + "\n")  # one point left
    assert cli(*args, "--jobs", "2").code == 0  # resumed: the file is rewritten in order
    assert len(jsonl.read_text().splitlines()) == 3 and metadata(jsonl) == before


def test_a_file_whose_owner_cannot_be_given_is_written_in_place(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pkbsim import files

    out = tmp_path / "theirs.json"
    out.write_text("old results, longer than the new ones")
    before = owned_elsewhere(out, 0o604)
    inode = os.stat(out).st_ino

    def refuse(*args: object) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(files.os, "chown", refuse)  # as a user who is not root
    monkeypatch.setattr(files.os, "stat", _other_owner(os.stat, out))
    files.write_file(out, "new")
    monkeypatch.undo()
    assert out.read_text() == "new" and os.stat(out).st_ino == inode
    assert metadata(out) == before and sorted(p.name for p in tmp_path.iterdir()) == [
        "theirs.json"]


def _other_owner(real: Any, path: Path) -> Any:
    """``os.stat`` that shows ``path`` owned by someone other than the new temporary files."""
    def fake(p: Any, *args: Any, **kwargs: Any) -> Any:
        info = real(p, *args, **kwargs)
        if Path(p) == path:
            values = list(info)
            values[stat.ST_UID] = info.st_uid + 1
            return os.stat_result(values)
        return info
    return fake


def test_a_file_pkbsim_may_not_write_is_refused(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Its folder would let a rename replace it, but ``>`` would be refused: so is pkbsim."""
    from pkbsim import files

    out = tmp_path / "locked.json"
    out.write_text("kept")
    os.chmod(out, 0o444)
    real = os.access
    monkeypatch.setattr(files.os, "access",  # as a user who is not root
                        lambda p, mode: mode != os.W_OK and real(p, mode))
    with pytest.raises(PermissionError):
        files.write_file(out, "new")
    monkeypatch.undo()
    assert out.read_text() == "kept" and stat.S_IMODE(os.stat(out).st_mode) == 0o444
    assert [p.name for p in tmp_path.iterdir()] == ["locked.json"]


# ---------------------------------------------------------------- a sweep's --jsonl file

SWEEP = ("sweep", "--task", "grpo", "--vary", "world_size=2,4", "--metric", "t_roof,binding",
         "--jobs", "1")


@pytest.mark.parametrize("content", [
    b"my notes, one line",
    b"my notes, one line\n",
    b"\x00\x01\xfe binary without a newline \xff",
    b"\n\n\n",
    b'{"a": 1}',
    b"line one\nline two\n",
], ids=["one-line", "one-line-newline", "binary", "blank-lines", "json", "two-lines"])
def test_a_file_that_is_not_a_sweep_is_refused(cli, tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes(content)
    one_line(cli(*SWEEP, "--jsonl", str(path)), str(path), "not a pkbsim sweep", "--fresh")
    assert path.read_bytes() == content


def test_a_sweep_file_cut_off_in_its_header_resumes(cli, tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    assert cli(*SWEEP, "--jsonl", str(path)).code == 0
    whole = path.read_bytes()
    path.write_bytes(whole[:20])  # a kill while the header was written
    r = cli(*SWEEP, "--jsonl", str(path))
    assert r.code == 0, r.err
    assert path.read_bytes() == whole
    path.write_bytes(b"")  # an empty file holds nothing to lose
    assert cli(*SWEEP, "--jsonl", str(path)).code == 0 and path.read_bytes() == whole


def grpo_spec() -> SweepSpec:
    return SweepSpec(Target(task="grpo"), (parse_vary("world_size=2,4,8"),),
                     parse_metrics(["t_roof,binding"]))


@pytest.mark.parametrize(("change", "needle"), [
    (lambda row: {**row, "t_roof_us": "fast"}, 't_roof_us is "fast", not a number'),
    (lambda row: {**row, "t_roof_us": True}, "t_roof_us is true, not a number"),
    (lambda row: {**row, "t_roof_us": -1.0}, "t_roof_us is negative"),
    (lambda row: {**row, "binding": 3}, "binding is 3, not text"),
    (lambda row: {k: v for k, v in row.items() if k != "binding"}, "no 'binding'"),
    (lambda row: {**row, "injected": "<script>"}, "unexpected field 'injected'"),
    (lambda row: {"world_size": row["world_size"], "error": 5}, "error is 5, not text"),
], ids=["text", "bool", "negative", "binding", "missing", "extra", "error"])
def test_a_tampered_row_is_refused_with_its_line(tmp_path: Path, change: Any,
                                                 needle: str) -> None:
    from pkbsim.errors import UsageError

    path = tmp_path / "t.jsonl"
    run_sweep(grpo_spec(), path, jobs=1)
    rows = path.read_text().splitlines()
    rows[2] = json.dumps(change(json.loads(rows[2])))
    path.write_text("\n".join(rows) + "\n")
    with pytest.raises(UsageError) as info:
        run_sweep(grpo_spec(), path, jobs=1)
    assert info.value.one_line().startswith(f"{path}: line 3: ")
    assert needle in info.value.one_line()


def test_a_repeated_or_bad_last_row_is_refused(tmp_path: Path) -> None:
    from pkbsim.errors import UsageError

    path = tmp_path / "t.jsonl"
    run_sweep(grpo_spec(), path, jobs=1)
    rows = path.read_text().splitlines()
    path.write_text("\n".join([*rows[:3], rows[2]]) + "\n")
    with pytest.raises(UsageError, match=r"line 4: .* a second row of one point"):
        run_sweep(grpo_spec(), path, jobs=1)
    path.write_text("\n".join([*rows[:3], "not json"]) + "\n")  # a whole line: not a kill's
    with pytest.raises(UsageError, match=r"line 4: not JSON"):
        run_sweep(grpo_spec(), path, jobs=1)
    path.write_text("\n".join([*rows[:3], '{"world_size": 8, "t_ro']))  # a kill's: dropped
    assert run_sweep(grpo_spec(), path, jobs=1).counts.resumed == 2


# ---------------------------------------------------------------- trace's status folder

def test_trace_leaves_status_files_it_did_not_write(cli, tmp_path: Path) -> None:
    pytest.importorskip("torch")
    status = tmp_path / "status"
    status.mkdir()
    mine = {"mine.json": "my notes", "other_target.0.json": '{"target": "other_target"}',
            "user_fn.crash.json": "not a rank's"}
    for name, text in mine.items():
        (status / name).write_text(text)
    (status / "user_fn.crash.3.json").write_text('{"target": "user_fn.crash", "status": "ok"}')
    r = cli("trace", f"{FN}:crash", "--mode", "fake", "--out", str(tmp_path))
    assert r.code == 1 and "this candidate is broken" in r.out  # the old status was removed
    for name, text in mine.items():
        assert (status / name).read_text() == text
    assert not (status / "user_fn.crash.3.json").exists()


# ---------------------------------------------------------------- paths the system refuses

LONG = "/tmp/" + "a" * 100_000


@pytest.fixture
def places(tmp_path: Path) -> dict[str, str]:
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    regular = tmp_path / "regular"
    regular.write_text("x")
    return {"tmp": str(tmp_path), "regular": str(regular), "loop": str(loop)}


PATH_OPTIONS = [
    ["analyze", "-t", "grpo", "--out", "{p}"],
    ["analyze", "--all", "--plot", "{p}.png"],
    ["analyze", "-t", "{p}"],
    ["analyze", "-t", "grpo", "--topology", "{p}"],
    ["simulate", "-t", "grpo", "--out", "{p}"],
    ["simulate", "-t", "grpo", "--trace", "{p}"],
    ["simulate", "-t", "grpo", "--gantt", "{p}.png"],
    ["simulate", "-t", "grpo", "--trace-file", "{p}"],
    ["simulate", "-t", "grpo", "--strategy", "{p}"],
    ["compare", "--measured", "{p}"],
    ["compare", "-p", "grpo", "--measured-us", "100", "--solution", "{p}"],
    ["compare", "-p", "grpo", "--measured-us", "100", "--solutions", "{p}"],
    ["compare", "-p", "grpo", "--measured-us", "100", "--out", "{p}"],
    ["compare", "-p", "grpo", "--measured-us", "100", "--plot", "{p}.png"],
    ["sweep", "--collective", "all_reduce", "--sizes", "1KiB", "--jobs", "1", "--jsonl", "{p}"],
    ["sweep", "--collective", "all_reduce", "--sizes", "1KiB", "--jobs", "1", "--out", "{p}"],
    ["inspect", "{p}"],
    ["inspect", str(DATA / "solutions"), "--run-log", "{p}"],
    ["calibrate", "{p}", "--out", "{tmp}/c.yaml"],
    ["calibrate", str(DATA / "validation"), "--out", "{p}"],
    ["discover", "--from", "{p}"],
    ["validate", "--report", "{p}"],
    ["run", "--pkb-root", "{p}", "--solution", "{regular}", "--out", "{tmp}", "--problem", "1"],
    ["run", "--pkb-root", str(DATA / "pkb_tiny"), "--solution", "{p}", "--out", "{tmp}",
     "--problem", "1", "--device", "cpu"],
    ["run", "--pkb-root", str(DATA / "pkb_tiny"), "--solution", "{regular}", "--out", "{p}",
     "--problem", "1", "--device", "cpu"],
    ["trace", "--out", "{p}", f"{FN}:step"],
    ["trace", "{p}.py:step"],
    ["trace", "--pkb-root", "{p}", "--task", "1"],
    ["trace", f"{FN}:step", "--task", "1", "--programs", "{p}", "--out", "{tmp}/t"],
    ["topo", "show", "{p}"],
    ["tasks", "show", "{p}"],
    ["plan", "threshold", "--collective", "all_reduce", "--out", "{p}"],
]


@pytest.mark.parametrize("args", PATH_OPTIONS, ids=lambda a: " ".join(a[:1] + [
    x for x in a if x.startswith("-") or "{p}" in x][:3]))
def test_a_path_too_long_is_one_error(cli, places: dict[str, str], args: list[str]) -> None:
    if args[0] in ("run", "trace") and importlib.util.find_spec("torch") is None:
        # without torch these commands may stop first at "torch is not installed" (one line)
        pytest.skip("pkbsim run / trace need torch (the README's test command installs none)")
    r = cli(*(a.format(p=LONG, **places) for a in args))
    one_line(r, "aaaaaaaa...aaaa", "characters")
    assert "too long" in r.err.lower()


@pytest.mark.parametrize("option", ["--out", "--trace", "--jsonl"])
def test_a_symlink_loop_is_one_error(cli, places: dict[str, str], option: str) -> None:
    command = ["sweep", "--collective", "all_reduce", "--sizes", "1KiB", "--jobs", "1"] \
        if option == "--jsonl" else ["simulate", "-t", "grpo"]
    one_line(cli(*command, option, places["loop"]), option, places["loop"],
             "symbolic links")


@pytest.mark.parametrize("kind", ["regular", "fifo", "device", "under-a-file"])
def test_trace_out_must_be_a_folder(cli, tmp_path: Path, kind: str) -> None:
    path = {"regular": tmp_path / "file", "fifo": tmp_path / "fifo",
            "device": Path("/dev/null"), "under-a-file": tmp_path / "file" / "sub"}[kind]
    (tmp_path / "file").write_text("kept")
    if kind == "fifo":
        os.mkfifo(path)
    r = cli("trace", "--out", str(path), f"{FN}:step")
    one_line(r, f"--out {path}", "not a folder")
    assert (tmp_path / "file").read_text() == "kept"


def test_compare_measured_fifo_is_not_called_missing(cli, tmp_path: Path) -> None:
    fifo = tmp_path / "logs"
    os.mkfifo(fifo)
    done = threading.Event()
    result: list[Any] = []
    thread = threading.Thread(target=lambda: (result.append(cli("compare", "--measured",
                                                                str(fifo))), done.set()),
                              daemon=True)
    thread.start()
    if not done.wait(20):
        with open(fifo, "wb"):
            pass
        pytest.fail("pkbsim blocked on a FIFO")
    one_line(result[0], str(fifo), "not a regular file or a folder")
    assert "no such" not in result[0].err


def test_a_topology_name_too_long_for_a_file_is_unknown() -> None:
    """Found by the API fuzz: a 400-character name looked up among the shipped topologies
    raised OSError (file name too long) from Path.is_file."""
    from pkbsim.errors import TopologyError
    from pkbsim.topology.loader import load_topology

    with pytest.raises(TopologyError, match="unknown topology"):
        load_topology("9" * 400)
