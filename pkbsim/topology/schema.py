"""Frozen dataclasses for a machine. Field names carry their units.

GB/s means 1e9 bytes per second, per GPU, one direction, unless the name says ``_bidir``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pkbsim.units import GB, US

# Transfer mechanisms the model knows. Each topology lists those its hardware offers.
MECHANISMS = (
    "copy_engine", "sm_ldst", "tma", "nvls_multimem", "nccl_simple", "nccl_ll128", "nccl_ll",
)
FABRICS = ("nvswitch", "pcie")
PEAK_KEYS = ("bf16_tensor", "fp16_tensor", "fp8_tensor", "tf32_tensor", "fp64_tensor",
             "fp32", "fp64")


@dataclass(frozen=True)
class MechanismTraits:
    """What a mechanism can do, fixed by the hardware (not a tunable)."""

    reduces: bool  # can sum peer data on the way (p2p reduction by SM code)
    switch_reduction: bool  # uses NVSwitch in-fabric reduction (multimem.ld_reduce)
    multicast: bool  # can write once and have the switch replicate
    uses_sms: bool  # occupies SMs while moving data
    host_initiated: bool  # issued from the host (a copy or a library call)


TRAITS: dict[str, MechanismTraits] = {
    "copy_engine": MechanismTraits(False, False, True, False, True),
    "sm_ldst": MechanismTraits(True, False, True, True, False),
    "tma": MechanismTraits(True, False, True, True, False),
    "nvls_multimem": MechanismTraits(True, True, True, True, False),
    "nccl_simple": MechanismTraits(True, False, False, True, True),
    "nccl_ll128": MechanismTraits(True, False, False, True, True),
    "nccl_ll": MechanismTraits(True, False, False, True, True),
}


@dataclass(frozen=True)
class Mechanism:
    """Achievable behaviour of one transfer mechanism on this machine's GPU-to-GPU fabric."""

    name: str
    efficiency: float  # achievable fraction of the fabric's line rate
    latency_us: float  # fixed cost per operation (issue, launch or call)
    step_latency_us: float  # extra cost per synchronisation step of an algorithm
    sms_to_saturate: int  # SMs needed to reach ``efficiency``; 0 for copy engines
    min_efficient_message_bytes: int  # smallest message that reaches about ``efficiency``

    @property
    def traits(self) -> MechanismTraits:
        return TRAITS[self.name]

    @property
    def latency_s(self) -> float:
        return self.latency_us * US

    @property
    def step_latency_s(self) -> float:
        return self.step_latency_us * US


@dataclass(frozen=True)
class Gpu:
    model: str
    sm_count: int
    hbm_bandwidth_GBps: float
    hbm_capacity_GB: float
    l2_MiB: float
    copy_engines: int
    peak_tflops: dict[str, float] = field(hash=False)
    hbm_efficiency: float = 1.0  # achievable fraction of hbm_bandwidth_GBps (a large copy)

    @property
    def hbm_Bps(self) -> float:
        """Achievable HBM bandwidth, reads plus writes: the peak times ``hbm_efficiency``."""
        return self.hbm_bandwidth_GBps * self.hbm_efficiency * GB


@dataclass(frozen=True)
class ScaleUp:
    """The GPU-to-GPU fabric inside a node: NVSwitch, or PCIe alone."""

    fabric: str
    links_per_gpu: int
    link_bandwidth_GBps: float  # per link, per direction
    in_switch_reduction: bool  # NVLS / NVLink SHARP
    multicast: bool
    signal_latency_us: float  # one cross-GPU flag exchange (a sync step)
    # what one NCCL step over this fabric costs beyond NCCL's tuner constant, by protocol
    # (LL, LL128, Simple): its fabric kind's values unless the file sets them
    # (topologies/fabrics/<fabric>.yaml)
    step_latency_us: dict[str, float] = field(hash=False, default_factory=dict)

    @property
    def bandwidth_GBps(self) -> float:
        """Per GPU, per direction."""
        return self.links_per_gpu * self.link_bandwidth_GBps


@dataclass(frozen=True)
class Pcie:
    """Host links and, for PCIe-only machines, the switch tree peer traffic crosses."""

    gpu_link_GBps: float  # per GPU, per direction, line rate
    gpu_link_efficiency: float
    latency_us: float  # one host<->device copy
    p2p: bool  # peer-to-peer over PCIe; otherwise staged through host memory
    gpus_per_switch: int
    switches_per_socket: int
    sockets: int
    switch_uplink_GBps: float  # per switch, per direction
    inter_socket_GBps: float  # per direction


@dataclass(frozen=True)
class ScaleOut:
    nics_per_gpu: int
    nic_bandwidth_GBps: float  # per NIC, per direction, line rate
    efficiency: float
    latency_us: float  # one message, one way, including the proxy
    # NIC i of every node on leaf switch i: traffic between GPUs of different local index goes
    # first over NVLink to the GPU of the destination's rail, then out its NIC (NCCL's PXN)
    rail_optimized: bool = True
    # a node's NIC bandwidth over its share of the next tier up (1: non-blocking); traffic
    # that leaves its rail (all of it when not rail_optimized) shares that uplink
    oversubscription: float = 1.0
    # the kind of network (topologies/fabrics/<fabric>.yaml): infiniband, roce, efa, ...
    fabric: str = "infiniband"
    # the switches reduce in the network (InfiniBand SHARP; NCCL's CollNet)
    in_network_reduction: bool = False
    # what one NCCL step across the network costs beyond NCCL's tuner constant (the kind's
    # value unless the file sets it)
    step_latency_us: float = 0.0


@dataclass(frozen=True)
class Latency:
    kernel_launch_us: float  # GPU-side cost of one kernel (back-to-back or in a graph)
    host_launch_us: float  # host cost to issue one eager op
    nccl_call_us: float  # one small eager NCCL collective, end to end
    host_collective_us: float = 0.0  # host cost to issue one eager torch.distributed call
    host_sync_us: float = 0.0  # host cost of one synchronisation once the stream has drained
    eager_launch_us: float | None = None  # GPU cost of one eagerly launched kernel, back to back
    kernel_ramp_us: float = 0.0  # fixed time a kernel that moves data adds to its launch
    host_view_us: float = 0.0  # host cost of an operator that launches nothing (view, alloc)
    host_library_us: float | None = None  # host cost of a cuBLAS/cuDNN/cuFFT call
    host_call_us: float = 0.0  # host cost of one call of a traced function (Python, timing loop)
    nccl_launch_us: float = 0.0  # host cost of one NCCL call (or kernel launch) from a C loop

    @property
    def library_us(self) -> float:
        """Host cost of a library call (default: ``host_launch_us``)."""
        return self.host_launch_us if self.host_library_us is None else self.host_library_us

    @property
    def eager_kernel_us(self) -> float:
        """GPU-side cost of a kernel launched eagerly (default: ``kernel_launch_us``)."""
        return self.kernel_launch_us if self.eager_launch_us is None else self.eager_launch_us


# Kernel kinds of traced programs (pkbsim.trace.classes); a topology may calibrate each.
KERNEL_KINDS = ("elementwise", "copy", "fill", "reduction", "index", "scan", "sort", "gemm",
                "conv", "attention", "fft", "linalg", "other")


@dataclass(frozen=True)
class KernelKind:
    """How fast PyTorch's own kernels of one kind run on this GPU (docs/metrics.md 9.4.1)."""

    memory_efficiency: float  # of the achievable HBM rate (gpu.hbm_bandwidth_GBps x efficiency)
    compute_efficiency: float  # of the peak of the kernel's type
    fixed_us: float = 0.0  # per kernel, beyond its launch (a pass's own start and tail)


@dataclass(frozen=True)
class Topology:
    name: str
    description: str
    gpu: Gpu
    gpus_per_node: int
    nodes: int
    scale_up: ScaleUp
    pcie: Pcie
    scale_out: ScaleOut | None
    latency: Latency
    mechanisms: dict[str, Mechanism] = field(hash=False)
    sources: dict[str, str] = field(hash=False, default_factory=dict)
    kernels: dict[str, KernelKind] = field(hash=False, default_factory=dict)  # by kernel kind
    file: str = ""
    sha256: str = ""

    @property
    def total_gpus(self) -> int:
        return self.gpus_per_node * self.nodes

    @property
    def peer_line_rate_GBps(self) -> float:
        """Per GPU, per direction, to a peer in the same node."""
        if self.scale_up.fabric == "nvswitch":
            return self.scale_up.bandwidth_GBps
        return self.pcie.gpu_link_GBps

    def node_of(self, rank: int) -> int:
        return rank // self.gpus_per_node
