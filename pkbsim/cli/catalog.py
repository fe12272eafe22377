"""``pkbsim topo`` and ``pkbsim tasks``: the shipped machines and PKB problems."""

from __future__ import annotations

from typing import Annotated

import typer

from pkbsim.cli.options import world_size_option
from pkbsim.cli.output import write_output


def topo_list() -> None:
    """Shipped topologies, one line each."""
    from pkbsim.report.catalog import topology_list
    from pkbsim.topology.loader import shipped_topologies

    write_output(topology_list(shipped_topologies()), None)


def topo_show(name: Annotated[str, typer.Argument(help="Topology name or YAML path.")]) -> None:
    """Every parameter of one topology, with units and sources."""
    from pkbsim.report.catalog import topology_detail
    from pkbsim.topology import load_topology

    write_output(topology_detail(load_topology(name)), None)


def tasks_list() -> None:
    """Shipped tasks, one line each."""
    from pkbsim.report.catalog import task_list
    from pkbsim.task.loader import shipped_tasks

    write_output(task_list(shipped_tasks()), None)


def tasks_show(
    name: Annotated[str, typer.Argument(help="Task id, name, alias or YAML path.")],
    world_size: Annotated[int | None, world_size_option(None)] = None,
    preset: Annotated[str, typer.Option()] = "pkb",
) -> None:
    """One task: parameters, presets, constraints and its ops at a world size."""
    from pkbsim.report.catalog import task_detail
    from pkbsim.task.loader import WORLD_SIZE_SCAN, instantiate, load_task, world_sizes

    spec = load_task(name)
    inst = instantiate(spec, world_size, preset)
    write_output(task_detail(spec, inst, world_sizes(spec, inst.preset), WORLD_SIZE_SCAN), None)
