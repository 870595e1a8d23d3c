import pytest

from harness.core import units


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("150ms", 0.15),
        ("200us", 0.0002),
        ("1.5s", 1.5),
        ("2m", 120.0),
        (3, 3.0),
        ("0", 0.0),
        (" 10 ms ", 0.01),
        ("250µs", 0.00025),
    ],
)
def test_durations(text: str | int, seconds: float) -> None:
    assert units.parse_duration(text) == pytest.approx(seconds, abs=1e-12)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("-5ms", "negative"),
        ("5parsecs", "unknown duration unit"),
        ("fast", "cannot parse"),
        (True, "boolean"),
    ],
)
def test_bad_durations(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        units.parse_duration(text)


@pytest.mark.parametrize(
    ("text", "bits"),
    [("100mbit", 100_000_000), ("1.5gbit", 1_500_000_000), ("64kbit", 64_000), ("9600bit", 9600)],
)
def test_rates(text: str, bits: int) -> None:
    assert units.parse_rate(text) == bits


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("10mbps", "ambiguous"),
        ("100", "no unit"),
        ("0mbit", "zero"),
        ("3 furlongs", "unknown"),
        ("-1mbit", "negative"),
    ],
)
def test_bad_rates(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        units.parse_rate(text)


@pytest.mark.parametrize(
    ("text", "size"),
    [("64KiB", 65536), ("1MB", 1_000_000), ("4M", 4 * 1024**2), (512, 512), ("1gib", 1024**3)],
)
def test_sizes(text: str | int, size: int) -> None:
    assert units.parse_size(text) == size


@pytest.mark.parametrize(
    ("text", "percent"),
    [("0.5%", 0.5), ("100%", 100.0), (" 1.5 % ", 1.5), ("0", 0.0), (0, 0.0), (0.0, 0.0)],
)
def test_percents(text: str | int | float, percent: float) -> None:
    assert units.parse_percent(text) == percent


@pytest.mark.parametrize(
    ("value", "words"),
    [
        # Both readings of a number that could be a fraction, and the fix for each.
        (0.015, "read as a percentage it is 0.015%, read as a fraction 1.5%; write '0.015%' or"),
        ("0.5", "it is 0.5%, read as a fraction 50%; write '0.5%' or '50%'"),
        (1, "read as a percentage it is 1%, read as a fraction 100%"),
        # Above 1 it is no fraction; the unit is still required.
        (10, "10 has no unit; write it like '10%'"),
        ("2.5", "'2.5' has no unit; write it like '2.5%'"),
    ],
)
def test_bare_percent_needs_its_unit(value: str | float, words: str) -> None:
    with pytest.raises(ValueError) as caught:
        units.parse_percent(value)
    assert words in str(caught.value)


@pytest.mark.parametrize("text", ["120%", "-1%", 101, "ten%", "5 percent"])
def test_bad_percents(text: str | int) -> None:
    with pytest.raises(ValueError):
        units.parse_percent(text)


def test_formatting() -> None:
    assert units.format_duration(0.15) == "150ms"
    assert units.format_duration(0.0002) == "200us"
    assert units.format_rate(465e6) == "465 Mbit/s"
