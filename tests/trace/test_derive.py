"""The reference at the point asked: exact at a traced point, else derived from at least three
traced points per parameter that differs (pkbsim.trace.derive), else the nearest point scaled,
with a warning."""

from __future__ import annotations

import pytest

from pkbsim import api
from pkbsim.sim.run import run_simulation
from pkbsim.task.loader import instantiate, load_task
from pkbsim.trace.derive import Traced, derive, fit, parse, template_of
from pkbsim.trace.format import Collective
from pkbsim.trace.program import KernelGroup, Program, Segment
from pkbsim.trace.store import Point, choose, instantiator


def seg(end: str = "end", coll: tuple[str, int, int] | None = None, bytes_: float = 0.0,
        flops: float = 0.0, kernels: float = 1.0, views: float = 1.0) -> Segment:
    groups = (KernelGroup("elementwise", False, bytes_, flops, kernels),) if kernels else ()
    return Segment((("view", views), ("kernel", kernels)) if kernels else (("view", views),),
                   groups, end, Collective(*coll) if coll else None)


def chunked(x: float, w: int = 8) -> Program:
    """A prefix, a chunk loop that runs ``x`` times (an all_to_all, then a kernel and an
    all_gather of a fixed size per chunk), and a last kernel whose bytes grow with ``x``."""
    body = [seg("collective", ("all_to_all", w, 2048), kernels=0),
            seg("collective", ("all_gather", w, 16), bytes_=4096.0, flops=1024.0)]
    return Program((seg("sync", bytes_=8.0), *[s for _ in range(int(x)) for s in body],
                    seg(bytes_=100.0 * x, flops=10.0 * x)))


def traced(x: float, w: int = 8, key: str = "M") -> Traced:
    return Traced((("W", float(w)), (key, x)), w, chunked(x, w))


def totals(program: Program) -> dict[str, float]:
    return program.totals()


def test_fits_pick_the_curve_that_goes_through_the_points() -> None:
    assert fit([1, 2, 4], [3, 3, 3]).model == "const"
    line = fit([1, 2, 4, 8], [0, 1, 3, 7])  # W - 1 rounds of a ring
    assert line.model == "linear" and line.move(7, 8, 64) == pytest.approx(63)
    power = fit([1024, 2048, 4096], [10, 40, 160])  # bytes of an M x M block
    assert power.model == "power" and power.move(160, 4096, 8192) == pytest.approx(640)


def test_a_loop_is_found_and_parsed_at_every_count() -> None:
    template = template_of("PABABABE")
    assert template == (("run", "P"), ("loop", "AB"), ("run", "E"))
    assert [parse(template, t) for t in ("PE", "PABE", "PABABABABE", "PAE")] == [
        [0], [1], [4], None]


def test_the_loop_grows_in_iterations_not_in_bytes_per_operator() -> None:
    base, mid, far = traced(4), traced(2), traced(1)
    out = derive(base, {"M": [far, mid, base]}, (("W", 8.0), ("M", 16.0)))
    assert out is not None
    want = chunked(16)
    assert totals(out.program) == pytest.approx(totals(want))
    # each chunk's collective keeps its size; only the count grew (times folded or unrolled)
    sizes = {s.collective.bytes for s in out.program.segments if s.collective}
    assert sizes == {2048, 16}
    assert totals(out.program)["collective"] == 32
    between = derive(base, {"M": [far, mid, base]}, (("W", 8.0), ("M", 3.0)))
    assert between is not None and totals(between.program)["collective"] == 6


def test_bytes_per_kernel_and_a_count_linear_in_w() -> None:
    """A ring: W - 1 rounds of a send whose bytes shrink as 1/W; one kernel whose bytes grow
    with W. Traced at W = 1, 2, 4, 8, derived at 32."""
    def ring(w: int) -> Traced:
        rounds = [seg("collective", ("send", w, 65536 // w), kernels=0)] * (w - 1)
        return Traced((("W", float(w)),), w,
                      Program((seg("sync", bytes_=64.0 * w), *rounds, seg(bytes_=8.0))))
    points = [ring(w) for w in (1, 2, 4, 8)]
    out = derive(points[-1], {"W": points}, (("W", 32.0),))
    assert out is not None
    sends = [s for s in out.program.segments if s.collective]
    assert sum(s.times for s in sends) == 31
    assert {(s.collective.bytes, s.collective.group_size) for s in sends} == {(2048, 32)}
    assert out.program.segments[0].kernels[0].bytes == pytest.approx(64 * 32)


def test_structures_that_do_not_fit_one_template_are_refused() -> None:
    odd = Traced((("W", 8.0), ("M", 3.0)), 8,
                 Program((seg("collective", ("all_reduce", 8, 4)), seg())))
    assert derive(traced(4), {"M": [traced(1), odd, traced(4)]},
                  (("W", 8.0), ("M", 16.0))) is None


def grpo_points(*ms: float) -> tuple[Point, ...]:
    return tuple(Point(8, (("M", m),), chunked(m / 1024)) for m in ms)


def test_choose_exact_derived_and_the_fallback_that_warns() -> None:
    spec = load_task("grpo")
    inst = instantiate(spec, 8, "pkb", {"M": 3072})
    at = instantiator(inst)
    exact = choose(instantiate(spec, 8, "pkb", {"M": 2048}), grpo_points(1024, 2048, 4096),
                   at)
    assert exact is not None and exact.how == "exact"
    assert exact.program == chunked(2)
    assert exact.describe() == "traced (W = 8, M=2048)"
    derived = choose(inst, grpo_points(1024, 2048, 4096), at)
    assert derived is not None and derived.how == "derived" and not derived.warning
    assert totals(derived.program)["collective"] == 6  # three chunks
    assert "from traced points W = 8: M=1024, 2048, 4096" in derived.describe()
    assert derived.to_dict()["points"] == [{"world_size": 8, "set": {"M": m}}
                                           for m in (4096.0, 1024.0, 2048.0)]
    two = choose(inst, grpo_points(1024, 2048), at)
    assert two is not None and two.how == "scaled"
    assert "fewer than 3 traced points along M" in two.warning
    assert "warning: derivation not possible" in two.describe()


def test_grpo_at_w8_grows_with_its_chunk_loop() -> None:
    times = []
    for m in (1024, 2048, 3072, 4096):
        r = run_simulation("grpo", "nccl_reference", "dgx-h100", 8, "pkb", {"M": str(m)})
        assert r.strategy.program is not None
        times.append(r.predicted_us)
    assert times == sorted(times) and times[-1] > 3 * times[0]
    chosen = r.strategy.program
    assert chosen is not None and chosen.how == "exact"


@pytest.mark.parametrize("task", ["54", "55", "56"])
def test_ring_attention_production_is_not_below_its_roofline(task: str) -> None:
    report = api.analyze(task, preset="production", trace_on_demand=False)
    ref = report.result.predictions["nccl_reference"]
    if task == "56":  # its traced later stage waits for work its trace lacks: the task file's ops
        assert ref.strategy.program is None
    else:
        assert ref.strategy.program is not None and ref.strategy.program.how == "exact"
    assert ref.predicted_us * 1e-6 >= report.result.roofline.t_roof_s


def test_a_size_the_inputs_cap_is_the_traced_point() -> None:
    """PKB's GRPO inputs stop growing at M = 4096: M = 8192 is that task exactly."""
    r = run_simulation("grpo", "nccl_reference", "dgx-h100", 8, "pkb", {"M": "8192"})
    chosen = r.strategy.program
    assert chosen is not None and chosen.how == "equivalent"
    assert chosen.describe().startswith("traced (W = 8, M=4096; the task file gives")


def test_parameters_that_interact_are_not_composed() -> None:
    """GRPO's chunk count depends on W and M together (4 chunks at W = 1 for every M, 1 to 4 at
    W = 8): without the W = 8, M = 4096 point, composing M's fit at W = 1 with W's fit at
    M = 1024 would keep one chunk. The task file's own counts, composed the same way, miss its
    value there, so that derivation is refused."""
    from pkbsim.trace.store import load_points

    spec = load_task("grpo")
    inst = instantiate(spec, 8, "pkb", {"M": 4096})
    points = tuple(p for p in load_points(spec.key)
                   if (p.world_size, p.sets) != (8, (("M", 4096.0),)))
    chosen = choose(inst, points, instantiator(inst))
    assert chosen is not None and chosen.how == "scaled"
    assert "its parameters interact" in chosen.warning
