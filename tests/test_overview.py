"""``pkbsim analyze --all``: every task at once, its summary, filters, formats and plot."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from paths import ROOT

from pkbsim.errors import UsageError
from pkbsim.overview import overview, parallelism_tokens, parse_filters
from pkbsim.report.overview_report import CSV_FIELDS
from pkbsim.task.loader import list_tasks
from pkbsim.topology import load_topology

MiB = 1 << 20
H100 = load_topology("dgx-h100")


@pytest.fixture(scope="module")
def pkb():
    return overview(H100, 8, "pkb")


def test_every_shipped_task_is_a_row_and_analyses_at_w8(pkb) -> None:
    assert len(pkb.rows) == len(list_tasks())
    assert [r.spec.id for r in pkb.rows] == sorted(r.spec.id for r in pkb.rows)
    assert pkb.not_analysed == [], [(r.spec.id, r.error) for r in pkb.not_analysed]
    s = pkb.summary()
    assert sum(s.bound_by.values()) == s.analysed == len(pkb.rows)
    for row in pkb.rows:
        roof = row.roofline
        assert roof is not None
        assert roof.t_roof_s == max(roof.t_comm_s, roof.t_mem_s, roof.t_comp_s,
                                    roof.t_latency_floor_s)


def test_moved_bytes_are_the_busiest_port(pkb) -> None:
    row = next(r for r in pkb.rows if r.spec.id == 1)
    assert row.moved_bytes_per_rank == 9 / 8 * 2 * MiB  # NVLS: (n+1)/n of the buffer
    assert row.buffer_bytes_per_rank == 2 * MiB
    row = next(r for r in pkb.rows if r.spec.id == 2)
    assert row.moved_bytes_per_rank == 7 * 2 * MiB  # all-gather: (n-1) shards in


@pytest.mark.parametrize(("text", "tokens"), [
    ("CPxTP", {"cp", "tp"}), ("TP<->SP", {"tp", "sp"}), ("FSDP+EP", {"fsdp", "ep"}),
    ("TP/SP", {"tp", "sp"}), ("primitive", {"primitive"}), ("EP (sub-groups)",
                                                            {"ep", "sub", "groups"}),
])
def test_parallelism_tokens(text: str, tokens: set[str]) -> None:
    assert parallelism_tokens(text) == tokens


def test_filters_select_and_combine() -> None:
    ep = overview(H100, 8, "pkb", parse_filters(["parallelism=EP"]))
    assert ep.rows and all("ep" in parallelism_tokens(r.spec.parallelism) for r in ep.rows)
    ids = overview(H100, 8, "pkb", parse_filters(["id=1-4,8"]))
    assert [r.spec.id for r in ids.rows] == [1, 2, 3, 4, 8]
    both = overview(H100, 8, "pkb", parse_filters(["id=1-16", "binding=latency"]))
    assert all(r.spec.id <= 16 and r.binding == "latency" for r in both.rows)


@pytest.mark.parametrize("item", ["parallelism", "colour=red", "binding=fast", "id=a-b"])
def test_bad_filters_are_usage_errors(item: str) -> None:
    with pytest.raises(UsageError):
        parse_filters([item])


def test_sort_by_roof_both_ways() -> None:
    up = overview(H100, 8, "pkb", sort="t_roof")
    times = [r.roofline.t_roof_s for r in up.analysed if r.roofline]
    assert times == sorted(times)
    down = overview(H100, 8, "pkb", sort="t_roof", reverse=True)
    assert down.analysed[0].spec.id == up.analysed[-1].spec.id
    with pytest.raises(UsageError, match="--sort 'speed'"):
        overview(H100, 8, "pkb", sort="speed")


def test_rows_that_cannot_run_say_why() -> None:
    ov = overview(H100, 16, "pkb")
    assert not ov.analysed
    assert all("needs 16 GPUs" in (r.error or "") or "constraint" in (r.error or "")
               for r in ov.rows)
    assert ov.summary().not_analysed == len(ov.rows)


def test_production_presets_are_larger(pkb) -> None:
    prod = overview(H100, None, "production")
    by_id = {r.spec.id: r for r in pkb.rows}
    analysed = prod.analysed
    assert len(analysed) >= 50
    for row in analysed:
        assert row.preset != "pkb"
        assert row.roofline and by_id[row.spec.id].roofline
    grown = sum(1 for r in analysed
                if r.moved_bytes_per_rank > by_id[r.spec.id].moved_bytes_per_rank)
    assert grown >= 0.8 * len(analysed)
    for row in prod.not_analysed:
        assert row.error == "no production preset"


# ------------------------------------------------------------------ the command line

def test_cli_all_table(cli) -> None:
    r = cli("analyze", "--all")
    assert r.code == 0, r.err
    assert "All tasks on dgx-h100" in r.out and "Summary:" in r.out and "Latency-bound:" in r.out
    assert " grpo" not in r.out  # names, not aliases
    assert "vocab_parallel_log_prob_topk_chunked " in r.out


def test_cli_all_json_and_csv_agree(cli, tmp_path: Path) -> None:
    r = cli("analyze", "--all", "--format", "json")
    assert r.code == 0, r.err
    data = json.loads(r.out)
    assert data["schema"] == "pkbsim.overview/1"
    assert data["summary"]["analysed"] == len(data["rows"])
    out = tmp_path / "all.csv"
    r = cli("analyze", "--all", "--format", "csv", "--out", str(out))
    assert r.code == 0 and r.out == ""
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    assert tuple(rows[0]) == CSV_FIELDS
    assert [int(x["id"]) for x in rows] == [x["id"] for x in data["rows"]]
    assert [float(x["t_roof_us"]) for x in rows] == [x["t_roof_us"] for x in data["rows"]]


def test_cli_markdown_has_one_line_per_task(cli) -> None:
    r = cli("analyze", "--all", "--format", "markdown", "--filter", "id=1-8")
    assert r.code == 0, r.err
    lines = [x for x in r.out.splitlines() if x.startswith("| ") and x[2].isdigit()]
    assert len(lines) == 8


@pytest.mark.parametrize(("suffix", "magic"), [(".png", b"\x89PNG"), (".svg", b"<?xml")])
def test_cli_plot(cli, tmp_path: Path, suffix: str, magic: bytes) -> None:
    plot = tmp_path / f"overview{suffix}"
    r = cli("analyze", "--all", "--plot", str(plot), "--format", "json")
    assert r.code == 0, r.err
    assert plot.read_bytes().startswith(magic)


def test_plot_is_deterministic(pkb) -> None:
    from pkbsim.report.overview_plot import overview_plot

    assert overview_plot([pkb], "svg") == overview_plot([pkb], "svg")


@pytest.mark.parametrize(("args", "message"), [
    (["--all", "--task", "1"], "give either --task NAME or --all"),
    (["--all", "--plot", "x.txt"], "expected a file ending in .png"),
    (["--all", "--filter", "size=1"], "unknown key 'size'"),
    (["--all", "--set", "M=4"], "only dotted topology keys"),
    (["--all", "--measured-us", "3"], "--measured-us is for one task"),
    (["--task", "1", "--format", "csv"], "works with --all"),
    (["--task", "1", "--filter", "id=1"], "--filter works with --all"),
    (["--all", "--topology", "dgx-h900"], "unknown topology"),
])
def test_cli_all_bad_input(cli, args: list[str], message: str) -> None:
    r = cli("analyze", *args)
    assert r.code == 2 and r.out == ""
    assert message in r.err and r.err.count("\n") == 1


def test_cli_failure_keeps_earlier_results(cli, tmp_path: Path) -> None:
    out = tmp_path / "all.json"
    out.write_text("earlier results")
    r = cli("analyze", "--all", "--format", "json", "--out", str(out), "--plot",
            str(tmp_path / "missing" / "p.png"))
    assert r.code == 2 and "does not exist" in r.err
    assert out.read_text() == "earlier results"


def test_cli_all_what_if_on_topology(cli) -> None:
    base = json.loads(cli("analyze", "--all", "--format", "json", "--filter", "id=2").out)
    fast = json.loads(cli("analyze", "--all", "--format", "json", "--filter", "id=2",
                          "--set", "scale_up.link_bandwidth_GBps=50").out)
    assert fast["topology_overrides"] == {"scale_up.link_bandwidth_GBps": 50}
    assert fast["rows"][0]["t_comm_us"] == pytest.approx(base["rows"][0]["t_comm_us"] / 2,
                                                         rel=1e-4)


def test_generated_docs_are_current() -> None:
    """docs/tasks.md's tables are `pkbsim analyze --all` output; python docs/update.py renews."""
    import importlib.util

    path = ROOT / "docs" / "update.py"
    spec = importlib.util.spec_from_file_location("docs_update", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    text = (path.parent / "tasks.md").read_text()
    assert text.count("<!-- generated: pkbsim analyze --all") == 2
    assert module.stale() == [], "run python docs/update.py"


def test_readme_overview_figures_are_true(cli) -> None:
    readme = (ROOT / "README.md").read_text()
    rows = cli("analyze", "--all", "--sort", "t_roof", "--reverse", "--filter",
               "parallelism=EP").out.splitlines()[3:8]
    assert "\n".join(rows) in readme
    for preset in ("pkb", "production"):
        out = cli("analyze", "--all", "--preset", preset).out
        summary = [x for x in out.splitlines() if x.startswith(("Summary:", "Latency-bound:"))]
        assert len(summary) == 2 and all(line in readme for line in summary), preset
