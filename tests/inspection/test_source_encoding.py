"""Solution files are read as Python reads them (PEP 263): a UTF-8 byte order mark or a coding
line (latin-1) is valid source for inspect and compare; a file Python would refuse is one line
naming it, and a message never shows a line number it does not know (``line None``)."""

from __future__ import annotations

import codecs
import dataclasses
from pathlib import Path

import pytest
from paths import DATA

from pkbsim.inspection import InspectError, inspect_file

SOLUTION = DATA / "solutions" / "one_shot_cuda.py"
LATIN1 = b"# -*- coding: latin-1 -*-\n# r\xe9sum\xe9: caf\xe9\n"  # two lines, latin-1 bytes


def findings(path: Path, shift: int = 0) -> dict[str, object]:
    """What the inspector found, with evidence lines moved back by ``shift``."""
    row = inspect_file(path)
    assert row.error is None
    data = dataclasses.asdict(row)
    data.pop("file")
    data["evidence"] = {k: tuple((n - shift, text) for n, text in v)
                        for k, v in row.evidence.items()}
    data["call_sites"] = tuple((s.line - shift, s.call, s.path) for s in row.call_sites)
    return data


def test_a_byte_order_mark_reads_as_the_same_source(tmp_path: Path) -> None:
    bom = tmp_path / "bom.py"
    bom.write_bytes(codecs.BOM_UTF8 + SOLUTION.read_bytes())
    assert findings(bom) == findings(SOLUTION)
    assert findings(SOLUTION)["custom_kernels"] == 1


def test_a_latin1_coding_line_reads_as_python_does(tmp_path: Path) -> None:
    latin = tmp_path / "latin.py"
    latin.write_bytes(LATIN1 + SOLUTION.read_bytes())
    assert findings(latin, shift=2) == findings(SOLUTION)


@pytest.mark.parametrize(("data", "needle"), [
    (b"# -*- coding: klingon -*-\nx = 1\n", "unknown encoding: klingon"),
    (codecs.BOM_UTF8 + LATIN1, "byte order mark, but a coding line naming another"),
    (b"# caf\xe9\nx = 1\n", "not UTF-8, and no coding line names its encoding (PEP 263)"),
    (b"x = 1\ny = 2\n# caf\xe9\n", "no coding line names its encoding (PEP 263) (byte 17)"),
    (b"# coding: ascii\n# caf\xe9\n", "not ascii text (byte 21)"),
])
def test_source_python_would_refuse_is_one_error(tmp_path: Path, data: bytes,
                                                 needle: str) -> None:
    path = tmp_path / "bad.py"
    path.write_bytes(data)
    with pytest.raises(InspectError) as info:
        inspect_file(path)
    assert info.value.one_line().startswith(f"{path}: cannot read Python source: ")
    assert needle in info.value.message


def test_no_line_none_when_python_gives_no_line(cli, tmp_path: Path) -> None:
    path = tmp_path / "nul.py"
    path.write_bytes(b"x = '\x00'\n")
    r = cli("inspect", str(path))
    assert r.code == 2 and "line None" not in r.err, r.err
    assert r.err == f"pkbsim: error: {path}: Python syntax error: source code string cannot " \
                    "contain null bytes\n"


def test_compare_reads_the_same_files(cli, tmp_path: Path) -> None:
    for name, head in (("bom.py", codecs.BOM_UTF8), ("latin.py", LATIN1)):
        path = tmp_path / name
        path.write_bytes(head + SOLUTION.read_bytes())
        r = cli("compare", "-p", "1", "--measured-us", "40", "--solution", str(path),
                "--format", "json")
        assert r.code == 0, r.err
        assert '"solution"' in r.out
