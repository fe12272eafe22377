"""Links of a topology and the route a byte takes between two GPUs.

Each GPU has an egress and an ingress port per link kind; the two directions are independent.
An NVSwitch is one non-blocking stage, so GPU-to-GPU traffic loads only the sender's egress
and the receiver's ingress. PCIe-only machines add the switch uplinks and the socket link.
Between nodes a byte leaves by a NIC (by its rail's NIC on a rail-optimized fabric, NCCL's PXN)
and crosses the tier above the leaves only when it changes rail or the fabric is not
rail-optimized; that tier is modelled only when oversubscribed.
"""

from __future__ import annotations

from dataclasses import dataclass

from pkbsim.collectives.base import SWITCH
from pkbsim.topology.schema import Topology
from pkbsim.units import GB

SCALE_UP, PCIE, UPLINK, SOCKET, NIC = "scale_up", "pcie", "pcie_uplink", "socket", "nic"
UPLINK_NET = "net_uplink"  # a node's share of the network tier above its leaf switches


@dataclass(frozen=True)
class Link:
    id: str
    kind: str
    line_Bps: float  # line rate, one direction


class Fabric:
    """Routes for ``world_size`` ranks placed node by node (rank r on node r // gpus)."""

    def __init__(self, topo: Topology) -> None:
        self.topo = topo
        self._links: dict[str, Link] = {}
        self._routes: dict[tuple[int, int], tuple[str, ...]] = {}
        # per-link bytes of a 1-byte buffer, by (algorithm, placement): filled by the roofline
        self.unit_loads: dict[tuple[object, ...], dict[str, float]] = {}
        # seconds of one collective call simulated alone, by its full description: filled by
        # the simulator's custom_best strategy
        self.call_times: dict[tuple[object, ...], float] = {}

    def link(self, link_id: str) -> Link:
        return self._links[link_id]

    def like(self, link_id: str, model: str) -> str:
        """Register ``link_id`` as a link of the same kind and rate as ``model`` (a link of
        another GPU or node standing in for it by symmetry: pkbsim.symmetry)."""
        if link_id not in self._links:
            found = self._links[model]
            self._links[link_id] = Link(link_id, found.kind, found.line_Bps)
        return link_id

    def _add(self, link_id: str, kind: str, gbps: float) -> str:
        if link_id not in self._links:
            self._links[link_id] = Link(link_id, kind, gbps * GB)
        return link_id

    def _port(self, rank: int, direction: str) -> str:
        t = self.topo
        if t.scale_up.fabric == "nvswitch":
            return self._add(f"gpu{rank}.nvlink.{direction}", SCALE_UP, t.scale_up.bandwidth_GBps)
        return self._add(f"gpu{rank}.pcie.{direction}", PCIE, t.pcie.gpu_link_GBps)

    def _nic(self, rank: int, direction: str) -> str:
        so = self.topo.scale_out
        assert so is not None
        return self._add(f"gpu{rank}.nic.{direction}", NIC,
                         so.nics_per_gpu * so.nic_bandwidth_GBps)

    def switch_port(self, rank: int, to_switch: bool) -> str:
        """The port a multicast or in-switch-reduction flow uses at ``rank``."""
        return self._port(rank, "out" if to_switch else "in")

    def route(self, src: int, dst: int) -> tuple[str, ...]:
        """Links a byte crosses from global rank ``src`` to ``dst`` (SWITCH = the NVSwitch)."""
        key = (src, dst)
        if key not in self._routes:
            self._routes[key] = self._route(src, dst)
        return self._routes[key]

    def _route(self, src: int, dst: int) -> tuple[str, ...]:
        if src == SWITCH:
            return (self.switch_port(dst, to_switch=False),)
        if dst == SWITCH:
            return (self.switch_port(src, to_switch=True),)
        t = self.topo
        if t.node_of(src) != t.node_of(dst):
            return self._net_route(src, dst)
        if t.scale_up.fabric == "nvswitch":
            return (self._port(src, "out"), self._port(dst, "in"))
        return self._pcie_route(src, dst)

    def _net_route(self, src: int, dst: int) -> tuple[str, ...]:
        """Across nodes. Rail-optimized: a GPU sends to another rail's GPU through the NIC of
        that rail, reached over NVLink first (NCCL's PXN), so the bytes stay on one leaf
        switch. Otherwise (or between rails) they cross the tier above, whose share per node
        is the node's NIC bandwidth over ``oversubscription``."""
        t = self.topo
        so = t.scale_out
        assert so is not None
        g = t.gpus_per_node
        a, b = src % g, dst % g
        path: list[str] = []
        sender = src
        if so.rail_optimized and a != b and t.scale_up.fabric == "nvswitch":
            sender = src - a + b  # the GPU of the destination's rail on the source's node
            path += [self._port(src, "out"), self._port(sender, "in")]
        path.append(self._nic(sender, "out"))
        if so.oversubscription > 1 and (not so.rail_optimized or sender % g != b):
            up = g * so.nics_per_gpu * so.nic_bandwidth_GBps / so.oversubscription
            path += [self._add(f"node{t.node_of(src)}.uplink.out", UPLINK_NET, up),
                     self._add(f"node{t.node_of(dst)}.uplink.in", UPLINK_NET, up)]
        path.append(self._nic(dst, "in"))
        return tuple(path)

    def _pcie_route(self, src: int, dst: int) -> tuple[str, ...]:
        t, p = self.topo, self.topo.pcie
        node = t.node_of(src)
        a, b = src % t.gpus_per_node, dst % t.gpus_per_node
        sw_a, sw_b = a // p.gpus_per_switch, b // p.gpus_per_switch
        sock_a, sock_b = sw_a // p.switches_per_socket, sw_b // p.switches_per_socket
        path = [self._port(src, "out")]
        if sw_a != sw_b or not p.p2p:  # up to the root complex and down again
            if p.switch_uplink_GBps > 0:
                path.append(self._add(f"node{node}.sw{sw_a}.up", UPLINK, p.switch_uplink_GBps))
            if sock_a != sock_b and p.inter_socket_GBps > 0:
                path.append(self._add(f"node{node}.socket{sock_a}to{sock_b}", SOCKET,
                                      p.inter_socket_GBps))
            if p.switch_uplink_GBps > 0:
                path.append(self._add(f"node{node}.sw{sw_b}.down", UPLINK,
                                      p.switch_uplink_GBps))
        path.append(self._port(dst, "in"))
        return tuple(path)
