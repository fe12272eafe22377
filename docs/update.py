"""Regenerate the generated parts of docs/: tables between markers and the overview figure.

    python docs/update.py          # rewrite them
    python docs/update.py --check  # exit 1 if any is stale (the tests run the same check)

A generated block in a Markdown file looks like

    <!-- generated: pkbsim analyze --all -w 8 --format markdown -->
    ...the command's output...
    <!-- end generated -->

and holds exactly what that pkbsim command prints; ``<!-- generated-code: pkbsim ... -->``
holds the same inside a fenced code block, for terminal tables. The figure
docs/img/overview.png is the two-panel plot of every task at preset pkb and at its production
preset (dgx-h100, W = 8 where the preset does not set it); docs/img/gantt_grpo_*.png are the
timelines of ``pkbsim simulate --task grpo`` under both strategies. docs/python.md (and
docs/img/python_sweep.png) is written whole by docs/python_session.py, a worked session with the
Python API.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import shlex
import sys
from pathlib import Path
from typing import Any

DOCS = Path(__file__).resolve().parent
BLOCK = re.compile(r"(<!-- generated(-code)?: (pkbsim [^>]*?) -->\n)(.*?)(<!-- end generated -->)",
                   re.DOTALL)
FIGURE = DOCS / "img" / "overview.png"
GANTT = {DOCS / "img" / f"gantt_grpo_{name}.png": name
         for name in ("nccl_reference", "custom_best")}


def run_pkbsim(command: str) -> str:
    """What ``pkbsim ARGS`` prints, run in this process, at the width of a pipe (not $COLUMNS)."""
    from pkbsim.cli import main

    args = shlex.split(command)[1:]
    buffer = io.StringIO()
    columns = os.environ.pop("COLUMNS", None)
    with contextlib.ExitStack() as stack:
        if columns is not None:
            stack.callback(os.environ.__setitem__, "COLUMNS", columns)
        stack.enter_context(contextlib.redirect_stdout(buffer))
        try:
            main(args)
        except SystemExit as exc:
            if exc.code:
                raise RuntimeError(f"{command!r} failed with exit code {exc.code}") from None
    return buffer.getvalue()


def regenerate(text: str) -> str:
    def fill(match: re.Match[str]) -> str:
        out = run_pkbsim(match.group(3))
        if match.group(2):  # -code: inside a fenced block
            out = "```\n$ " + match.group(3) + "\n" + out + "```\n"
        return match.group(1) + out + match.group(5)

    return BLOCK.sub(fill, text)


def markdown_files() -> list[Path]:
    return sorted(DOCS.glob("*.md"))


def stale() -> list[str]:
    names = [p.name for p in markdown_files() if regenerate(p.read_text()) != p.read_text()]
    session = python_session()
    if session.stale():
        names.append(session.PAGE.name)
    return names


def python_session() -> Any:
    """docs/python_session.py, loaded by path (this file is run as a script and loaded by the
    tests)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("python_session", DOCS / "python_session.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def overview_figure() -> bytes:
    from pkbsim.overview import load_specs, overview
    from pkbsim.report.overview_plot import overview_plot
    from pkbsim.topology import load_topology

    topo = load_topology("dgx-h100")
    specs = load_specs()
    panels = [overview(topo, 8, "pkb", specs=specs), overview(topo, None, "production",
                                                              specs=specs)]
    return overview_plot(panels, "png")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="report stale files, write none")
    args = parser.parse_args()
    if args.check:
        names = stale()
        if names:
            print("stale: " + ", ".join(names) + " (run python docs/update.py)")
            sys.exit(1)
        print("docs are up to date")
        return
    for path in markdown_files():
        text = path.read_text()
        new = regenerate(text)
        if new != text:
            path.write_text(new)
            print(f"rewrote {path.relative_to(DOCS.parent)}")
    session = python_session()
    session.write()
    print(f"wrote {session.PAGE.relative_to(DOCS.parent)} and {session.FIGURE}")
    FIGURE.parent.mkdir(exist_ok=True)
    FIGURE.write_bytes(overview_figure())
    print(f"wrote {FIGURE.relative_to(DOCS.parent)}")
    for path, strategy in GANTT.items():
        path.write_bytes(gantt(strategy))
        print(f"wrote {path.relative_to(DOCS.parent)}")


def gantt(strategy: str) -> bytes:
    from pkbsim.report.gantt import gantt_chart
    from pkbsim.sim.run import run_simulation

    return gantt_chart(run_simulation("grpo", strategy, trace=True), "png")


if __name__ == "__main__":
    main()
