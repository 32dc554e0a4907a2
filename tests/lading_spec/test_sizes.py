import pytest

from lading_spec.errors import SpecError
from lading_spec.sizes import format_size, parse_size


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1, 1),
        (6_291_456, 6_291_456),
        ("256MB", 256 * 1024**2),
        ("5 GB", 5 * 1024**3),
        ("10kB", 10 * 1024),
        ("7B", 7),
        ("1TB", 1024**4),
        ("42", 42),
    ],
)
def test_parse_size_accepts_postgres_forms(value: int | str, expected: int) -> None:
    assert parse_size(value, "to.maxFileSize") == expected


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ("256mb", "did you mean MB"),
        ("10KB", "did you mean kB"),
        ("1.5GB", "cannot read"),
        ("12 parsecs", "unknown unit"),
        (0, "positive"),
        (-5, "positive"),
        (True, "expected a size"),
        ("", "cannot read"),
    ],
)
def test_parse_size_rejects_with_field_and_accepted_forms(value: object, needle: str) -> None:
    with pytest.raises(SpecError) as info:
        parse_size(value, "to.maxFileSize")  # type: ignore[arg-type]
    assert info.value.field == "to.maxFileSize"
    assert needle in str(info.value)
    if needle not in ("positive",):
        assert "kB" in str(info.value)


def test_format_size_round_trips() -> None:
    for size in (1, 1023, 1024, 6 * 1024**2, 256 * 1024**2, 3 * 1024**4):
        assert parse_size(format_size(size), "x") == size
