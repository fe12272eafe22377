"""Print this machine's GPUs and software as one JSON object (run as a child process).

    python validate/environment.py

Keys: gpu_name, gpu_count, driver, cuda, nccl, torch, cupy, python, hostname, date (ISO 8601,
UTC), cpu, cpu_count. Works without torch, without a GPU and without nvidia-smi (gpu_count 0
then). GPUs come from torch where it sees CUDA, else from `nvidia-smi`, else from pynvml; the
driver version from nvidia-smi or pynvml.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import platform
import socket
import subprocess
import sys
from typing import Any


def _torch(env: dict[str, Any]) -> None:
    try:
        import torch
    except Exception:
        return
    env["torch"] = torch.__version__
    env["cuda"] = torch.version.cuda
    try:
        if torch.cuda.is_available():
            env["gpu_count"] = torch.cuda.device_count()
            env["gpu_name"] = torch.cuda.get_device_name(0)
            env["nccl"] = ".".join(str(v) for v in torch.cuda.nccl.version())
    except Exception as exc:  # a broken driver: report it, keep going
        env["torch_cuda_error"] = " ".join(str(exc).split())[:200]


def _nvidia_smi(env: dict[str, Any]) -> None:
    try:
        run = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version",
                              "--format=csv,noheader"], capture_output=True, text=True,
                             timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return
    rows = [line.split(",") for line in run.stdout.splitlines() if line.strip()]
    if run.returncode != 0 or not rows:
        return
    env["driver"] = rows[0][-1].strip()
    if not env["gpu_count"]:
        env["gpu_count"] = len(rows)
        env["gpu_name"] = rows[0][0].strip()


def _pynvml(env: dict[str, Any]) -> None:
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return
    try:
        driver = pynvml.nvmlSystemGetDriverVersion()
        env["driver"] = driver.decode() if isinstance(driver, bytes) else driver
        if not env["gpu_count"]:
            env["gpu_count"] = pynvml.nvmlDeviceGetCount()
            if env["gpu_count"]:
                name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(0))
                env["gpu_name"] = name.decode() if isinstance(name, bytes) else name
    except Exception:
        pass
    finally:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()


def _cupy() -> str | None:
    try:
        import cupy
    except Exception:
        return None
    return str(cupy.__version__)


def _cpu() -> str:
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def environment() -> dict[str, Any]:
    env: dict[str, Any] = {
        "gpu_name": None, "gpu_count": 0, "driver": None, "cuda": None, "nccl": None,
        "torch": None, "cupy": None, "python": platform.python_version(),
        "hostname": socket.gethostname(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "cpu": _cpu(), "cpu_count": os.cpu_count(),
    }
    _torch(env)
    _nvidia_smi(env)
    if env["driver"] is None or not env["gpu_count"]:
        _pynvml(env)
    env["cupy"] = _cupy()
    return env


if __name__ == "__main__":
    sys.stdout.write(json.dumps(environment()) + "\n")
