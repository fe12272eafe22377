"""The validation cases: what each measures, how many GPUs it needs, which script runs it.

A case is data: ``pkbsim.validation.runner`` starts its script (``validate/<script>``) as a
child process, ``--case KEY --out PATH [--quick]`` plus the case's own ``args``. A case that
needs more GPUs than are present, or NVLink multicast without ``--allow-multicast``, is
reported ``waived``, never failed.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field

from pkbsim.errors import UsageError

LAUNCHERS = ("python", "torchrun")


@dataclass(frozen=True)
class Case:
    key: str
    description: str
    gpus: int  # GPUs the case needs
    script: str  # file name in validate/
    launcher: str = "python"  # python: one process drives every GPU; torchrun: one per GPU
    timeout_s: float = 600.0
    quick_timeout_s: float = 120.0
    multicast: bool = False  # uses NVLink multicast (NVLS): runs only with --allow-multicast
    env: dict[str, str] = field(default_factory=dict, hash=False)  # extra environment
    args: tuple[str, ...] = ()  # extra arguments for the script

    def limit_s(self, quick: bool) -> float:
        return self.quick_timeout_s if quick else self.timeout_s


def _ring(proto: str) -> Case:
    return Case(f"nccl.ring_{proto.lower()}",
                f"NCCL all-reduce forced to the ring algorithm and the {proto} protocol "
                "(NCCL_ALGO=Ring, NCCL_PROTO), 1 KiB to 1 GiB",
                2, "nccl_collectives.py", "torchrun", 300.0, 120.0,
                env={"NCCL_ALGO": "Ring", "NCCL_PROTO": proto},
                args=("--collectives", "all_reduce"))


CASES: tuple[Case, ...] = (
    Case("topology.discover", "GPUs, NVLink and PCIe links from pynvml and `nvidia-smi topo "
         "-m` (captured for `pkbsim discover`)", 1, "discover_probe.py", timeout_s=120.0,
         quick_timeout_s=60.0),
    Case("hbm.copy_engine", "device-to-device copy by the copy engine (cudaMemcpyAsync), "
         "4 KiB to 1 GiB", 1, "hbm.py", timeout_s=600.0, quick_timeout_s=120.0),
    Case("hbm.sm_copy", "device-to-device copy by an SM kernel with 16-byte accesses, swept "
         "over thread blocks and sizes", 1, "hbm.py", timeout_s=600.0, quick_timeout_s=120.0),
    Case("launch.kernel", "empty-kernel launch: eager (host and GPU side), per node of a CUDA "
         "graph, launch plus synchronise", 1, "launch.py", timeout_s=300.0,
         quick_timeout_s=90.0),
    Case("host.dispatch", "host cost of an eager PyTorch op, a one-rank torch.distributed "
         "call and host synchronisations", 1, "host_dispatch.py", timeout_s=300.0,
         quick_timeout_s=120.0),
    Case("host.copy", "host to device and back from pinned memory, 1 KiB to 1 GiB", 1,
         "host_copy.py", timeout_s=600.0, quick_timeout_s=120.0),
    Case("kernels.kinds", "device time of PyTorch's own kernels by kind (elementwise, copy, "
         "fill, reduction, index, scan, sort, gemm, conv, attention, fft) across sizes, "
         "counted by pkbsim's trace recorder", 1, "kernel_kinds.py", timeout_s=300.0,
         quick_timeout_s=120.0),
    Case("pkb.references", "PKB's references at one rank, a fresh process each, timed by "
         "PKB's harness at --m 1024 and 4096, twice; GRPO at the blog's sizes (needs a PKB "
         "checkout: $PKB_ROOT, default .dev/pkb)", 1, "pkb_programs.py", timeout_s=600.0,
         quick_timeout_s=180.0),
    Case("host.dispatch_multi", "host cost of an eager torch.distributed call with one rank "
         "per GPU (NCCL)", 2, "host_dispatch.py", "torchrun", 300.0, 120.0),
    Case("peer.copy_engine", "copy-engine peer copies for every GPU pair, one direction and "
         "both", 2, "peer.py", timeout_s=600.0, quick_timeout_s=180.0),
    Case("peer.sm_ldst", "SM load/store peer copies (push and pull) swept over thread blocks "
         "and sizes", 2, "peer.py", timeout_s=600.0, quick_timeout_s=180.0),
    Case("peer.tma", "TMA bulk-copy (cp.async.bulk) peer kernel swept over thread blocks", 2,
         "peer.py", timeout_s=600.0, quick_timeout_s=180.0),
    Case("peer.flag_latency", "round trip of a flag written to a peer's memory (ping-pong)",
         2, "peer.py", timeout_s=300.0, quick_timeout_s=90.0),
    Case("nccl.collectives", "NCCL's 8 collectives and a send/recv ring through "
         "torch.distributed, 1 KiB to 1 GiB, algbw and busbw as nccl-tests", 2,
         "nccl_collectives.py", "torchrun", 600.0, 180.0),
    _ring("LL"),
    _ring("LL128"),
    _ring("Simple"),
    Case("nccl.nvls", "NCCL all-reduce by NVLink SHARP (NVLS multicast), 1 KiB to 1 GiB", 2,
         "nccl_collectives.py", "torchrun", 300.0, 120.0, multicast=True,
         env={"NCCL_NVLS_ENABLE": "1", "NCCL_ALGO": "NVLS"},
         args=("--collectives", "all_reduce")),
)


def keys() -> list[str]:
    return [case.key for case in CASES]


def select(patterns: str | None, cases: tuple[Case, ...] = CASES) -> list[Case]:
    """The cases whose key matches one of the comma-separated glob ``patterns`` (all for None),
    in registry order; a pattern that matches nothing is an error listing the keys."""
    if patterns is None:
        return list(cases)
    globs = [p.strip() for p in patterns.split(",") if p.strip()]
    if not globs:
        raise UsageError(f"--cases {patterns!r}: expected comma-separated key patterns")
    for glob in globs:
        if not any(fnmatch.fnmatchcase(case.key, glob) for case in cases):
            raise UsageError(f"--cases {glob!r}: matches no case; cases: "
                             f"{', '.join(case.key for case in cases)}")
    return [case for case in cases if any(fnmatch.fnmatchcase(case.key, g) for g in globs)]
