"""The abstract evaluator of branch tests: values and verdicts under a profile."""

from __future__ import annotations

import ast
import textwrap

import pytest

from pkbsim.inspection.profile import (
    FALSE,
    TRUE,
    UNKNOWN,
    VARIES,
    Const,
    DType,
    Profile,
    Tensor,
    join,
    truth,
)
from pkbsim.inspection.python_model import PythonModel

HEAD = "import os, math, functools, random\nimport torch\nimport torch.distributed as dist\n"


def verdict(expr: str, body: str = "", **profile: object) -> object:
    """The verdict of ``expr`` as a test inside solution(x), after ``body``."""
    code = HEAD + textwrap.dedent(body) + f"\ndef solution(x, flag=False, *, n: int = 4):\n" \
        f"    return {expr}\n"
    py = PythonModel(ast.parse(code), Profile(**profile))  # type: ignore[arg-type]
    fn = py.solutions[0]
    ret = fn.body[-1]
    assert isinstance(ret, ast.Return) and ret.value is not None
    return py.ev.test(ret.value, fn)


@pytest.mark.parametrize(("expr", "expected"), [
    ("x.dtype == torch.bfloat16", TRUE), ("x.dtype is torch.half", FALSE),
    ("x.dtype in (torch.float16, torch.bfloat16)", TRUE),
    ("x.dtype.itemsize == 2", TRUE), ("x.dtype.is_floating_point", TRUE),
    ("x.is_floating_point()", TRUE), ("x.element_size() * x.numel() == 2 * 1024 * 1024", TRUE),
    ("x.nbytes == 2097152 and x.itemsize == 2", TRUE), ("x.ndim == 2 and x.dim() == 2", TRUE),
    ("x.size(0) == 1024 and x.size() == (1024, 1024) and x.size(5) == 1", UNKNOWN),
    ("x.shape[-1] % 128 == 0", TRUE), ("x.view(-1).numel() == 1 << 20", TRUE),
    ("x.reshape(8, -1).shape[1] == 131072", TRUE), ("x.flatten().shape == (1048576,)", TRUE),
    ("x.reshape(3, -1).shape[1] > 0", UNKNOWN),  # 3 does not divide 1024 * 1024
    ("x.float().dtype == torch.float32", TRUE), ("x.to(torch.float16).dtype == torch.half", TRUE),
    ("x.half().dtype != torch.float16", FALSE), ("x.contiguous().is_contiguous()", TRUE),
    ("x.storage_offset() == 0", TRUE), ("x.data_ptr() & 15 == 0", TRUE),
    ("x.data_ptr() % 512 == 0", UNKNOWN),  # the allocator promises 256 bytes only
    ("x.is_cuda and x.device.type == 'cuda'", TRUE),
    ("torch.cuda.get_device_capability()[0] >= 9", TRUE), ("torch.cuda.is_bf16_supported()", TRUE),
    ("torch.is_tensor(x) and isinstance(x, torch.Tensor)", TRUE), ("isinstance(x, int)", FALSE),
    ("dist.get_backend() == 'nccl'", TRUE), ("dist.get_rank() == 0", VARIES),
    ("int(os.environ['WORLD_SIZE']) == 8", TRUE), ("os.environ['RANK'] == '0'", VARIES),
    ("os.environ.get('LOCAL_RANK') == '0'", VARIES), ("os.getenv('MY_FLAG') is None", TRUE),
    ("os.environ.get('MY_FLAG', '1') == '1'", TRUE), ("os.environ['MY_FLAG'] == '1'", UNKNOWN),
    ("math.isinf(float('inf')) and math.sqrt(16) == 4 and math.inf > 1e308", TRUE),
    ("math.log2(-1) > 0", UNKNOWN), ("len(x.shape) == 2 and max(1, 2) == 2 and abs(-3) == 3", TRUE),
    ("min(x.shape) == 1024 and tuple(x.shape) == (1024, 1024)", TRUE),
    ("bool(n) and n == 4 and not flag", TRUE), ("flag or n > 10", FALSE),
    ("x.abs().max() > 1", UNKNOWN), ("random.random() < 0.5", UNKNOWN),
    ("dist.get_rank() == 0 and x.abs().max() > 1", UNKNOWN), ("dist.get_rank() == 0 or True", TRUE),
    ("-n < 0", TRUE), ("(x @ x).dtype == torch.bfloat16", TRUE),
    ("torch.matmul(x, x).dtype == torch.bfloat16", TRUE), ("(x * 2).dtype == torch.bfloat16", TRUE),
    ("torch.empty(4, 4).dtype == torch.float32", TRUE),
    ("torch.zeros_like(x, dtype=torch.int8).dtype == torch.int8", TRUE),
    ("torch.empty((2, 3), dtype=torch.float16).numel() == 6", TRUE),
    ("__name__ == '__main__'", FALSE), ("x.T.dtype == torch.bfloat16", TRUE),
    ("x if x.dtype == torch.bfloat16 else None", UNKNOWN), ("(y := 3) == 3", TRUE),
    ("'a' < 1", UNKNOWN), ("{1: 2}[3] == 2", UNKNOWN),
])
def test_values_under_the_pkb_profile(expr: str, expected: object) -> None:
    assert verdict(expr) is expected


@pytest.mark.parametrize(("body", "expr", "expected"), [
    ("SUPPORTED = {torch.bfloat16: 'bf16'}\n", "SUPPORTED.get(x.dtype) == 'bf16'", TRUE),
    ("SUPPORTED = {torch.float32: 'fp32'}\n", "SUPPORTED.get(x.dtype) is None", TRUE),
    ("SUPPORTED = {torch.float32: 'fp32'}\n", "SUPPORTED.get(x.dtype, 'x') == 'x'", TRUE),
    ("T = (1, 2, 3)\n", "T[1] == 2 and T[-1] == 3", TRUE),
    ("USE = os.environ.get('USE_X', '0') == '1'\n", "USE", FALSE),
    ("def _ok(t):\n    if not t.is_cuda:\n        return False\n"
     "    return t.dtype == torch.bfloat16\n", "_ok(x)", TRUE),
    ("def _many(t):\n    for _ in range(2):\n        return 1\n    return 2\n",
     "_many(x) == 1", UNKNOWN),
    ("def _none(t):\n    return\n", "_none(x) is None", UNKNOWN),
    ("_p = functools.partial(math.sqrt, 4)\n", "_p is None", FALSE),
    ("OPS = []\nOPS.append(1)\n", "OPS", UNKNOWN),
    ("class C:\n    pass\n", "C is not None", UNKNOWN),
])
def test_module_names(body: str, expr: str, expected: object) -> None:
    assert verdict(expr, body) is expected


def test_the_profile_changes_the_answers() -> None:
    assert verdict("x.dtype == torch.float32", dtype="float32") is TRUE
    assert verdict("x.numel() == 64", shape=(8, 8)) is TRUE
    assert verdict("dist.get_world_size() == 2", world_size=2) is TRUE
    assert verdict("torch.cuda.get_device_capability() >= (10, 0)", capability=(10, 0)) is TRUE


def test_bad_profiles_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown dtype"):
        Profile(dtype="fp99")
    with pytest.raises(ValueError, match="world size 0"):
        Profile(world_size=0)
    assert "world size 8" in Profile().describe()


def test_join_and_truth() -> None:
    assert join([]) is UNKNOWN
    assert join([Const(1), Const(1)]) == Const(1)
    assert join([Tensor("bfloat16", (2,)), Tensor("bfloat16", (3,))]) == Tensor("bfloat16", None)
    assert join([Tensor("bfloat16", None), Tensor("float32", None)]) == Tensor(None, None)
    assert join([VARIES, Const(1)]) is VARIES
    assert join([Const(1), DType("bfloat16")]) is UNKNOWN
    assert truth(Const(0)) is FALSE and truth(DType("int8")) is TRUE
    assert truth(Tensor("bfloat16", None)) is UNKNOWN and truth(VARIES) is VARIES


def test_loops_and_reassignments() -> None:
    body = ("def solution(x):\n    step = 0\n    while step < 4:\n        step += 1\n"
            "    for t in (x, x.contiguous()):\n        pass\n    x = x.contiguous()\n"
            "    return step, t, x\n")
    py = PythonModel(ast.parse(HEAD + body))
    fn = py.solutions[0]
    assert py.ev.name("step", fn) is VARIES  # a counter in a loop differs between iterations
    assert py.ev.name("t", fn) == Tensor("bfloat16", (1024, 1024))
    assert py.ev.name("x", fn) == Tensor("bfloat16", (1024, 1024))  # x = x.contiguous()


def test_match_cases() -> None:
    code = HEAD + textwrap.dedent("""\
        def solution(x):
            match x.dtype:
                case torch.float32 | torch.float16:
                    dist.all_reduce(x)
                case torch.bfloat16 if x.numel() > 0:
                    dist.broadcast(x, 0)
                case _:
                    dist.barrier()
            match dist.get_rank():
                case 0:
                    dist.send(x, 1)
            return x
    """)
    py = PythonModel(ast.parse(code))
    paths = {n.lineno - HEAD.count("\n"): r.path.label for n, r in py.nodes()
             if isinstance(n, ast.Call) and py.dotted(n.func) in (
                 "torch.distributed.all_reduce", "torch.distributed.broadcast",
                 "torch.distributed.barrier", "torch.distributed.send")}
    assert paths == {4: "fallback", 6: "hot", 8: "fallback", 11: "hot"}
