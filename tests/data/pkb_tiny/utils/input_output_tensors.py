"""Inputs of the tiny PKB checkout, with PKB's signature: a tuple of arguments per rank, random
values seeded by problem, rank and trial, the shape derived from (M, N) (4 x 8 at 1024 x 1024)."""

import torch


def create_input_tensor(rank, world_size, problem_id, base_shape, dtype, trial=0, device=None):
    rows, cols = max(1, base_shape[0] // 256), max(1, base_shape[1] // 128)
    generator = torch.Generator().manual_seed(42 + problem_id * 1000 + rank + trial * 1_000_003)
    values = torch.randn((rows, cols), generator=generator)
    return (values.to(dtype=dtype, device=device or torch.device("cuda", rank)),)
