"""``pkbsim discover``: this machine's (or a captured) topology as a topology file.

Without ``--from`` the probe runs in a child process (pkbsim.validation.capture); with it, a
results.json, the probe's lines or a saved `nvidia-smi topo -m` are read back;
pkbsim.validation.discover builds the topology.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pkbsim.cli.output import check_writable, write_output


def discover(
    out: Annotated[Path | None, typer.Option(
        help="Topology file to write (default: print it).")] = None,
    from_: Annotated[Path | None, typer.Option(
        "--from", help="Parse captured output instead of asking this machine: a results.json "
                       "with a topology.discover case, or a saved `nvidia-smi topo -m`.")]
        = None,
    base: Annotated[str | None, typer.Option(
        help="Topology whose per-GPU numbers are reused (default: chosen by GPU name).")]
        = None,
    name: Annotated[str | None, typer.Option(help="Name of the new topology.")] = None,
) -> None:
    """Read this machine's GPUs and links (pynvml, `nvidia-smi topo -m`) into a topology file."""
    from pkbsim.validation.capture import read_capture, run_probe
    from pkbsim.validation.discover import (
        build_topology,
        parse_nvml,
        parse_topo_matrix,
        render_yaml,
    )

    if out is not None:
        check_writable(out, "--out")
    capture = read_capture(from_) if from_ is not None else run_probe()
    matrix = parse_topo_matrix(capture.topo_text, capture.file)
    found = build_topology(matrix, parse_nvml(capture.nvml, capture.file), host=capture.host,
                           date=capture.date, base=base, name=name or _default_name(out, from_))
    write_output(render_yaml(found), out)
    if out is not None:
        up = found.data["scale_up"]
        write_output(f"wrote {out}: {found.data['node']['gpus']} x "
                     f"{found.data['gpu']['model']}, {up['fabric']} fabric"
                     + (f" ({up['links_per_gpu']} NVLinks per GPU)"
                        if up["fabric"] == "nvswitch" else "")
                     + f", base {found.base}; {len(found.notes)} note(s) in its header\n", None)


def _default_name(out: Path | None, from_: Path | None) -> str | None:
    """The --out file's stem, else discovered-<captured file's stem> (else by host)."""
    if out is not None:
        return out.expanduser().stem
    return f"discovered-{from_.stem}" if from_ is not None else None
