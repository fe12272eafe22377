"""Machines as data: GPUs, NVLink/NVSwitch, PCIe, NICs and transfer mechanisms."""

from pkbsim.topology.loader import find_topology, list_topologies, load_topology
from pkbsim.topology.schema import Gpu, Mechanism, Topology

__all__ = ["Gpu", "Mechanism", "Topology", "find_topology", "list_topologies", "load_topology"]
