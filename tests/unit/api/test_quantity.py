"""resource.Quantity: parsing, canonical strings, comparisons (the worked examples of quantity.py)."""

from __future__ import annotations

import pytest

from kubecore.api import quantity
from kubecore.api.quantity import ERR_FORMAT_WRONG, ERR_SUFFIX, QuantityError, parse, parse_json


@pytest.mark.parametrize("text, canonical", [
    ("1.5", "1500m"), ("1000", "1k"), ("0.1", "100m"), ("1024Mi", "1Gi"), ("1536Mi", "1536Mi"),
    ("1e3", "1e3"), ("512Ki", "512Ki"), ("1000Ki", "1000Ki"), ("0.5Gi", "512Mi"), ("100m", "100m"),
    ("0", "0"), ("-1", "-1"), ("0.0000000001", "1n"), ("1E", "1E"), ("2Gi", "2Gi"), ("1023", "1023"),
    ("1.5e3", "1500"), ("+5", "5"), ("12M", "12M"), ("1500Mi", "1500Mi"),
])
def test_canonical(text: str, canonical: str) -> None:
    assert parse(text).canonical() == canonical


@pytest.mark.parametrize("text, message", [
    ("5K", ERR_SUFFIX), ("1Kb", ERR_FORMAT_WRONG), ("1Mb", ERR_FORMAT_WRONG), ("abc", ERR_FORMAT_WRONG), ("", ERR_FORMAT_WRONG),
    ("1.2.3", ERR_FORMAT_WRONG), ("5 Mi", ERR_FORMAT_WRONG), (".", ERR_FORMAT_WRONG),
])
def test_errors(text: str, message: str) -> None:
    with pytest.raises(QuantityError) as e:
        parse(text)
    assert str(e.value) == message


def test_error_text_is_upstreams() -> None:
    assert ERR_FORMAT_WRONG == ("quantities must match the regular expression "
                                "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")


def test_values_round_up() -> None:
    assert parse("100m").milli_value() == 100 and parse("100m").value() == 1
    assert parse("1Gi").value() == 1 << 30 and parse("1Gi").milli_value() == 1000 << 30
    assert parse("1n").milli_value() == 1
    assert parse("-1500m").value() == -1


def test_compare_across_formats() -> None:
    assert parse("1Gi").cmp(parse("1073741824")) == 0
    assert parse("500m") < parse("1") and parse("1k") <= parse("1000")
    assert parse("2").cmp(parse("1999m")) == 1


def test_json_numbers() -> None:
    assert parse_json(2).canonical() == "2"
    assert parse_json(0.5).canonical() == "500m"
    assert parse_json(" 1Gi ").canonical() == "1Gi"
    with pytest.raises(QuantityError):
        parse_json(True)


def test_constructors() -> None:
    assert quantity.from_milli(250).canonical() == "250m"
    assert quantity.from_int(3).canonical() == "3"
