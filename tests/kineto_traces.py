"""Small Kineto traces built event by event, as torch.profiler writes them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


class TraceBuilder:
    """Complete events of one process: the calling thread 1, the GPU's stream 7."""

    def __init__(self, rank: int | None = None, world_size: int | None = None) -> None:
        self.events: list[dict[str, Any]] = [
            {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python"}}]
        self.corr = 0
        self.info = ({"backend": "nccl", "rank": rank, "world_size": world_size}
                     if rank is not None else None)

    def host(self, name: str, ts: float, dur: float, cat: str = "cpu_op", tid: int = 1) -> None:
        self.events.append({"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid,
                            "ts": ts, "dur": dur, "args": {}})

    def launch(self, ts: float, dur: float, gpu_ts: float, gpu_dur: float, kernel: str,
               api: str = "cudaLaunchKernel", cat: str = "kernel", tid: int = 1) -> None:
        self.corr += 1
        self.events.append({"ph": "X", "cat": "cuda_runtime", "name": api, "pid": 1, "tid": tid,
                            "ts": ts, "dur": dur, "args": {"correlation": self.corr}})
        self.events.append({"ph": "X", "cat": cat, "name": kernel, "pid": 0, "tid": 7,
                            "ts": gpu_ts, "dur": gpu_dur,
                            "args": {"correlation": self.corr, "stream": 7, "device": 0}})

    def runtime(self, name: str, ts: float, dur: float, tid: int = 1) -> None:
        self.corr += 1
        self.events.append({"ph": "X", "cat": "cuda_runtime", "name": name, "pid": 1,
                            "tid": tid, "ts": ts, "dur": dur, "args": {"correlation": self.corr}})

    def data(self) -> dict[str, Any]:
        out: dict[str, Any] = {"schemaVersion": 1, "traceEvents": self.events}
        if self.info:
            out["distributedInfo"] = self.info
        return out

    def write(self, path: Path) -> Path:
        path.write_text(json.dumps(self.data()))
        return path
