"""Where the shipped ``topologies/`` and ``tasks/`` folders are.

From a source checkout or an editable install they sit at the repository root; a wheel carries
them as ``pkbsim/_data/``.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def data_dir(kind: str) -> Path:
    """``kind`` is ``'topologies'``, ``'tasks'`` or ``'validate'`` (the GPU scripts)."""
    installed = _PACKAGE / "_data" / kind
    if installed.is_dir():
        return installed
    return _PACKAGE.parent / kind


def looks_like_path(name: str) -> bool:
    return "/" in name or "\\" in name or name.endswith((".yaml", ".yml"))


def nearest(name: str, candidates: list[str], n: int = 3) -> list[str]:
    return difflib.get_close_matches(name, candidates, n=n, cutoff=0.5)


def display_path(path: str) -> str:
    """Shipped files as ``tasks/NAME.yaml``; users' files as given."""
    p = Path(path).resolve()
    for kind in ("topologies", "tasks"):
        root = data_dir(kind).resolve()
        if p.parent == root:
            return f"{kind}/{p.name}"
    return path


def validate_dir() -> Path:
    """The GPU scripts: $PKBSIM_VALIDATE_DIR, else validate/ of the checkout or the wheel."""
    override = os.environ.get("PKBSIM_VALIDATE_DIR")
    return Path(override) if override else data_dir("validate")
