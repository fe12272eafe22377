"""What each traced operator costs: the host per operator class, the device per kernel.

Host (one Python thread issuing eagerly): ``view`` operators cost ``latency.host_view_us``,
kernel-launching ones ``host_launch_us``, library calls (cuBLAS, cuDNN, cuFFT, cuSOLVER)
``host_library_us``, torch.distributed calls ``host_collective_us``, device-to-host syncs
``host_sync_us`` once the stream has drained; the call itself ``host_call_us`` (the Python
function call and the caller's timing loop: PKB's records a CUDA event per call).

Device (one kernel): ``max(bytes / (B_hbm x e_mem), FLOPs / (P x e_comp))`` with the GPU's
achievable HBM rate ``B_hbm``, the peak ``P`` of its type (tensor cores for bf16/fp16/fp8
GEMMs, convolutions and attention, else FP32), and the efficiencies of its kind below;
the simulator adds the eager launch (``latency.eager_launch_us``) per kernel.
"""

from __future__ import annotations

from dataclasses import dataclass

from pkbsim.topology.schema import Topology
from pkbsim.trace.program import KernelGroup, Segment


@dataclass(frozen=True)
class KindEfficiency:
    memory: float  # fraction of the achievable HBM rate the kind's kernels reach
    compute: float  # fraction of the peak
    why: str


# Per-kind efficiencies (docs/metrics.md §12.3): PyTorch's eager CUDA kernels on large inputs.
KINDS: dict[str, KindEfficiency] = {
    "elementwise": KindEfficiency(1.0, 1.0, "streams at the HBM rate"),
    "copy": KindEfficiency(1.0, 1.0, "streams at the HBM rate"),
    "fill": KindEfficiency(1.0, 1.0, "writes only"),
    "reduction": KindEfficiency(0.9, 1.0, "one pass plus a cross-block step"),
    "index": KindEfficiency(0.5, 1.0, "gathers and scatters: irregular accesses"),
    "scan": KindEfficiency(0.5, 1.0, "two passes (CUB's decoupled look-back reads twice)"),
    "sort": KindEfficiency(0.125, 1.0, "radix sort: about 8 passes over keys and values"),
    "gemm": KindEfficiency(0.8, 0.7, "cuBLAS: about 70% of peak on large tiles"),
    "conv": KindEfficiency(0.6, 0.5, "cuDNN: about half of peak"),
    "attention": KindEfficiency(0.6, 0.5, "flash/efficient attention: about half of peak"),
    "fft": KindEfficiency(0.3, 1.0, "cuFFT: several passes over the data"),
    "linalg": KindEfficiency(0.3, 0.2, "cuSOLVER factorisations: small, sequential steps"),
    "other": KindEfficiency(0.8, 1.0, "unclassified operator"),
}


def kernel_time_s(group: KernelGroup, topo: Topology) -> float:
    """One kernel of ``group`` on ``topo``'s GPU, launch excluded."""
    eff = KINDS.get(group.kind, KINDS["other"])
    peaks = topo.gpu.peak_tflops
    peak = peaks.get("bf16_tensor", peaks["fp32"]) if group.tensor_core else peaks["fp32"]
    t_mem = group.bytes / (topo.gpu.hbm_Bps * eff.memory)
    t_comp = group.flops / (peak * 1e12 * eff.compute)
    return max(t_mem, t_comp)


def device_time_s(seg: Segment, topo: Topology) -> float:
    """All kernels of one segment (one of its ``times``), launches excluded."""
    return sum(k.count * kernel_time_s(k, topo) for k in seg.kernels)


def host_cost_us(cls: str, topo: Topology) -> float:
    lat = topo.latency
    return {"view": lat.host_view_us, "kernel": lat.host_launch_us,
            "library": lat.library_us, "collective": lat.host_collective_us,
            "sync": lat.host_sync_us}[cls]


def host_time_s(seg: Segment, topo: Topology) -> float:
    """Issuing one segment's operators (its boundary's collective or sync excluded)."""
    return sum(n * host_cost_us(cls, topo) for cls, n in seg.host) * 1e-6
