"""What each traced operator costs: the host per operator class, the device per kernel.

Host (one Python thread issuing eagerly): ``view`` operators cost ``latency.host_view_us``,
kernel-launching ones ``host_launch_us``, library calls (cuBLAS, cuDNN, cuFFT, cuSOLVER)
``host_library_us``, torch.distributed calls ``host_collective_us``, device-to-host syncs
``host_sync_us`` once the stream has drained; the call itself ``host_call_us`` (the Python
function call and the caller's timing loop: PKB's records a CUDA event per call).

Device (one kernel): ``fixed + max(bytes / (B_hbm x e_mem), FLOPs / (P x e_comp))`` with the
GPU's achievable HBM rate ``B_hbm``, the peak ``P`` of its type (tensor cores for bf16/fp16/fp8
GEMMs, convolutions and attention, else FP32), and the efficiencies and fixed cost of its kind:
the topology's ``kernels.<kind>`` where calibrated (``pkbsim calibrate`` from the
``kernels.kinds`` validation case), else the estimates below; the simulator adds the eager
launch (``latency.eager_launch_us``) per kernel.
"""

from __future__ import annotations

from dataclasses import dataclass

from pkbsim.topology.schema import KernelKind, Topology
from pkbsim.trace.program import KernelGroup, Segment


@dataclass(frozen=True)
class KindEfficiency:
    memory: float  # fraction of the achievable HBM rate the kind's kernels reach
    compute: float  # fraction of the peak
    why: str
    fixed_us: float = 0.0  # per kernel, beyond its launch


# Per-kind efficiencies and fixed costs where a topology calibrates none (docs/metrics.md
# 9.4.1): PyTorch's eager CUDA kernels as measured on one H100 (`pkbsim validate --cases
# kernels.kinds`, 2026-12-06; `pkbsim calibrate` into docs/measurements/h100-1gpu.yaml: memory
# efficiency of the achievable HBM rate, at most 1; compute efficiency of the type's peak;
# fixed µs per kernel beyond its launch). linalg and other were not measured: estimates.
KINDS: dict[str, KindEfficiency] = {
    "elementwise": KindEfficiency(1.0, 1.0, "H100: 1.154 of the SM copy's rate, capped at 1",
                                  0.2016),
    "copy": KindEfficiency(1.0, 1.0, "H100: 1.182 of the SM copy's rate, capped at 1", 0.4847),
    "fill": KindEfficiency(1.0, 1.0, "H100: 1.182 of the SM copy's rate, capped at 1", 0.4266),
    "reduction": KindEfficiency(0.7921, 1.0, "H100: sum, softmax, log-softmax, layer norm",
                                3.237),
    "index": KindEfficiency(0.4468, 1.0, "H100: index_select, scatter", 0.5859),
    "scan": KindEfficiency(0.6371, 1.0, "H100: cumsum, 1-D and row-wise", 2.735),
    "sort": KindEfficiency(0.0984, 1.0, "H100: sort (radix, 3 kernels) and topk", 16.64),
    "gemm": KindEfficiency(0.8, 0.7048, "H100: mm bf16 (tensor cores) and fp32", 2.408),
    "conv": KindEfficiency(0.6, 0.364, "H100: conv2d 3x3 bf16", 10.17),
    "attention": KindEfficiency(0.6, 0.1916, "H100: causal SDPA bf16, head dim 128", 6.942),
    "fft": KindEfficiency(1.0, 1.0, "H100: rfft over rows of 1,024; 1.098, capped at 1", 1.31),
    "linalg": KindEfficiency(0.3, 0.2, "estimate: cuSOLVER factorisations, small sequential "
                                       "steps (not measured)"),
    "other": KindEfficiency(0.8, 1.0, "estimate: an unclassified operator (not measured)"),
}


def kind_of(kind: str, topo: Topology) -> KernelKind:
    """The kind's efficiencies on ``topo``: calibrated, else the built-in estimate."""
    if kind in topo.kernels:
        return topo.kernels[kind]
    eff = KINDS.get(kind, KINDS["other"])
    return KernelKind(eff.memory, eff.compute, eff.fixed_us)


def kernel_time_s(group: KernelGroup, topo: Topology) -> float:
    """One kernel of ``group`` on ``topo``'s GPU, launch excluded."""
    eff = kind_of(group.kind, topo)
    peaks = topo.gpu.peak_tflops
    peak = peaks.get("bf16_tensor", peaks["fp32"]) if group.tensor_core else peaks["fp32"]
    t_mem = group.bytes / (topo.gpu.hbm_Bps * eff.memory_efficiency)
    t_comp = group.flops / (peak * 1e12 * eff.compute_efficiency)
    return eff.fixed_us * 1e-6 + max(t_mem, t_comp)


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
