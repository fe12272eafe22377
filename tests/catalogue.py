"""What PKB's reference/*.py and utils/input_output_tensors.py @3cc0f9b say of each problem.

GOLDEN: the comm ops' (kind, bytes_per_rank) at preset pkb, W = 8, in the reference's order, one
entry per op (a repeated op once), taken from a first reading of those files (summary tables and
per-problem text), not from the task files. Where a closer reading of the reference disagrees
with the first, the comment says so and the reference's number is used (docs/task-notes.md,
"Corrections, by problem range").

INFEASIBLE: world sizes among 2, 3, 4, 6, 8, 16 that the reference or its input generator
cannot run at.
"""

from __future__ import annotations

KiB, MiB = 1 << 10, 1 << 20

GOLDEN: dict[int, list[tuple[str, float]]] = {
    1: [("all_reduce", 2 * MiB)],
    2: [("all_gather", 2 * MiB)],
    3: [("broadcast", 2 * MiB)],
    4: [("reduce", 2 * MiB)],
    5: [("scatter", 2 * MiB)],
    6: [("gather", 2 * MiB)],
    7: [("reduce_scatter", 16 * MiB)],
    8: [("all_to_all", 16 * MiB)],
    9: [("all_reduce", 2048), ("all_reduce", 2048)],
    10: [("all_to_all", 64),
         ("all_to_all", 8192),      # data-dependent, expected (send side is exactly 1024 int64; receive R ~ 1024)
         ("all_to_all", 2097152)],  # data-dependent, expected (R = 1024 rows x 1024 bf16)
    11: [("all_gather", 128 * KiB)],
    12: [("all_gather", 128 * KiB)],
    13: [("all_reduce", 2 * MiB)],
    14: [("all_gather", 256 * KiB)],
    15: [("all_gather", 64 * KiB), ("reduce_scatter", 512 * KiB)],
    16: [("reduce_scatter", 2 * MiB)],
    17: [("all_gather", 32768), ("all_gather", 32768)],
    18: [("all_reduce", 4096)],
    19: [("all_gather", 1048576), ("all_gather", 32768)],
    20: [("all_to_all", 33554432)],
    21: [("all_reduce", 4)],
    22: [("all_reduce", 4), ("all_reduce", 4), ("all_reduce", 4)],
    23: [("all_reduce", 2)],
    24: [("all_reduce", 4)],
    25: [("all_reduce", 4)] + [("all_reduce", 2)] * 6,
    26: [("all_gather", 32)],
    27: [("all_to_all", 2097152)],
    28: [("all_to_all", 4194304)],
    29: [("all_to_all", 4194304)],
    30: [("all_reduce", 16384), ("all_reduce", 16384), ("all_reduce", 16384)],
    31: [("all_gather", 64),  # int64 counts
         ("all_to_all", 4194304),  # data-dependent, expected (send is exactly 2048 rows; receive R varies)
         ("all_to_all", 4194304)],  # data-dependent, expected (sends R rows, mean 2048)
    32: [("all_gather", 64),  # int64 counts
         ("all_to_all", 4194304),  # data-dependent, expected
         ("all_to_all", 4194304)],  # data-dependent, expected
    33: [("all_to_all", 2097152)],
    34: [("all_gather", 2097152)],
    35: [("all_gather", 16),  # int64 size vector
         ("all_gather", 2097152)],
    36: [("all_to_all", 262144)],
    37: [("all_to_all", 262144)],
    38: [("all_to_all", 786432)],
    39: [("all_to_all", 32768), ("all_to_all", 65536), ("all_to_all", 32768)],
    40: [("broadcast", 525824), ("broadcast", 525824), ("broadcast", 525824), ("all_reduce", 525824)],
    41: [("broadcast", 525824), ("all_reduce", 525824), ("all_gather", 65728)],
    42: [("broadcast", 525824), ("reduce_scatter", 525824), ("all_gather", 65728)],
    43: [("all_gather", 8192)],
    44: [("all_reduce", 4194304)],  # fp32
    45: [("reduce_scatter", 262144)],
    46: [("all_gather", 2048)],
    47: [("all_gather", 65728), ("reduce_scatter", 525824)],
    48: [("all_gather", 65536), ("all_gather", 65536), ("all_gather", 65536), ("all_reduce", 262144)],  # AGs @fsdp(4), AR @tp(2)
    49: [("all_gather", 64),  # int64 counts
         ("all_to_all", 4194304),  # data-dependent splits, expected (send size is exact: 2,048 rows)
         ("all_to_all", 4194304)],  # data-dependent, expected
    50: [("all_gather", 128),  # int64 counts
         ("all_to_all", 4194304),  # data-dependent splits, expected (send size is exact)
         ("all_to_all", 4194304)],  # data-dependent, expected
    51: [("all_gather", 32),  # int64 counts @ep(4)
         ("all_to_all", 4194304),  # data-dependent splits, expected, @ep(4)
         ("all_to_all", 4194304)],  # data-dependent, expected, @ep(4)
    52: [("reduce_scatter", 65536)],
    53: [("all_gather", 8192)],
    54: [("send_recv", 65536)],  # P2P 64 KiB x7 (k + v, 32 KiB each, to rank+1)
    55: [("send_recv", 65536), ("all_reduce", 65536)],  # P2P@cp(4) 64 KiB x3; AR@tp(2) 64 KiB
    # catalogue lists 3 P2P ops: recv 64 KiB (stage 1), ring 128 KiB x3, send 64 KiB (stage 0);
    # reference: the recv and the send are the two ends of ONE stage-boundary transfer, and the
    # task serialises the critical path: stage-0 ring, boundary transfer, stage-1 ring
    56: [("send_recv", 131072), ("send_recv", 65536), ("send_recv", 131072)],
    57: [("send_recv", 131072), ("send_recv", 262144), ("all_reduce", 65536)],  # kv bf16 x3, dkv fp32 x4, AR@dp(2) x3
    # catalogue says P2P 512 KiB x3 (sent per rank per round, both directions together);
    # per neighbour that is 262,144 B (the text block, 128 x 1024 bf16); then P2P 256 KiB once
    58: [("send_recv", 262144), ("send_recv", 262144)],
    59: [("all_to_all", 16777216)],  # complex64 (16, 1024, 128) slab, 2 MiB per peer
    60: [("all_gather", 20736000), ("all_to_all", 20736000)],  # complex64 padded slab; transpose
    61: [
        ("all_gather", 4),       # AGT int32 N
        ("all_gather", 50),      # (1, 25) bf16 camera row
        ("all_to_all", 64),      # catalogue says "int64 8 B/peer"; send buffer = W x 8 B
        ("all_to_all", 65536),   # data-dependent, expected: 8,192 pairs x 2 int32 (radii)
        ("all_to_all", 163840),  # data-dependent, expected: 8,192 pairs x 10 bf16
        ("all_to_all", 65536),   # data-dependent, expected: 8,192 pairs x 2 int32 (ids)
    ],
    62: [("all_to_all", 4194304), ("all_reduce", 50331648), ("all_to_all", 12582912)],  # @az(2), @polar(4), @az(2), fp32
    # AGO: catalogue gives no byte count ("list of 8 ints"); pickle of [1024] * 8 is 40 B (protocol 4)
    63: [("all_reduce", 8), ("all_gather", 40), ("all_gather", 65536)],
    64: [
        # hop 1 (fanout 10, 512 seeds per rank)
        ("all_to_all", 64),
        ("all_to_all", 4096),    # data-dependent, expected
        ("all_to_all", 64),
        ("all_to_all", 64),
        ("all_to_all", 40960),   # data-dependent, expected
        ("all_to_all", 40960),   # data-dependent, expected
        ("all_to_all", 4096),    # data-dependent, expected
        # hop 2 (10-vertex frontier per rank, fanout 5)
        ("all_to_all", 64),
        ("all_to_all", 80),      # data-dependent, expected
        ("all_to_all", 64),
        ("all_to_all", 64),
        ("all_to_all", 400),     # data-dependent, expected (mean); catalogue says <=400 B; reference: owners 0 and 1 send 640 B, mean 400
        ("all_to_all", 400),     # data-dependent, expected (mean); catalogue says <=400 B; as above
        ("all_to_all", 80),      # data-dependent, expected (mean); ranks 0 and 1 send 128 B
    ],
    65: [("all_to_all", 262144)],
    66: [("all_to_all", 524288)],
    67: [
        ("all_to_all", 64),
        ("all_to_all", 8192),    # data-dependent, expected
        ("all_to_all", 262144),  # data-dependent, expected
    ],
    68: [
        ("all_to_all", 64),
        ("all_to_all", 160000),    # data-dependent, expected (balanced by construction)
        ("all_to_all", 10240000),  # data-dependent, expected (balanced by construction)
    ],
    69: [
        ("all_reduce", 64),
        ("all_to_all", 2062),     # catalogue says ~2 KiB; reference: send = W x num_pos bf16, mean over ranks 8 x 128.875 x 2 = 2,062 B (2,048..2,080 by rank)
        ("all_reduce", 64),
        ("all_to_all", 2062000),  # catalogue says ~2 MB / "≈2.05 MB" send; reference: mean send 8 x 128.875 x 1000 x 2 = 2,062,000 B (2,048,000..2,080,000 by rank)
    ],
    70: [
        ("all_to_all", 192),
        ("all_to_all", 61440),
        ("all_to_all", 768000),  # data-dependent, expected (15 x 512 x 12.5 ids x 8 B)
    ],
    71: [("send_recv", 12288)],  # one batch_isend_irecv: 12,288 B to each neighbour (pattern bidir_ring, no wrap)
    72: [
        ("all_to_all", 4194304),
        ("all_to_all", 4194304),
        ("all_to_all", 4194304),
        ("all_to_all", 4194304),
    ],
    73: [
        ("all_reduce", 16384),
        ("all_reduce", 16384),
        ("all_reduce", 16384),
    ],
    74: [
        ("all_gather", 262144),
        ("all_gather", 262144),
        ("all_gather", 262144),
        ("all_gather", 262144),
        ("all_gather", 2048),
        ("all_reduce", 1048576),
    ],
    75: [
        ("all_to_all", 262144),
        ("all_to_all", 262144),
        ("all_to_all", 524288),
        ("all_to_all", 1024),
        ("all_to_all", 1024),
        ("all_to_all", 524288),
    ],
    76: [("all_reduce", 71303168)],
    77: [("all_to_all", 44236800),   # kv head redistribution
         ("all_to_all", 33177600),   # q0
         ("all_to_all", 33177600),   # q1
         ("all_to_all", 66355200),   # [q_{i+1} | out_{i-1}], repeat 2
         ("all_to_all", 33177600)],  # out_2, out_3, repeat 2
    78: [("all_gather", 49),          # all_gather_object of tile shapes: pickle size (est.); catalogue gives no number
         ("all_to_all", 119771136),   # mean send buffer (W x local tiles); rank 0 sends 8 x 16,809,984 (imbalance 1.1228)
         ("all_gather", 49),          # all_gather_object of blended shapes (est.)
         ("all_to_all", 74649600)],   # mean send buffer; rank 0 sends 8 x 9,953,280 (imbalance 1.0667)
    79: [("broadcast", 16), ("broadcast", 24576), ("gather", 12800), ("gather", 51200)],  # each repeat W = 8, rotating root
    80: [("all_reduce", 4), ("all_reduce", 4), ("all_reduce", 65536)],  # last one repeat 3
    81: [("all_gather", 491520),  # mean of count_r x 262,144 (15/8 objects); max rank 786,432 (imbalance 1.6)
         ("all_gather", 7.5)],    # mean of count_r x 4 B fp32 scores (15/8 objects); not an integer
    82: [("all_to_all", 1 * KiB), ("all_gather", 8)],
    83: [("all_to_all", 1 * KiB), ("all_gather", 8)],
    84: [("all_to_all", 1 * KiB), ("all_to_all", 2 * KiB)],
    85: [("all_gather", 8), ("all_gather", 16), ("all_gather", 64), ("all_gather", 64),
         ("all_to_all", 64),
         ("all_to_all", 256),   # data-dependent, expected
         ("all_gather", 8), ("all_to_all", 64),
         ("all_to_all", 256)],  # data-dependent, expected
    86: [("all_reduce", 4), ("all_reduce", 1048576)],  # second one repeat 5
    87: [("all_gather", 655360)],
}

INFEASIBLE: dict[int, list[int]] = {
    11: [3, 6],  # W | 512 (K split)
    12: [3, 6],  # W | 512 (K split)
    14: [3, 6],  # W | 1024 (N split)
    16: [3, 6],  # W | 512 and M % W
    17: [3, 6, 16],
    26: [3, 6, 16],
    27: [3, 6],
    28: [3, 6, 16],
    29: [3, 6, 16],
    31: [3, 6, 16],
    32: [3, 6, 16],
    33: [3, 6],
    36: [3, 6, 16],
    37: [3, 6, 16],
    38: [3, 6, 16],
    39: [3, 6, 16],
    41: [3, 6],
    42: [3, 6],
    47: [3, 6],
    54: [3, 6, 16],
    55: [3],
    56: [3],
    57: [3, 6, 16],
    72: [3, 6],
    73: [3, 6],
    82: [3, 6],  # vocab 256 and tokens split over W
    83: [3, 6],  # vocab 256 and tokens split over W
    84: [3, 6],  # vocab 256 and tokens split over W
}
