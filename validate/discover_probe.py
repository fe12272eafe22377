"""Capture this machine's GPU topology for `pkbsim discover` (run as a child process).

    python validate/discover_probe.py --case topology.discover --out PATH [--quick]

Runs `nvidia-smi topo -m` (with a timeout) and, where the pynvml module (package nvidia-ml-py)
imports, asks NVML for each GPU's name, memory, PCIe link and active NVLinks. Appends one line
to PATH:

    {"data": {"topo_matrix": TEXT, "nvml": {...}, "hostname": ..., "date": ...}}

Whatever NVML cannot answer is recorded under ``nvml.errors`` (or ``nvml.error`` when NVML is
absent) instead of failing. Exit code 0 when the matrix was captured, 1 otherwise. Standard
library only; it never imports pkbsim. pkbsim.validation.discover parses the line.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import socket
import subprocess
import sys
from collections.abc import Callable
from typing import Any

for _key, _value in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"),
                     ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ.setdefault(_key, _value)

TOPO_TIMEOUT_S = 60
NVLINK_MAX_LINKS = 18  # NVML_NVLINK_MAX_LINKS of current drivers; probing more is harmless


def topo_matrix(timeout_s: float) -> tuple[str | None, str | None]:
    """(the text of `nvidia-smi topo -m`, None) or (None, why it failed)."""
    try:
        run = subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True, text=True,
                             timeout=timeout_s, check=False)
    except FileNotFoundError:
        return None, "nvidia-smi not found"
    except subprocess.TimeoutExpired:
        return None, f"nvidia-smi topo -m did not finish in {timeout_s:g} s"
    except OSError as exc:
        return None, f"nvidia-smi topo -m: {exc}"
    if run.returncode != 0 or not run.stdout.strip():
        tail = " ".join((run.stderr or run.stdout).split())[-300:]
        return None, f"nvidia-smi topo -m exited {run.returncode}: {tail}"
    return run.stdout, None


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _ask(errors: dict[str, str], key: str, fn: Callable[[], Any]) -> Any:
    """``fn()``, or None with the error recorded under ``key``."""
    try:
        return fn()
    except Exception as exc:
        errors[key] = " ".join(str(exc).split())[:200] or type(exc).__name__
        return None


def _nvlinks(nvml: Any, handle: Any, errors: dict[str, str]) -> tuple[int | None, int | None]:
    """(active NVLinks, NVML's version code of the first active one); None where unknown.

    A link index the GPU lacks raises; a GPU without NVLink raises for every index.
    """
    active, version, answered, why = 0, None, False, ""
    for link in range(NVLINK_MAX_LINKS):
        try:
            state = nvml.nvmlDeviceGetNvLinkState(handle, link)
        except Exception as exc:
            why = " ".join(str(exc).split())[:200] or type(exc).__name__
            continue
        answered = True
        if state:
            active += 1
            if version is None:
                version = _ask(errors, "nvlink_version",
                               lambda link=link: int(nvml.nvmlDeviceGetNvLinkVersion(handle,
                                                                                     link)))
    if not answered:
        errors["nvlink"] = why
        return None, None
    return active, version


def _gpu(nvml: Any, index: int) -> dict[str, Any]:
    errors: dict[str, str] = {}
    handle = nvml.nvmlDeviceGetHandleByIndex(index)
    gpu: dict[str, Any] = {"index": index}
    gpu["name"] = _ask(errors, "name", lambda: _text(nvml.nvmlDeviceGetName(handle)))
    gpu["uuid"] = _ask(errors, "uuid", lambda: _text(nvml.nvmlDeviceGetUUID(handle)))
    gpu["pci_bus_id"] = _ask(errors, "pci_bus_id",
                             lambda: _text(nvml.nvmlDeviceGetPciInfo(handle).busId))
    gpu["memory_total_bytes"] = _ask(errors, "memory_total_bytes",
                                     lambda: int(nvml.nvmlDeviceGetMemoryInfo(handle).total))
    gpu["compute_capability"] = _ask(
        errors, "compute_capability",
        lambda: ".".join(str(v) for v in nvml.nvmlDeviceGetCudaComputeCapability(handle)))
    gpu["pcie_max_gen"] = _ask(errors, "pcie_max_gen",
                               lambda: int(nvml.nvmlDeviceGetMaxPcieLinkGeneration(handle)))
    gpu["pcie_max_width"] = _ask(errors, "pcie_max_width",
                                 lambda: int(nvml.nvmlDeviceGetMaxPcieLinkWidth(handle)))
    gpu["pcie_cur_gen"] = _ask(errors, "pcie_cur_gen",
                               lambda: int(nvml.nvmlDeviceGetCurrPcieLinkGeneration(handle)))
    gpu["pcie_cur_width"] = _ask(errors, "pcie_cur_width",
                                 lambda: int(nvml.nvmlDeviceGetCurrPcieLinkWidth(handle)))
    gpu["nvlink_active_links"], gpu["nvlink_version"] = _nvlinks(nvml, handle, errors)
    gpu["errors"] = errors
    return gpu


def nvml_info() -> dict[str, Any]:
    """What NVML says about each GPU; ``available`` False (and ``error``) without NVML."""
    try:
        import pynvml as nvml

        nvml.nvmlInit()
    except Exception as exc:
        return {"available": False, "error": " ".join(str(exc).split())[:200]
                or type(exc).__name__}
    errors: dict[str, str] = {}
    try:
        info: dict[str, Any] = {"available": True, "error": None}
        info["driver_version"] = _ask(errors, "driver_version",
                                      lambda: _text(nvml.nvmlSystemGetDriverVersion()))
        info["nvml_version"] = _ask(errors, "nvml_version",
                                    lambda: _text(nvml.nvmlSystemGetNVMLVersion()))
        info["cuda_driver_version"] = _ask(errors, "cuda_driver_version",
                                           lambda: int(nvml.nvmlSystemGetCudaDriverVersion()))
        count = _ask(errors, "gpu_count", lambda: int(nvml.nvmlDeviceGetCount())) or 0
        info["gpus"] = []
        for i in range(count):
            gpu = _ask(errors, f"gpus[{i}]", lambda i=i: _gpu(nvml, i))
            if gpu is not None:
                info["gpus"].append(gpu)
        info["errors"] = errors
        return info
    finally:
        with contextlib.suppress(Exception):
            nvml.nvmlShutdown()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--case", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    text, why = topo_matrix(TOPO_TIMEOUT_S)
    data: dict[str, Any] = {
        "topo_matrix": text, "nvml": nvml_info(), "hostname": socket.gethostname(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
    if why:
        data["topo_error"] = why
    with open(args.out, "a") as handle:
        handle.write(json.dumps({"data": data}) + "\n")
    if text is None:
        sys.stderr.write(f"{why}\n")
        return 1
    nvml = data["nvml"]
    said = (f"{len(nvml['gpus'])} GPU(s)" if nvml["available"]
            else f"unavailable ({nvml['error']})")
    print(f"captured nvidia-smi topo -m ({len(text.splitlines())} lines); NVML: {said}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
