"""docs/measurements/pkb_references_h200_traced.md's table is what its command prints."""

from __future__ import annotations

import subprocess
import sys

from paths import ROOT

DOC = ROOT / "docs" / "measurements" / "pkb_references_h200_traced.md"


def test_traced_reference_table_is_current() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "pkb_references_traced.py")],
                          capture_output=True, text=True, timeout=300, check=True)
    text = DOC.read_text()
    block = text.split("<!-- begin generated -->\n", 1)[1].split("<!-- end generated -->", 1)[0]
    assert block == done.stdout
    assert "median |error| 36%" in done.stdout  # the figure docs/measurements.md quotes
