"""The disk a tracer install takes: the installed files of pkbsim's dependencies, torch (the
``trace`` extra) and pip, each distribution's files as its RECORD lists them, in the
environment this runs in. Prints figures; asserts nothing (docs/trace.md quotes them).

With the CPU build of torch (``pip install torch --index-url
https://download.pytorch.org/whl/cpu && pip install '.[trace]'``) it measures the install the
README gives; PyPI's default torch on Linux is the CUDA build, whose nvidia-* wheels add
gigabytes.

Run: python benchmarks/trace_install_size.py
"""

from __future__ import annotations

import contextlib
import re
from importlib import metadata

from packaging.requirements import Requirement

ROOTS = ("numpy", "scipy", "simpy", "typer", "rich", "matplotlib", "PyYAML", "torch", "pip")


def closure(names: tuple[str, ...]) -> dict[str, metadata.Distribution]:
    """Every distribution ``names`` need, installed here (by normalised name)."""
    found: dict[str, metadata.Distribution] = {}
    todo = list(names)
    while todo:
        name = todo.pop()
        key = re.sub(r"[-_.]+", "-", name).lower()
        if key in found:
            continue
        try:
            found[key] = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            print(f"not installed: {name}")
            continue
        for text in found[key].requires or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return found


def installed_bytes(dist: metadata.Distribution) -> int:
    total = 0
    for file in dist.files or []:
        with contextlib.suppress(OSError):  # listed, not installed (a .pyc)
            total += file.locate().stat().st_size  # type: ignore[attr-defined]
    return total


def main() -> None:
    sizes = sorted(((installed_bytes(d), k, d.version) for k, d in closure(ROOTS).items()),
                   reverse=True)
    for size, name, version in sizes[:8]:
        print(f"{size / 1e6:8.1f} MB  {name} {version}")
    print(f"{len(sizes)} distributions, {sum(s for s, _, _ in sizes) / 1e9:.2f} GB (1e9 B)")


if __name__ == "__main__":
    main()
