"""What the inspection looks for: name patterns, call names (Python, Triton) and C/PTX regexes."""

from __future__ import annotations

import re

MAX_CAPPED_GRID_BLOCKS = 16  # a literal grid below this is far under any GPU's SM count

PEER_NAME = re.compile(r"(?i)peer|remote|ptrs|bufs|buffers|symm|multicast|mc_ptr")
WORLD_NAME = re.compile(r"(?i)world|n_?ranks|num_?ranks|n_?devices|num_?devices|n_?peers|"
                        r"num_?peers|npes|n_?gpus|num_?gpus|\bW\b|\bws\b")
SLICE_NAME = re.compile(r"(?i)rank|chunk|shard|slice|\bpart\b|dev_idx")
OWN_RANK = re.compile(r"(?i)^(?:[\w.]+\.)?(?:my_|local_|own_)?rank$|get_rank\(\)$")
DEVICE_MARKER = re.compile(r'__global__|__device__|#include|\basm\s*(?:volatile\s*|__volatile__'
                           r'\s*)?\(|extern\s+"C"|PYBIND11_MODULE')
DEVICE_SINKS = {"load_inline", "compile_cuda_extension", "RawKernel", "RawModule",
                "ElementwiseKernel", "ReductionKernel", "inline_asm_elementwise", "SourceModule"}

DIST_PREFIXES = ("torch.distributed.", "torch.ops._c10d_functional.",
                 "torch.ops.c10d_functional.")
DIST_DATA = {"all_reduce", "all_gather", "all_gather_into_tensor", "_all_gather_base",
             "all_gather_coalesced", "all_reduce_coalesced", "reduce_scatter",
             "reduce_scatter_tensor", "_reduce_scatter_base", "all_to_all", "all_to_all_single",
             "broadcast", "reduce", "gather", "scatter", "send", "recv", "isend", "irecv",
             "batch_isend_irecv", "all_gather_tensor", "permute_tensor"}
DIST_OBJECT = {"all_gather_object", "broadcast_object_list", "gather_object",
               "scatter_object_list", "send_object_list", "recv_object_list"}
DIST_HOST_BARRIER = {"barrier", "monitored_barrier"} | DIST_OBJECT
DIST_METADATA = {"new_group", "new_subgroups", "init_process_group",
                 "destroy_process_group"} | DIST_HOST_BARRIER
LITERAL_TENSOR = {"tensor", "as_tensor", "LongTensor", "IntTensor", "FloatTensor"}

PY_COPY_ENGINE = {"memcpyPeer", "memcpyPeerAsync", "cudaMemcpyPeer", "cudaMemcpyPeerAsync",
                  "cuMemcpyPeer", "cuMemcpyPeerAsync"}
PY_MEMCPY = re.compile(r"(?:cuda)?[mM]emcpy(?:2D|3D)?(?:Async)?|cuMemcpy(?:DtoD|2D|3D)?(?:Async)?"
                       r"(?:_v2)?")  # a copy: a peer copy when a peer pointer is an argument
PEER_ROOT_CALLS = {"ipcOpenMemHandle", "cudaIpcOpenMemHandle", "cuIpcOpenMemHandle",
                   "cuMemImportFromShareableHandle"}
PEER_TABLES = {"buffer_ptrs", "buffer_ptrs_dev"}  # every rank's buffer: [rank] is our own
STRICT_PEER_NAME = re.compile(r"(?i)peer|remote")
PY_RENDEZVOUS_SITES = {"rendezvous", "ipcGetMemHandle", "ipcOpenMemHandle", "cudaIpcGetMemHandle",
                       "cudaIpcOpenMemHandle", "cuIpcGetMemHandle", "cuIpcOpenMemHandle"}
PY_PEER_POINTERS = {"buffer_ptrs", "buffer_ptrs_dev", "ipcOpenMemHandle", "cudaIpcOpenMemHandle"}
PY_TK = {"TKParallelTensor", "get_or_create_parallel_tensor", "create_parallel_tensor"}
PY_RENDEZVOUS = {"rendezvous", "ipcGetMemHandle", "ipcOpenMemHandle", "cudaIpcGetMemHandle",
                 "cudaIpcOpenMemHandle", "TKParallelTensor", "create_parallel_tensor"}
PY_SYNC = {"synchronize", "deviceSynchronize", "streamSynchronize", "cudaDeviceSynchronize",
           "cudaStreamSynchronize"}
PY_SYNC_NO_ARGS = {"item", "tolist", "cpu"}
PY_HANDLE_BARRIER = {"barrier", "put_signal", "wait_signal"}
PY_STREAM = {"torch.cuda.Stream", "torch.cuda.stream", "cupy.cuda.Stream"}
PY_CHUNKING = {"chunk", "split", "tensor_split"}
SYMM_OPS = "torch.ops.symm_mem."
SYMM_FUSED = ("fused_all_gather_matmul", "fused_matmul_reduce_scatter",
              "fused_all_gather_scaled_matmul")
TRITON_BARRIER = {"blockwise_barrier", "send_signal", "wait_signal", "symm_mem_sync"}
TRITON_COMPUTE = {"dot", "dot_scaled", "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sigmoid",
                  "softmax", "erf", "tanh", "cos", "sin"}
SM_PEER_PTRS = "_peer_pointers"  # a working note: symmetric-memory pointers, counted with a kernel

C_MECHANISMS = {
    "tma": r"\bcp\.async\.bulk\b|\bcp_async_bulk\w*|\bCUtensorMap\b|\bcuTensorMapEncode\w*"
           r"|\btma::\w+",
    "nvls_multimem": r"\bmultimem\.(?:ld_reduce|st|red)\b|\bmultimem\s*<",
    "nvshmem": r"\bnvshmemx?_\w+\s*\(",
    "tk_pgl": r"\bpgl\s*<|\bTKParallelTensor\b|\bparallel_tensor_to_pgl\b",
    "sm_peer_ldst": r"\bcudaIpcOpenMemHandle\s*\(|\bcuMemImportFromShareableHandle\s*\(",
    "device_barrier": r"\bbarrier_all\s*\(|\bnvshmemx?_(?:barrier|sync|signal_wait)\w*\s*\("
                      r"|\batomic\w+_system\s*\(|(?<!multimem\.)\batom\.[\w.]*\bsys\b"
                      r"|\b(?:atom|red|ld|st)\.(?=[\w.]*\b(?:acquire|release|acq_rel)\b)"
                      r"(?=[\w.]*\bsys\b)"
                      r"|\bthread_scope_system\b|\bcuStreamWaitValue\w*\s*\(",
    "overlap_attempt": r"\bcudaStreamCreate\w*\s*\(|\bcudaStreamWaitEvent\s*\(",
    "host_sync": r"\bcuda(?:Device|Stream|Event)Synchronize\s*\(",
}
# a peer copy: cudaMemcpyPeer* always; group 1, a memcpy, only on a peer pointer (c_peers)
C_COPY_ENGINE = re.compile(r"\b(?:cuda|cu)Memcpy(?:2D|3D)?Peer(?:Async)?\s*\(|"
                           r"\b(cudaMemcpy(?:2D)?(?:Async)?|cuMemcpyDtoD(?:Async)?(?:_v2)?)\s*\(")
C_SETUP_FUNCTION = re.compile(r"(?i)init|setup|open|create|register|alloc|exchange|handle")
C_COMPUTE = re.compile(r"\b(?:wgmma|mma|wmma|hmma)\b|\bmma_\w+\s*[<(]|\b(?:__hfma2?|fmaf|__expf"
                       r"|expf?|exp2f?|__logf|logf?|rsqrtf?|sqrtf?|tanhf?)\s*\(")
C_PEER_MARKER = re.compile(r"\bmultimem\b|\.mc_ptr\b|\bG\.\w+\s*\[|\bnvshmemx?_\w*(?:put|get)"
                           r"\w*\s*\(")
C_SMALL_TYPES = {"char", "signed char", "unsigned char", "int8_t", "uint8_t", "bool", "short",
                 "unsigned short", "int16_t", "uint16_t", "half", "__half", "__nv_bfloat16",
                 "nv_bfloat16", "bf16", "at::Half", "at::BFloat16", "c10::Half", "c10::BFloat16"}
C_THREAD_INDEX = r"(?:threadIdx\.[xyz]|tid|idx|lane|thread_id|gid|i)"
C_STRIDED = re.compile(rf"\b{C_THREAD_INDEX}\s*\*\s*(?!1\b)\w|\w\s*\*\s*{C_THREAD_INDEX}\b")
C_NOT_FUNCTIONS = {"if", "for", "while", "switch", "catch", "return", "sizeof"}
