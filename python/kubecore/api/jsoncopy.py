"""A deep copy of decoded JSON data (dicts with string keys, lists, strings, numbers, booleans,
None) through msgspec's encoder and decoder: 10-30x faster than ``copy.deepcopy`` on API objects,
whose managedFields alone can be hundreds of nested dicts. Only for JSON data."""

from __future__ import annotations

from typing import TypeVar, cast

import msgspec

T = TypeVar("T")
_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder().decode


def json_copy(value: T) -> T:
    """A deep copy of `value`, which must be JSON data."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return cast(T, _decode(_encode(value)))
