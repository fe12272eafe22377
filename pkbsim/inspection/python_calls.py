"""Python and Triton detectors: torch.distributed on the hot path, syncs, barriers, rendezvous,
streams, library mechanisms, literal grids, symmetric-memory peer tensors and Triton kernels."""

from __future__ import annotations

import ast
import math

from pkbsim.inspection.call_sites import CallSite
from pkbsim.inspection.device_source import DeviceSource
from pkbsim.inspection.evidence import EvidenceLog
from pkbsim.inspection.patterns import (
    DIST_HOST_BARRIER,
    MAX_CAPPED_GRID_BLOCKS,
    OWN_RANK,
    PEER_NAME,
    PY_CHUNKING,
    PY_HANDLE_BARRIER,
    PY_PEER_POINTERS,
    PY_RENDEZVOUS,
    PY_STREAM,
    PY_SYNC,
    PY_SYNC_NO_ARGS,
    PY_TK,
    SLICE_NAME,
    SM_PEER_PTRS,
    SYMM_FUSED,
    SYMM_OPS,
    TRITON_BARRIER,
    TRITON_COMPUTE,
    WORLD_NAME,
)
from pkbsim.inspection.python_model import (
    Function,
    PythonModel,
    assigned_names,
    last_name,
    reads_names,
    unparse,
)


def python_calls(py: PythonModel, ev: EvidenceLog, sites: list[CallSite]) -> list[str]:
    """torch.distributed on the hot path, host syncs and barriers, rendezvous, streams,
    chunking, library mechanisms, literal grids. Returns nccl_on_hot_path in line order."""
    nccl: dict[str, int] = {}  # entry -> first line
    for site in sites:
        if site.path != "hot":
            continue
        if site.kind in ("nccl_payload", "nccl_metadata"):
            entry = site.call if site.kind == "nccl_payload" else f"{site.call} (metadata)"
            nccl[entry] = min(nccl.get(entry, site.line), site.line)
            ev.add("nccl_on_hot_path", site.line)
            if site.call in DIST_HOST_BARRIER:
                ev.add("host_barrier_per_call", site.line)
        if site.kind in ("nccl_payload", "copy_engine"):
            ev.add(site.kind, site.line)
    for node, region in py.nodes():
        if isinstance(node, ast.Attribute) and node.attr in PY_PEER_POINTERS and region.reached:
            ev.add(SM_PEER_PTRS, node.lineno)
        if not isinstance(node, ast.Call):
            continue
        name = py.dotted(node.func) or ""
        short = name.rsplit(".", 1)[-1] if name else last_name(node.func)  # `ar` -> all_reduce
        if region.per_call:
            _per_call_flags(node, name, short, ev)
        if region.reached:
            _library_mechanisms(node, name, short, ev)
            _overlap(node, name, short, ev)
            _python_grid(py, node, region.function, ev)
    communicating = py.communicating()
    for loop in py.loops:
        if _chunk_loop(loop) and any(
                py.moves_data(n) or any(f in communicating for f in py.callees(n))
                for s in loop.body for n in ast.walk(s) if isinstance(n, ast.Call)):
            ev.add("overlap_attempt", loop.lineno)
    return sorted(nccl, key=lambda entry: (nccl[entry], entry))


def _per_call_flags(call: ast.Call, name: str, short: str, ev: EvidenceLog) -> None:
    line = call.lineno
    if short in PY_SYNC or (short in PY_SYNC_NO_ARGS and isinstance(call.func, ast.Attribute)
                            and not call.args and not call.keywords):
        ev.add("host_sync", line)
    if short in PY_RENDEZVOUS or name == "torch.distributed._symmetric_memory.empty":
        ev.add("per_call_rendezvous", line)
    if (short in PY_HANDLE_BARRIER and isinstance(call.func, ast.Attribute)
            and not name.startswith("torch.distributed")):
        ev.add("device_barrier", line)


def _library_mechanisms(call: ast.Call, name: str, short: str, ev: EvidenceLog) -> None:
    line = call.lineno
    if short in PY_TK:
        ev.add("tk_pgl", line)
    if "nvshmem" in name.lower() or (name.startswith(SYMM_OPS) and short.endswith("_vdev")):
        ev.add("nvshmem", line)
    if short in PY_PEER_POINTERS:
        ev.add(SM_PEER_PTRS, line)
    if not name.startswith(SYMM_OPS) and short not in SYMM_FUSED:
        return
    if "multimem" in short:
        ev.add("nvls_multimem", line)
    elif "one_shot" in short or "two_shot" in short:
        ev.add("sm_peer_ldst", line)
    if "one_shot" in short:
        ev.add("one_shot", line)
    if short in SYMM_FUSED:
        ev.add("fused_comm_compute", line)


def _overlap(call: ast.Call, name: str, short: str, ev: EvidenceLog) -> None:
    async_op = any(k.arg == "async_op" and isinstance(k.value, ast.Constant) and k.value.value
                   for k in call.keywords)
    if name in PY_STREAM or short in ("wait_stream", "wait_event") or async_op:
        ev.add("overlap_attempt", call.lineno)


def _chunk_loop(node: ast.For | ast.AsyncFor) -> bool:
    """A loop over chunks: ``for c in x.chunk(n)``, ``for i in range(num_chunks)``."""
    text = f"{unparse(node.target)} {unparse(node.iter)}"
    splits = any(isinstance(n, ast.Call) and last_name(n.func) in PY_CHUNKING
                 for n in ast.walk(node.iter))
    return splits or "chunk" in text.lower()


def _line(node: ast.AST, py: PythonModel) -> int:
    while not hasattr(node, "lineno"):
        node = py.parents[node]
    return int(getattr(node, "lineno"))  # noqa: B009 - ast nodes type lineno loosely


def _python_grid(py: PythonModel, call: ast.Call, fn: Function | None, ev: EvidenceLog) -> None:
    """Literal launch grids: ``kernel[(4,)](...)``, ``grid=(8,)``, cupy ``k((8,), (256,), a)``."""
    grid: ast.AST | None = None
    block: ast.AST | None = None
    if isinstance(call.func, ast.Subscript) and isinstance(call.func.value, ast.Name) and (
            call.func.value.id in {f.name for f in py.jit} or isinstance(call.func.slice,
                                                                         ast.Tuple)):
        grid = call.func.slice
    elif any(k.arg == "grid" for k in call.keywords):
        grid = next(k.value for k in call.keywords if k.arg == "grid")
        block = next((k.value for k in call.keywords if k.arg == "block"), None)
    elif len(call.args) >= 3 and all(isinstance(a, ast.Tuple) for a in call.args[:2]):
        grid, block = call.args[0], call.args[1]
    blocks = _py_literal(py, grid, fn) if grid is not None else None
    threads = _py_literal(py, block, fn) if block is not None else None
    if blocks is not None and blocks < MAX_CAPPED_GRID_BLOCKS and (blocks, threads) != (1, 1):
        ev.add("grid_capped", call.lineno)


def _py_literal(py: PythonModel, node: ast.AST, fn: Function | None, depth: int = 0) -> int | None:
    """The product of a literal grid: an int, a tuple of ints, a lambda or a name bound once."""
    if depth > 3:
        return None
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.Tuple | ast.List) and node.elts:
        sizes = [_py_literal(py, e, fn, depth + 1) for e in node.elts]
        return math.prod(s for s in sizes if s is not None) if None not in sizes else None
    if isinstance(node, ast.Lambda):
        return _py_literal(py, node.body, fn, depth + 1)
    if isinstance(node, ast.Name):
        scopes: list[ast.AST] = [s for s in (fn, py.tree) if s is not None]
        for scope in scopes:
            values = [a.value for a in ast.walk(scope) if isinstance(a, ast.Assign)
                      and any(isinstance(t, ast.Name) and t.id == node.id for t in a.targets)]
            if values:
                return _py_literal(py, values[0], fn, depth + 1) if len(values) == 1 else None
    return None


def python_peers(py: PythonModel, ev: EvidenceLog) -> None:
    """Peer tensors from symmetric memory (``hdl.get_buffer(peer, ...)``): copied with copy_
    (copy engine), used in torch arithmetic (SM loads), read whole in a loop over all ranks."""
    peers: set[str] = set()
    for node, region in py.nodes():
        if region.reached and isinstance(node, ast.Assign) and any(
                _is_peer_buffer(n) for n in ast.walk(node.value)):
            peers |= assigned_names(node)

    def mentions(node: ast.AST) -> bool:
        return any(_is_peer_buffer(n) or (isinstance(n, ast.Name) and n.id in peers)
                   for n in ast.walk(node))

    for node, region in py.nodes():
        if not region.reached:
            continue
        if isinstance(node, ast.BinOp | ast.AugAssign) and any(
                mentions(o) for o in _operands(node)):
            ev.add("sm_peer_ldst", node.lineno)
        elif isinstance(node, ast.comprehension):
            _python_one_shot(py, node, ev)
    for loop in py.loops:
        _python_one_shot(py, loop, ev)


def _operands(node: ast.BinOp | ast.AugAssign) -> list[ast.expr]:
    return [node.left, node.right] if isinstance(node, ast.BinOp) else [node.value]


def _is_peer_buffer(node: ast.AST) -> bool:
    """``x.get_buffer(p, ...)`` where p is not this rank."""
    return (isinstance(node, ast.Call) and last_name(node.func) == "get_buffer" and bool(node.args)
            and not OWN_RANK.search(unparse(node.args[0])))


def _python_one_shot(py: PythonModel, loop: ast.For | ast.AsyncFor | ast.comprehension,
                     ev: EvidenceLog) -> None:
    """A loop over every rank reading each peer's whole buffer (shape not divided per rank)."""
    if not (isinstance(loop.target, ast.Name) and WORLD_NAME.search(unparse(loop.iter))):
        return
    var = loop.target.id
    scope: ast.AST = py.parents[loop] if isinstance(loop, ast.comprehension) else loop
    for node in ast.walk(scope):
        if not (_is_peer_buffer(node) and isinstance(node, ast.Call)
                and unparse(node.args[0]) == var):
            continue
        written = (isinstance(py.parents.get(node), ast.Attribute)
                   and last_name(py.parents[node]) == "copy_")
        sliced = any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.FloorDiv | ast.Div)
                     for a in node.args[1:] for n in ast.walk(a))
        if not written and not sliced and not SLICE_NAME.search(unparse(node)):
            ev.add("one_shot", _line(loop, py))
            ev.add("one_shot", node.lineno)


# --- Triton kernels ----------------------------------------------------------------------------

def triton_kernels(py: PythonModel, ev: EvidenceLog, sources: list[DeviceSource]) -> None:
    for fn in py.jit:
        params = {a.arg for a in fn.args.args}
        peers = {p for p in params if PEER_NAME.search(p)}
        aranges: set[str] = set()
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign):
                names = {t.id for t in node.targets if isinstance(t, ast.Name)}
                if any(last_name(n.func) == "pointer_type" for n in ast.walk(node.value)
                       if isinstance(n, ast.Call)):
                    peers |= names
                if any((isinstance(n, ast.Call) and last_name(n.func) == "arange")
                       or (isinstance(n, ast.Name) and n.id in aranges)
                       for n in ast.walk(node.value)):
                    aranges |= names
        peer_lines: list[int] = []
        compute_lines: list[int] = []
        for node in ast.walk(fn):
            if not isinstance(node, ast.Call):
                continue
            name, short = py.dotted(node.func) or "", last_name(node.func)
            if short in TRITON_BARRIER or (short.startswith("atomic_") and any(
                    k.arg == "scope" and isinstance(k.value, ast.Constant)
                    and k.value.value == "sys" for k in node.keywords)):
                ev.add("device_barrier", node.lineno)
            if name.startswith("triton.language") and short in TRITON_COMPUTE:
                compute_lines.append(node.lineno)
            pointer = node.args[0] if node.args else None
            if (short in ("load", "store") or short.startswith("atomic_")) and pointer is not None \
                    and name.startswith("triton.language") and reads_names(pointer, peers):
                peer_lines.append(node.lineno)
                ev.add("sm_peer_ldst", node.lineno)
                if _strided(pointer, aranges):
                    ev.add("uncoalesced_peer", node.lineno)
        _triton_one_shot(fn, peers, ev)
        end = fn.end_lineno or fn.lineno
        peer_lines += [line for src in sources for line in src.peer_lines
                       if fn.lineno <= line <= end]
        if peer_lines and compute_lines:
            ev.add("fused_comm_compute", min(peer_lines))
            ev.add("fused_comm_compute", min(compute_lines))


def _strided(pointer: ast.AST, aranges: set[str]) -> bool:
    """``ptr + offs * stride``: an arange-derived offset multiplied by something other than 1."""
    for n in ast.walk(pointer):
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mult):
            sides = (n.left, n.right)
            lane = [s for s in sides if (isinstance(s, ast.Name) and s.id in aranges)
                    or (isinstance(s, ast.Call) and last_name(s.func) == "arange")]
            other = [s for s in sides if s not in lane]
            if lane and other and not (isinstance(other[0], ast.Constant)
                                       and other[0].value == 1):
                return True
    return False


def _triton_one_shot(fn: Function, peers: set[str], ev: EvidenceLog) -> None:
    for loop in ast.walk(fn):
        if not (isinstance(loop, ast.For) and WORLD_NAME.search(unparse(loop.iter))):
            continue
        local = set(peers)
        for node in ast.walk(loop):
            if isinstance(node, ast.Assign) and reads_names(node.value, local):
                local |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        for node in ast.walk(loop):
            # a data load through a peer pointer, not the pointer-table load ptrs + i
            if (isinstance(node, ast.Call) and last_name(node.func) == "load" and node.args
                    and reads_names(node.args[0], local) and not SLICE_NAME.search(unparse(node))
                    and not reads_names(node.args[0], {last_name(loop.target)})):
                ev.add("one_shot", loop.lineno)
                ev.add("one_shot", node.lineno)
