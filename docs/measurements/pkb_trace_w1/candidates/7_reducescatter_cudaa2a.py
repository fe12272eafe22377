"""PKB 7 (reducescatter) as NCCL all-to-all + a custom CUDA reduction kernel (load_inline).

The reduce-scatter is split into its two halves: dist.all_to_all_single sends chunk d of the
input to rank d (so this rank receives its own chunk from every rank, stacked), then one CUDA
kernel sums the W received chunks in fp32 and writes the result in the input dtype. The
kernel moves 16 bytes per thread per chunk (8 bf16 values) through uint4 loads, with a
scalar path for what the vectors do not cover (or everything, when misaligned). At W = 1 the
all-to-all is a self-copy and the kernel just copies its single chunk.
The extension is compiled once, on the first CUDA call, and cached by torch.

Timeline behaviour: an NCCL all-to-all (send/recv kernel) + one custom elementwise reduction
kernel per call, with an extra W x chunk receive buffer (the reference: one NCCL kernel).
The PyTorch fallback runs only off CUDA (CPU check).
"""
import torch
import torch.distributed as dist

_CPP = r"""
void sum_chunks(torch::Tensor recv, torch::Tensor out, int64_t world);
"""

_CUDA = r"""
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

__device__ __forceinline__ float to_f(float v) { return v; }
__device__ __forceinline__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_f(__half v) { return __half2float(v); }
template <typename T> __device__ __forceinline__ T from_f(float v);
template <> __device__ __forceinline__ float from_f<float>(float v) { return v; }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16(v); }
template <> __device__ __forceinline__ __half from_f<__half>(float v) { return __float2half(v); }

template <typename T>
__global__ void sum_chunks_kernel(const T* __restrict__ in, T* __restrict__ out, long chunk,
                                  int world, bool use_vec) {
  constexpr int VEC = 16 / sizeof(T);
  const long nvec = use_vec ? chunk / VEC : 0;
  const long tid = blockIdx.x * (long)blockDim.x + threadIdx.x;
  const long stride = (long)gridDim.x * blockDim.x;
  for (long v = tid; v < nvec; v += stride) {
    float acc[VEC];
#pragma unroll
    for (int j = 0; j < VEC; ++j) acc[j] = 0.f;
    for (int r = 0; r < world; ++r) {
      uint4 raw = reinterpret_cast<const uint4*>(in + r * chunk)[v];
      const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
      for (int j = 0; j < VEC; ++j) acc[j] += to_f(e[j]);
    }
    uint4 res;
    T* o = reinterpret_cast<T*>(&res);
#pragma unroll
    for (int j = 0; j < VEC; ++j) o[j] = from_f<T>(acc[j]);
    reinterpret_cast<uint4*>(out)[v] = res;
  }
  for (long i = nvec * VEC + tid; i < chunk; i += stride) {  // scalar rest
    float acc = 0.f;
    for (int r = 0; r < world; ++r) acc += to_f(in[r * chunk + i]);
    out[i] = from_f<T>(acc);
  }
}

template <typename T>
static void launch(const torch::Tensor& recv, torch::Tensor& out, long chunk, int world) {
  constexpr long VEC = 16 / sizeof(T);
  const bool use_vec = chunk % VEC == 0 &&
      reinterpret_cast<uintptr_t>(recv.data_ptr()) % 16 == 0 &&
      reinterpret_cast<uintptr_t>(out.data_ptr()) % 16 == 0;
  const int threads = 256;
  long work = use_vec ? chunk / VEC : chunk;
  long blocks = (work + threads - 1) / threads;
  blocks = blocks < 1 ? 1 : (blocks > 4096 ? 4096 : blocks);
  sum_chunks_kernel<T><<<(unsigned)blocks, threads, 0, c10::cuda::getCurrentCUDAStream()>>>(
      reinterpret_cast<const T*>(recv.data_ptr()), reinterpret_cast<T*>(out.data_ptr()),
      chunk, world, use_vec);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

void sum_chunks(torch::Tensor recv, torch::Tensor out, int64_t world) {
  TORCH_CHECK(recv.is_contiguous() && out.is_contiguous() && recv.numel() == out.numel() * world);
  long chunk = out.numel();
  if (chunk == 0) return;
  switch (out.scalar_type()) {
    case at::kBFloat16: launch<__nv_bfloat16>(recv, out, chunk, (int)world); break;
    case at::kHalf: launch<__half>(recv, out, chunk, (int)world); break;
    case at::kFloat: launch<float>(recv, out, chunk, (int)world); break;
    default: TORCH_CHECK(false, "unsupported dtype");
  }
}
"""

_EXT = None


def _ext():
    global _EXT
    if _EXT is None:
        from torch.utils.cpp_extension import load_inline
        _EXT = load_inline(name="pkb7_a2a_sum_cuda_v1", cpp_sources=_CPP, cuda_sources=_CUDA,
                           functions=["sum_chunks"], extra_cuda_cflags=["-O3"], verbose=False)
    return _EXT


@torch.no_grad()
def solution(tensor: torch.Tensor) -> torch.Tensor:
    world_size = dist.get_world_size()
    x = tensor.contiguous()
    recv = torch.empty_like(x)
    dist.all_to_all_single(recv, x)  # recv[r] = rank r's chunk for this rank
    chunk_rows = x.shape[0] // world_size
    out = x.new_empty((chunk_rows,) + tuple(x.shape[1:]))
    if not x.is_cuda:  # CPU check: the same sum with PyTorch
        torch.sum(recv.view((world_size,) + tuple(out.shape)), dim=0, out=out)
        return out
    _ext().sum_chunks(recv, out, world_size)
    return out
