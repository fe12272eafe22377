"""Fabric kinds (topologies/fabrics/<kind>.yaml): what a step of NCCL over each kind of fabric
costs beyond NCCL's own tuner constant. A property of the fabric, shared by every topology on
it: scale-up kinds (nvswitch, pcie) and scale-out kinds (infiniband, roce, efa, tcpxo, tcpx,
ethernet, nvlink). Values come from public figures or from one global fit per kind on the fit
half of the published nccl-tests tables (benchmarks/nccl_tests_published.py --fit).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from pkbsim.datafiles import data_dir
from pkbsim.errors import TopologyError
from pkbsim.fields import Fields, load_yaml

SCALE_UP_KINDS = ("nvswitch", "pcie")
PROTOCOLS = ("LL", "LL128", "Simple")  # NCCL's
SCALE_OUT_KINDS = ("infiniband", "roce", "efa", "tcpxo", "tcpx", "ethernet", "nvlink")


@dataclass(frozen=True)
class FabricKind:
    kind: str
    scope: str  # scale_up or scale_out
    description: str
    # per NCCL step over this fabric, beyond NCCL's tuner constant: scale-up kinds by protocol
    # (LL, LL128, Simple), scale-out kinds one value (twice for Simple, NCCL's flush)
    step_latency_us: float
    source: str
    step_latency_by_protocol_us: tuple[tuple[str, float], ...] = ()

    def protocol_steps_us(self) -> dict[str, float]:
        return dict(self.step_latency_by_protocol_us)


def kinds_dir() -> str:
    return str(data_dir("topologies") / "fabrics")


@lru_cache(maxsize=1)
def fabric_kinds() -> dict[str, FabricKind]:
    """Every shipped fabric kind, checked once."""
    out: dict[str, FabricKind] = {}
    for kind in (*SCALE_UP_KINDS, *SCALE_OUT_KINDS):
        path = data_dir("topologies") / "fabrics" / f"{kind}.yaml"
        data, _sha = load_yaml(path, TopologyError)
        f = Fields(data, str(path), "", TopologyError)
        name = f.text("kind", choices=(kind,))
        scope = f.text("scope", choices=("scale_up" if kind in SCALE_UP_KINDS
                                         else "scale_out",))
        if scope == "scale_up":
            steps = protocol_steps(f.sub("step_latency_us"))
            out[kind] = FabricKind(name, scope, f.text("description"), 0.0, f.text("source"),
                                   tuple(steps.items()))
        else:
            out[kind] = FabricKind(name, scope, f.text("description"),
                                   f.num("step_latency_us", lo=0), f.text("source"))
        f.done()
    return out


def protocol_steps(f: Fields) -> dict[str, float]:
    """A mapping of NCCL protocol to microseconds (every protocol named)."""
    out = {p: f.num(p, lo=0) for p in PROTOCOLS}
    f.done()
    return out


def step_latency_us(kind: str) -> float:
    return fabric_kinds()[kind].step_latency_us


def protocol_step_latency_us(kind: str) -> dict[str, float]:
    return fabric_kinds()[kind].protocol_steps_us()
