"""Which shipped topology describes a GPU, by the name the driver reports."""

from __future__ import annotations

from pkbsim.errors import UsageError

# Substring of the driver's GPU name (upper case) -> shipped topology; first match wins.
_BY_NAME = (
    ("GB200", "gb200-nvl72"),
    ("B200", "hgx-b200"),
    ("H200", "dgx-h200"),
    ("H100", "dgx-h100"),
    ("A100", "dgx-a100"),
    ("L40S", "pcie-l40s-8"),
)


def base_for_gpu(gpu_name: str | None, option: str = "--base") -> str:
    """The shipped topology for ``gpu_name`` (e.g. 'NVIDIA H200' -> 'dgx-h200')."""
    name = (gpu_name or "").upper()
    for needle, topo in _BY_NAME:
        if needle in name:
            return topo
    raise UsageError(f"no shipped topology matches GPU {gpu_name!r}; name one with {option}")
