"""The H200's PKB references of 2026-12-03 as the `pkb.references` case of its validation run.

    python docs/measurements/pkb_references_h200_sizes/to_results.py

On 2026-12-06 no H200 could be had for the `pkb.references` case (the H100 ran it:
docs/measurements/h100/). The same measurement had been made on the H200 three days before with
the same harness (validate/pkb_references.py: each problem in a fresh process, PKB's inputs,
500 warm-up and 100 timed calls, PKB's mean; the host's issue time of 10 calls): the summaries
beside this file, at --m 1024 and 4096. A second repetition exists at --m 1024 for 22 problems,
timed hours earlier in fresh processes (docs/measurements/pkb_references_h200_w1/fresh/logs,
PKB's wall_time_ms, no issue time). This script writes them as `pkb_reference` measurements
(rep 0 and rep 1) into docs/measurements/h200/results.json, replacing its `pkb.references` case
and nothing else, so that `pkbsim calibrate` learns the H200's host costs from them.
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
MEASURED = HERE.parent
RESULTS = MEASURED / "h200" / "results.json"
FRESH = MEASURED / "pkb_references_h200_w1" / "fresh" / "logs"
SUMMARIES = ("summary_odd_first.json", "summary_odd.json", "summary_even.json")


def row(problem: str, rows: int, cols: int, rep: int, mean_us: float, tensor_bytes: int,
        **params: float) -> dict[str, object]:
    return {"op": "pkb_reference", "size_bytes": tensor_bytes, "time_us": mean_us,
            "bandwidth_GBps": tensor_bytes / (mean_us * 1e-6) / 1e9, "repeats": 1,
            "min_us": mean_us, "max_us": mean_us,
            "params": {"problem": problem, "rows": rows, "cols": cols, "rep": rep, **params}}


def main() -> None:
    measurements = []
    for name in SUMMARIES:
        for r in json.loads((HERE / name).read_text())["problems"]:
            if r.get("status") != "ok" or not r.get("mean_us"):
                continue
            extra = {k: r[k] for k in ("median_us", "p25_us", "p75_us", "host_issue_us",
                                       "gpu_busy_us") if isinstance(r.get(k), (int, float))}
            measurements.append(row(r["problem"], r["rows"], r["cols"], 0, r["mean_us"],
                                    r["rows"] * r["cols"] * 2, **extra))
    for perf in sorted(FRESH.glob("problem_*/reference/rank_0_perf.json")):
        problem = perf.parts[-3].removeprefix("problem_")
        data = json.loads(perf.read_text())
        measurements.append(row(problem, 1024, 1024, 1, data["wall_time_ms"] * 1e3,
                                int(data["timed_tensor_bytes"])))
    results = json.loads(RESULTS.read_text())
    case = {"key": "pkb.references", "description": "PKB's references at one rank, a fresh "
            "process each, timed by PKB's harness at --m 1024 and 4096 (2026-12-03, "
            "validate/pkb_references.py; imported by "
            "docs/measurements/pkb_references_h200_sizes/to_results.py)", "gpus": 1,
            "status": "ok", "measurements": measurements, "error": None, "elapsed_s": 0.0,
            "command": [], "data": {"source": "docs/measurements/pkb_references_h200_sizes "
                                              "and pkb_references_h200_w1/fresh (2026-12-03)"}}
    cases = [c for c in results["cases"] if c["key"] != "pkb.references"]
    at = next((i + 1 for i, c in enumerate(cases) if c["key"] == "host.copy"), len(cases))
    results["cases"] = [*cases[:at], case, *cases[at:]]
    RESULTS.write_text(json.dumps(results, indent=1) + "\n")
    print(f"{RESULTS}: pkb.references with {len(measurements)} measurements")


if __name__ == "__main__":
    main()
