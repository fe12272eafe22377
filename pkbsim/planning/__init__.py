"""Capacity planning: sweeps over hardware, scale and size, and the answers derived from them."""
