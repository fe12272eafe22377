"""docs/python.md is the output of docs/python_session.py: regenerated here (its figure in a
scratch folder) and compared with the committed page; the committed figure is a real PNG."""

from __future__ import annotations

import importlib.util
from typing import Any

from paths import ROOT

DOCS = ROOT / "docs"


def session() -> Any:
    spec = importlib.util.spec_from_file_location("python_session", DOCS / "python_session.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_page_is_what_the_session_prints() -> None:
    module = session()
    page = module.render(write_figure=False)
    assert page == (DOCS / "python.md").read_text(), "run python docs/update.py"
    for name in ("pkbsim.analyze(", "pkbsim.sweep(", "to_pandas()", "savefig(",
                 "scale_up.bandwidth_GBps", "img/python_sweep.png"):
        assert name in page


def test_the_figure_is_a_drawn_png() -> None:
    data = (ROOT / session().FIGURE).read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 10_000
