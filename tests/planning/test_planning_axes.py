"""Sweep axes: sizes with units, ranges, lists, bad input, expansion order."""

from __future__ import annotations

import pytest

from pkbsim.errors import UsageError
from pkbsim.planning.axes import Axis, check_axes, expand, parse_number, parse_values, parse_vary


@pytest.mark.parametrize(("text", "value"), [
    ("64KiB", 65536), ("64KB", 64000), ("64 kib", 65536), ("1MiB", 2**20), ("1MB", 10**6),
    ("1.5GB", 1_500_000_000), ("1GiB", 2**30), ("2TiB", 2 * 2**40), ("7B", 7), ("4", 4),
    ("2.5", 2.5), ("1e6", 1_000_000), ("0.5KiB", 512)])
def test_numbers_and_sizes(text: str, value: float) -> None:
    got = parse_number(text, "--sizes")
    assert got == value
    assert type(got) is type(value)


@pytest.mark.parametrize("text", ["12XB", "KiB", "", "1..2", "abc"])
def test_bad_number_names_the_option(text: str) -> None:
    with pytest.raises(UsageError, match=r"^--sizes: "):
        parse_number(text, "--sizes")


def test_geometric_range_includes_stop() -> None:
    assert parse_values("1KiB:1MiB:x4", "--sizes") == [2**10, 2**12, 2**14, 2**16, 2**18, 2**20]
    assert parse_values("1KiB:1GiB:x2", "--sizes") == [2**k for k in range(10, 31)]


def test_geometric_range_stops_below_stop() -> None:
    assert parse_values("1:100:x3", "--vary size") == [1, 3, 9, 27, 81]


def test_arithmetic_ranges() -> None:
    assert parse_values("2:16:+2", "--vary sms") == [2, 4, 6, 8, 10, 12, 14, 16]
    assert parse_values("2:15:+2", "--vary sms") == [2, 4, 6, 8, 10, 12, 14]
    assert parse_values("1:10:3", "--vary x") == [1, 4, 7, 10]
    assert parse_values("0.5:2:+0.5", "--vary x") == [0.5, 1, 1.5, 2]
    assert len(parse_values("1:1000:+1", "--vary x")) == 1000


@pytest.mark.parametrize(("text", "match"), [
    ("1:10:x1", "factor above 1"), ("0:10:x2", "START > 0"), ("10:1:+1", "empty"),
    ("1:10:+0", "above 0"), ("1:10", "START:STOP:STEP"), ("1:2:3:4", "START:STOP:STEP")])
def test_bad_ranges(text: str, match: str) -> None:
    with pytest.raises(UsageError, match=rf"^--vary size: .*{match}"):
        parse_values(text, "--vary size")


def test_lists() -> None:
    assert parse_values("2,4,8", "--vary w") == [2, 4, 8]
    assert parse_values("dgx-h100, gb200-nvl72", "--vary topology") == ["dgx-h100",
                                                                       "gb200-nvl72"]
    assert parse_values("1KiB,2MB", "--vary size") == [1024, 2_000_000]
    with pytest.raises(UsageError, match=r"^--vary w: empty item"):
        parse_values("2,,8", "--vary w")
    with pytest.raises(UsageError, match=r"^--vary w: 'eight' is not a number"):
        parse_values("2,eight", "--vary w", numeric=True)


def test_parse_vary() -> None:
    assert parse_vary("world_size=2,4") == Axis("world_size", (2, 4))
    assert parse_vary("scale_up.link_bandwidth_GBps=100:300:+100") == \
        Axis("scale_up.link_bandwidth_GBps", (100, 200, 300))
    with pytest.raises(UsageError, match=r"^--vary 'world_size': expected NAME=VALUES"):
        parse_vary("world_size")
    with pytest.raises(UsageError, match=r"^--vary world_size: expected whole numbers"):
        parse_vary("world_size=2.5")
    with pytest.raises(UsageError, match=r"^--vary size: 'big' is not a number"):
        parse_vary("size=big")


def test_expand_last_axis_fastest() -> None:
    axes = [Axis("topology", ("a", "b")), Axis("size", (1, 2, 3))]
    assert list(expand(axes)) == [
        {"topology": "a", "size": 1}, {"topology": "a", "size": 2}, {"topology": "a", "size": 3},
        {"topology": "b", "size": 1}, {"topology": "b", "size": 2}, {"topology": "b", "size": 3}]


def test_duplicate_axes() -> None:
    with pytest.raises(UsageError, match=r"^--vary size: given twice"):
        check_axes([Axis("size", (1,)), Axis("w", (2,)), Axis("size", (3,))])


def test_a_geometric_range_downwards_is_empty_and_refused() -> None:
    from pkbsim.errors import UsageError
    from pkbsim.planning.axes import parse_values

    with pytest.raises(UsageError, match="--sizes: '1GiB:1KiB:x2' is empty"):
        parse_values("1GiB:1KiB:x2", "--sizes", numeric=True)


def test_a_task_parameter_must_be_a_number() -> None:
    from pkbsim.errors import UsageError
    from pkbsim.planning.evaluate import Target, evaluate

    with pytest.raises(UsageError, match="--vary M: 'abc' is not a number"):
        evaluate(Target(task="grpo"), {"M": "abc"}, ("t_roof",))
