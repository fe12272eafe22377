"""The recorder and the worker in this process (needs torch): what each operator is classed as,
and a fake-tensor trace at four ranks written by the worker's own entry point."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from paths import DATA

torch = pytest.importorskip("torch")


def test_operators_are_classed_and_measured() -> None:
    from pkbsim.trace.recorder import recording

    x = torch.randn(64, 32, dtype=torch.bfloat16)
    with recording() as rec:
        y = x @ x.T
        y.float().softmax(-1).sum().item()
        (y > 0).nonzero()
        y[:2].tolist()
        y.sort(-1)
        torch.zeros(3, device="cuda")  # stands in on the CPU
        torch.cuda.synchronize()
        q = torch.randn(1, 2, 16, 8)
        torch.nn.functional.scaled_dot_product_attention(q, q, q)
    ops = {(o.op, o.host_class) for o in rec.ops}
    assert ("aten.mm.default", "library") in ops
    assert ("aten.permute.default", "view") in ops
    assert ("aten._local_scalar_dense.default", "sync") in ops
    assert ("aten.nonzero.default", "sync") in ops
    assert ("Tensor.tolist", "sync") in ops
    assert ("torch.cuda.synchronize", "sync") in ops
    assert ("aten.scaled_dot_product_attention", "library") in ops
    mm = next(o for o in rec.ops if o.op == "aten.mm.default")
    assert mm.flops == 2 * 64 * 64 * 32 and mm.tensor_core and mm.kind == "gemm"
    assert mm.read_bytes == 2 * 64 * 32 * 2 and mm.write_bytes == 64 * 64 * 2
    sort = next(o for o in rec.ops if o.op == "aten.sort.default")
    assert sort.kind == "sort" and sort.kernels == 3
    attention = [o for o in rec.ops if o.kind == "attention"]
    assert len(attention) == 1  # one fused kernel, not the CPU's decomposition


def test_optimizers_take_the_multi_tensor_path() -> None:
    from pkbsim.trace.recorder import recording

    params = [torch.nn.Parameter(torch.randn(4, 4)) for _ in range(3)]
    for p in params:
        p.grad = torch.ones_like(p)
    opt = torch.optim.Adam(params)
    with recording() as rec:
        opt.step()
    names = [o.op for o in rec.ops]
    assert any(n.startswith("aten._foreach_") for n in names)
    foreach = next(o for o in rec.ops if o.op.startswith("aten._foreach_"))
    assert foreach.host_class == "kernel" and foreach.kind == "elementwise"


def test_the_worker_traces_with_fake_tensors_in_process(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from pkbsim.trace import worker
    from pkbsim.trace.format import load_trace

    fn = DATA / "trace" / "user_fn.py"
    for name in ("no_sync", "step"):
        monkeypatch.setattr(sys, "argv", [
            "worker", "--world-size", "4", "--port", "0", "--out-dir", str(tmp_path),
            "--fake", "--function", f"{fn}:{name}", "--set", "m=4096", "--set", "k=4096",
            "--set", "n=4096", "--timeout-s", "60"])
        worker.main()
    trace = load_trace(tmp_path / "user_fn.no_sync.json")
    coll = next(o.collective for o in trace.ops if o.collective is not None)
    assert coll.group_size == 4 and coll.bytes == 4096 * 4096 * 4
    assert trace.meta["mode"] == "fake" and trace.meta["params"]["m"] == 4096
    status = json.loads((tmp_path / "status" / "user_fn.step.0.json").read_text())
    assert status["status"] == "error" and "DataDependent" in status["error"]
