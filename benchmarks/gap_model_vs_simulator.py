"""How close the gap decomposition's closed-form model of PKB's reference comes to the simulator.

For every shipped task at PKB's size (its default world size) on one topology, the modelled
time of ``reference_inspection`` (``Gap.modeled_us``) against the simulator's ``nccl_reference``
prediction (``Gap.predicted_nccl_reference_us``), both on the one reference model
``reference_model`` chooses (the traced program, else the task file's ops). Prints the ratio's
min, median and max, per model and overall, and the extremes.
Usage: python benchmarks/gap_model_vs_simulator.py [--topology dgx-h100]
"""

from __future__ import annotations

import argparse
import statistics

from pkbsim.comparator.gap import decompose, reference_inspection
from pkbsim.comparator.reference import reference_model
from pkbsim.datafiles import data_dir
from pkbsim.task.loader import instantiate, load_task
from pkbsim.topology import load_topology


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--topology", default="dgx-h100")
    args = parser.parse_args()
    topo = load_topology(args.topology)
    ratios: dict[str, float] = {}
    sources: dict[str, str] = {}
    for path in sorted(data_dir("tasks").glob("*.yaml")):
        spec = load_task(str(path))
        inst = instantiate(spec, None, "pkb")
        if inst.world_size > topo.total_gpus:
            continue
        ref = reference_model(inst)
        probe = decompose(inst, topo, 1.0, reference_inspection(inst, ref),
                          simulate_fixes=False, reference=ref)
        ratios[path.stem] = probe.modeled_us / probe.predicted_nccl_reference_us
        sources[path.stem] = ref.source

    def line(label: str, values: list[float]) -> str:
        values = sorted(values)
        return (f"{len(values)} tasks {label}: min {values[0]:.2f}, median "
                f"{statistics.median(values):.2f}, max {values[-1]:.2f}")

    print(f"modelled / simulated nccl_reference on {topo.name}")
    print("  " + line("in all", list(ratios.values())))
    for source in sorted(set(sources.values())):
        print("  " + line(f"on the {source} model",
                          [r for s, r in ratios.items() if sources[s] == source]))
    for stem, r in sorted(ratios.items(), key=lambda kv: kv[1])[:3]:
        print(f"  lowest  {stem}: {r:.2f} ({sources[stem]})")
    for stem, r in sorted(ratios.items(), key=lambda kv: kv[1])[-3:]:
        print(f"  highest {stem}: {r:.2f} ({sources[stem]})")


if __name__ == "__main__":
    main()
