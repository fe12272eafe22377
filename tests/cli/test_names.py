"""Names a newcomer types (issue 30): the NVLink bandwidth's two names, each with its meaning,
one of them in the README's tour; a mistyped name answered with the closest ones."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from paths import ROOT


def test_topo_show_names_both_nvlink_bandwidths(cli: Any) -> None:
    out = cli("topo", "show", "dgx-h100").out
    assert "peer line rate 450 GB/s per GPU per direction (scale_up.bandwidth_GBps = 18 links " \
           "x scale_up.link_bandwidth_GBps 25 GB/s per link)" in out
    rows = {line.split("│")[0].strip(): line for line in out.splitlines() if "│" in line}
    assert "│ 25 " in rows["scale_up.link_bandwidth_GBps"]
    assert "per link, per direction" in rows["scale_up.link_bandwidth_GBps"]
    assert "│ 450 " in rows["scale_up.bandwidth_GBps"]
    assert "per GPU, per direction" in rows["scale_up.bandwidth_GBps"]


def test_help_names_both_nvlink_bandwidths(cli: Any) -> None:
    for command in (("analyze",), ("sweep",)):
        words = " ".join(cli(*command, "--help").out.split())
        assert "scale_up.bandwidth_GBps" in words and "scale_up.link_bandwidth_GBps" in words
        assert "per link" in words and "per GPU" in words


def test_the_readme_tour_uses_one_name_for_the_nvlink_bandwidth() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "scale_up.bandwidth_GBps" in readme and "link_bandwidth_GBps" not in readme


@pytest.mark.parametrize(("args", "suggestion"), [
    (("analyze", "--task", "1", "--set", "scale_up.link_bandwith_GBps=5"),
     "did you mean 'scale_up.link_bandwidth_GBps'"),
    (("analyze", "--task", "1", "--set", "scale_up.bandwith_GBps=900"),
     "did you mean 'scale_up.bandwidth_GBps'"),
    (("analyze", "--task", "1", "--set", "m=4096"), "did you mean 'M'?"),
    (("analyze", "--task", "1", "--preset", "prodution"), "did you mean 'production'?"),
    (("sweep", "--task", "1", "--vary", "worldsize=2,4"), "did you mean 'world_size'"),
    (("sweep", "--task", "1", "--vary", "world_size=2,4", "--metric", "t_rof"),
     "did you mean 't_roof'?"),
    (("analyze", "--task", "grpoo"), "did you mean grpo?"),
    (("topo", "show", "dgx-h10"), "did you mean dgx-h100"),
])
def test_a_mistyped_name_gets_a_suggestion(cli: Any, args: tuple[str, ...],
                                           suggestion: str) -> None:
    r = cli(*args)
    assert r.code == 2 and r.err.count("\n") == 1
    assert suggestion in r.err


def test_a_mistyped_field_in_a_topology_file_gets_a_suggestion(cli: Any, tmp_path: Path) -> None:
    data = yaml.safe_load((ROOT / "topologies" / "dgx-h100.yaml").read_text())
    data["scale_up"]["link_bandwith_GBps"] = data["scale_up"].pop("link_bandwidth_GBps")
    path = tmp_path / "typo.yaml"
    path.write_text(yaml.safe_dump(data))
    r = cli("topo", "show", str(path))
    assert r.code == 2 and r.err.count("\n") == 1
    assert "scale_up.link_bandwith_GBps: unknown field" in r.err
    assert r.err.rstrip().endswith("did you mean 'link_bandwidth_GBps'?")


def test_a_mistyped_field_in_a_task_file_gets_a_suggestion(cli: Any, tmp_path: Path) -> None:
    data = yaml.safe_load((ROOT / "tasks" / "1_allreduce.yaml").read_text())
    data["presets"]["pkb"]["descripton"] = data["presets"]["pkb"].pop("description")
    path = tmp_path / "typo.yaml"
    path.write_text(yaml.safe_dump(data))
    r = cli("tasks", "show", str(path))
    assert r.code == 2 and r.err.count("\n") == 1
    assert "presets.pkb.description: is required but missing (the file has 'descripton': a " \
           "typo?)" in r.err
