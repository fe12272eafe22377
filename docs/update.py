"""Regenerate the generated parts of docs/: tables between markers and the overview figure.

    python docs/update.py          # rewrite them
    python docs/update.py --check  # exit 1 if any is stale (the tests run the same check)

A generated block in a Markdown file looks like

    <!-- generated: pkbsim analyze --all -w 8 --format markdown -->
    ...the command's output...
    <!-- end generated -->

and holds exactly what that pkbsim command prints. The figure docs/img/overview.png is the
two-panel plot of every task at preset pkb and at its production preset (dgx-h100, W = 8 where
the preset does not set it).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import shlex
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
BLOCK = re.compile(r"(<!-- generated: (pkbsim [^>]*?) -->\n)(.*?)(<!-- end generated -->)",
                   re.DOTALL)
FIGURE = DOCS / "img" / "overview.png"


def run_pkbsim(command: str) -> str:
    """What ``pkbsim ARGS`` prints, run in this process."""
    from pkbsim.cli import main

    args = shlex.split(command)[1:]
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        try:
            main(args)
        except SystemExit as exc:
            if exc.code:
                raise RuntimeError(f"{command!r} failed with exit code {exc.code}") from None
    return buffer.getvalue()


def regenerate(text: str) -> str:
    def fill(match: re.Match[str]) -> str:
        return match.group(1) + run_pkbsim(match.group(2)) + match.group(4)

    return BLOCK.sub(fill, text)


def markdown_files() -> list[Path]:
    return sorted(DOCS.glob("*.md"))


def stale() -> list[str]:
    return [p.name for p in markdown_files() if regenerate(p.read_text()) != p.read_text()]


def overview_figure() -> bytes:
    from pkbsim.overview import load_specs, overview
    from pkbsim.report.plot import overview_plot
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
    FIGURE.parent.mkdir(exist_ok=True)
    FIGURE.write_bytes(overview_figure())
    print(f"wrote {FIGURE.relative_to(DOCS.parent)}")


if __name__ == "__main__":
    main()
