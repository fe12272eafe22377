"""The fixed vocabulary shared by inspection, gap decomposition and reports."""

from __future__ import annotations

# Data-movement mechanisms a candidate solution can use (sorted in reports).
MECHANISMS = (
    "nccl_payload",  # torch.distributed collectives that move the task's data
    "copy_engine",  # peer cudaMemcpy*/copy_ between GPUs
    "sm_peer_ldst",  # loads/stores through symmetric-memory or UVA peer pointers
    "tma",  # bulk-tensor copies (cp.async.bulk, TMA descriptors)
    "nvls_multimem",  # multimem.* instructions (NVLink SHARP)
    "nvshmem",  # NVSHMEM puts/gets
    "tk_pgl",  # ThunderKittens parallel global layouts
)

# Boolean findings of inspection, each with line-number evidence.
FLAGS = (
    "host_barrier_per_call",  # dist.barrier() (or equivalent) on every call
    "device_barrier",  # a cross-GPU barrier inside the kernel(s)
    "host_sync",  # torch.cuda.synchronize / stream.synchronize / .item() / .tolist()
    "per_call_rendezvous",  # symmetric memory / IPC handles set up on every call
    "fused_comm_compute",  # communication inside a compute kernel
    "overlap_attempt",  # extra streams or chunked pipelining
    "one_shot",  # each rank reads every peer's whole buffer
    "grid_capped",  # a launch grid far below the SM count
    "uncoalesced_peer",  # strided or scalar peer accesses where visible
)
