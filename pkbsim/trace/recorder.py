"""Record what PyTorch dispatches while a function runs (needs torch; child processes only).

Two of PyTorch's own modes do the work: a ``TorchDispatchMode`` sees every ATen and c10d
operator after autograd and decomposition (what becomes kernels on a GPU), and a
``TorchFunctionMode`` sees the Python-level tensor methods that synchronise with the device
(``.tolist()``, ``.cpu()``, ``.numpy()``), which on a CPU run dispatch nothing. The function
runs on CPU tensors standing for the GPU's; ``cuda`` devices in factory calls are redirected to
the CPU and ``torch.cuda`` synchronisation is recorded as a sync.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
import torch.distributed as dist
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import flop_registry

from pkbsim.trace import classes
from pkbsim.trace.format import Collective, TraceOp

DTYPE_NAMES = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32",
               torch.float64: "fp64", torch.int64: "i64", torch.int32: "i32", torch.int16: "i16",
               torch.int8: "i8", torch.uint8: "u8", torch.bool: "b1",
               torch.complex64: "c64", torch.complex128: "c128"}
for _name in ("float8_e4m3fn", "float8_e5m2"):
    if hasattr(torch, _name):
        DTYPE_NAMES[getattr(torch, _name)] = "fp8"
TENSOR_CORE = {"bf16", "fp16", "fp8"}
C10D = {"allreduce_": "all_reduce", "allreduce_coalesced_": "all_reduce",
        "allgather_": "all_gather", "_allgather_base_": "all_gather",
        "allgather_into_tensor_coalesced_": "all_gather", "allgather_coalesced_": "all_gather",
        "reduce_scatter_": "reduce_scatter", "_reduce_scatter_base_": "reduce_scatter",
        "reduce_scatter_tensor_coalesced_": "reduce_scatter", "alltoall_": "all_to_all",
        "alltoall_base_": "all_to_all", "broadcast_": "broadcast", "reduce_": "reduce",
        "gather_": "gather", "scatter_": "scatter", "send": "send", "recv_": "recv",
        "recv_any_source_": "recv", "barrier": "barrier"}
SYNC_METHODS = {"tolist", "cpu", "numpy"}
MAX_SHAPES = 8  # tensors described per op


def _leaves(value: Any) -> list[Any]:
    """Leaves of nested lists, tuples and dicts (pytree would open c10d's script objects)."""
    out: list[Any] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, (list, tuple)):
            stack.extend(reversed(item))
        elif isinstance(item, dict):
            stack.extend(reversed(list(item.values())))
        else:
            out.append(item)
    return out


def _tensors(value: Any) -> list[torch.Tensor]:
    return [t for t in _leaves(value) if isinstance(t, torch.Tensor)]


def _nbytes(t: torch.Tensor) -> int:
    return int(t.numel()) * t.element_size()


def _describe(t: torch.Tensor) -> str:
    return f"{DTYPE_NAMES.get(t.dtype, str(t.dtype).removeprefix('torch.'))}" \
           f"[{','.join(str(int(s)) for s in t.shape)}]"


def _is_view(func: Any) -> bool:
    returns = func._schema.returns
    return bool(returns) and all(r.alias_info is not None and not r.alias_info.is_write
                                 for r in returns)


def _flops(func: Any, args: Any, kwargs: Any, out: Any) -> int:
    counter = flop_registry.get(func._overloadpacket)
    if counter is not None:
        with contextlib.suppress(Exception):  # a counter that does not know this overload
            return int(counter(*args, **kwargs, out_val=out))
    tensors = _tensors(out)
    return sum(int(t.numel()) for t in tensors) if tensors else 0


def _group(args: Any) -> tuple[int, tuple[int, ...]]:
    for leaf in _leaves(args):
        if isinstance(leaf, torch.ScriptObject):
            with contextlib.suppress(Exception):
                pg = dist.ProcessGroup.unbox(leaf)
                ranks = tuple(dist.get_process_group_ranks(pg))
                return len(ranks), ranks
    w = dist.get_world_size() if dist.is_initialized() else 1
    return w, tuple(range(w))


def _collective(name: str, args: Any) -> Collective:
    size, ranks = _group(args)
    first = args[0] if args else None
    tensors = _tensors(first)
    if name in ("alltoall_", "allgather_", "reduce_scatter_", "gather_"):
        # input tensors are the second argument: (outputs, inputs, ...)
        tensors = _tensors(args[1]) if len(args) > 1 else tensors
    elif name in ("alltoall_base_", "_allgather_base_", "_reduce_scatter_base_",
                  "allgather_into_tensor_coalesced_", "reduce_scatter_tensor_coalesced_"):
        tensors = _tensors(args[1]) if len(args) > 1 else tensors
    nbytes = sum(_nbytes(t) for t in tensors)
    in_splits: tuple[int, ...] = ()
    out_splits: tuple[int, ...] = ()
    if name == "alltoall_base_" and len(args) > 4:  # (output, input, group, out, in, ...)
        out_splits = tuple(int(x) for x in _leaves(args[3]) if isinstance(x, int))
        in_splits = tuple(int(x) for x in _leaves(args[4]) if isinstance(x, int))
    return Collective(C10D.get(name, "other"), size, nbytes,
                      ranks if len(ranks) <= 64 else (), in_splits, out_splits)


class Recorder(TorchDispatchMode):
    """Appends one ``TraceOp`` per dispatched operator to ``self.ops``."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[TraceOp] = []
        self.enabled = True  # False: the stand-ins work, nothing is recorded (a warm-up)

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if self.enabled and func.namespace != "prim":  # prim: fake tensors' metadata queries
            self.ops.append(self.describe(func, args, kwargs, out))
        return out

    def describe(self, func: Any, args: Any, kwargs: Any, out: Any) -> TraceOp:
        namespace = func.namespace
        packet = f"{namespace}.{func._overloadpacket.__name__}"
        name = f"{packet}.{func._overloadname}"
        ins, outs = _tensors((args, kwargs)), _tensors(out)
        shapes = (*(_describe(t) for t in ins[:MAX_SHAPES]), "->",
                  *(_describe(t) for t in outs[:MAX_SHAPES]))
        if namespace == "c10d":
            base = func._overloadpacket.__name__
            return TraceOp(name, "collective", "", 0, 0, 0, 0, shapes=shapes,
                           collective=_collective(base, args))
        tags = set(func.tags)
        sync = torch.Tag.data_dependent_output in tags or torch.Tag.dynamic_output_shape in tags
        if packet == "aten._local_scalar_dense":
            return TraceOp(name, "sync", "", 0, 0, 0, 0, sync=True, shapes=shapes)
        if packet in classes.NO_KERNEL or (_is_view(func) and not sync):
            return TraceOp(name, "view", "", 0, 0, 0, 0, shapes=shapes)
        kind = classes.kind_of(packet, torch.Tag.pointwise in tags
                               or packet.startswith("aten._foreach_"))
        written = sum(_nbytes(t) for t in outs)
        if not outs and func._schema.name.endswith("_") and args:  # in place, returns nothing
            written = sum(_nbytes(t) for t in _tensors(args[0]))
        inplace = bool(func._schema.returns) and all(
            r.alias_info is not None and r.alias_info.is_write for r in func._schema.returns)
        read = sum(_nbytes(t) for t in ins)
        if inplace and kind == "fill":
            read = 0
        dtypes = {DTYPE_NAMES.get(t.dtype, "") for t in ins}
        tensor_core = kind in ("gemm", "conv", "attention") and bool(dtypes & TENSOR_CORE)
        host = "sync" if sync else classes.host_class(kind)
        return TraceOp(name, host, kind, classes.kernels_of(packet), read, written,
                       _flops(func, args, kwargs, out), tensor_core, sync, shapes)


class HostSyncs(TorchFunctionMode):
    """Records ``.tolist()``, ``.cpu()`` and ``.numpy()``: device-to-host copies on a GPU."""

    def __init__(self, recorder: Recorder) -> None:
        super().__init__()
        self.recorder = recorder

    def __torch_function__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if func is torch.nn.functional.scaled_dot_product_attention:
            return self._attention(func, args, kwargs)
        if self.recorder.enabled and (name in SYNC_METHODS
                                      or (name == "to" and _to_host(args, kwargs))):
            tensors = _tensors(args[:1])
            nbytes = sum(_nbytes(t) for t in tensors)
            self.recorder.ops.append(TraceOp(f"Tensor.{name}", "sync", "copy", 1, nbytes,
                                             nbytes, 0, sync=True,
                                             shapes=tuple(_describe(t) for t in tensors)))
            return func(*args, **kwargs)
        if kwargs.get("device") is not None and "cuda" in str(kwargs["device"]):
            kwargs = {**kwargs, "device": "cpu"}
        return func(*args, **kwargs)


    def _attention(self, func: Any, args: Any, kwargs: Any) -> Any:
        """One fused attention kernel, as CUDA runs it (flash or memory-efficient), whatever
        the CPU's own implementation decomposes it into."""
        was = self.recorder.enabled
        self.recorder.enabled = False
        try:
            out = func(*args, **kwargs)
        finally:
            self.recorder.enabled = was
        if was:
            q, k, v = (args + (None,) * 3)[:3]
            q = kwargs.get("query", q)
            k = kwargs.get("key", k)
            v = kwargs.get("value", v)
            tensors = [t for t in (q, k, v) if isinstance(t, torch.Tensor)]
            if len(tensors) == 3:
                *batch, lq, d = q.shape
                lk, dv = k.shape[-2], v.shape[-1]
                heads = 1
                for n in batch:
                    heads *= int(n)
                flops = 2 * heads * int(lq) * int(lk) * (int(d) + int(dv))
                if kwargs.get("is_causal") or (len(args) > 5 and args[5]):
                    flops //= 2
                read = sum(_nbytes(t) for t in tensors)
                dtypes = {DTYPE_NAMES.get(t.dtype, "") for t in tensors}
                self.recorder.ops.append(TraceOp(
                    "aten.scaled_dot_product_attention", "library", "attention", 1, read,
                    sum(_nbytes(t) for t in _tensors(out)), flops, bool(dtypes & TENSOR_CORE),
                    shapes=tuple(_describe(t) for t in tensors)))
        return out


def _to_host(args: Any, kwargs: Any) -> bool:
    target = kwargs.get("device")
    for arg in args[1:]:
        if isinstance(arg, (str, torch.device)):
            target = arg
    return target is not None and str(target).startswith("cpu")


class _FakeStream:
    def synchronize(self) -> None:
        pass

    def wait_stream(self, _other: Any) -> None:
        pass


@contextlib.contextmanager
def recording(enabled: bool = True) -> Iterator[Recorder]:
    """Record inside the block; ``torch.cuda``'s device and synchronisation calls are stood in
    for (recorded as syncs) so that code written for a GPU runs on the CPU."""
    recorder = Recorder()
    recorder.enabled = enabled

    def synchronize(*_args: Any, **_kwargs: Any) -> None:
        if recorder.enabled:
            recorder.ops.append(
                TraceOp("torch.cuda.synchronize", "sync", "", 0, 0, 0, 0, sync=True))

    class Stream(_FakeStream):
        def synchronize(self) -> None:
            synchronize()

    patches = {"synchronize": synchronize, "current_device": lambda: "cpu",
               "current_stream": lambda *_a, **_k: Stream(), "is_available": lambda: False}
    saved = {key: getattr(torch.cuda, key) for key in patches}
    # multi-tensor (foreach) paths, which PyTorch takes for CUDA tensors only: optimizers,
    # gradient clipping
    import torch.optim.optimizer as optimizer
    import torch.utils._foreach_utils as foreach_utils

    devices = foreach_utils._get_foreach_kernels_supported_devices
    foreach_patch = {(optimizer, "_get_foreach_kernels_supported_devices"),
                     (foreach_utils, "_get_foreach_kernels_supported_devices")}
    try:
        for key, value in patches.items():
            setattr(torch.cuda, key, value)
        for module, name in foreach_patch:
            setattr(module, name, lambda: [*devices(), "cpu"])
        with HostSyncs(recorder), recorder:
            yield recorder
    finally:
        for key, value in saved.items():
            setattr(torch.cuda, key, value)
        for module, name in foreach_patch:
            setattr(module, name, devices)
