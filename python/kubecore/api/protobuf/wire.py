"""Protocol-buffers wire format reader (no dependencies).

Only what Kubernetes' proto2 messages use: varint, fixed64, length-delimited and fixed32 fields
(groups are rejected). Every function raises :class:`WireError` on truncated or malformed input.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

__all__ = [
    "FIXED32",
    "FIXED64",
    "LEN",
    "VARINT",
    "WireError",
    "as_double",
    "as_float",
    "as_int32",
    "as_int64",
    "as_uint32",
    "iter_fields",
    "read_varint",
    "unpack_packed",
]

VARINT = 0
FIXED64 = 1
LEN = 2
START_GROUP = 3
END_GROUP = 4
FIXED32 = 5

_MASK64 = (1 << 64) - 1
_D = struct.Struct("<d")
_F = struct.Struct("<f")


class WireError(ValueError):
    """The bytes are not a well-formed protobuf message."""


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """Decode a base-128 varint at ``pos``; return (value as unsigned 64-bit, next position)."""
    result = 0
    shift = 0
    end = len(buf)
    while True:
        if pos >= end:
            raise WireError("unexpected end of data in varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result & _MASK64, pos
        shift += 7
        if shift >= 70:
            raise WireError("varint is longer than 10 bytes")


# A field's value: an int for VARINT / FIXED32 / FIXED64 (raw bits), bytes for LEN.
FieldValue = int | bytes


def iter_fields(buf: bytes) -> Iterator[tuple[int, int, FieldValue]]:
    """Yield (field number, wire type, value) for each field of a message, in wire order."""
    pos = 0
    end = len(buf)
    while pos < end:
        key, pos = read_varint(buf, pos)
        num = key >> 3
        wt = key & 7
        if num == 0 or num > 0x1FFFFFFF:
            raise WireError(f"illegal field number {num}")
        if wt == VARINT:
            v, pos = read_varint(buf, pos)
            yield num, wt, v
        elif wt == LEN:
            n, pos = read_varint(buf, pos)
            if n > end - pos:
                raise WireError(f"length-delimited field {num} runs past the end of the data")
            yield num, wt, bytes(buf[pos:pos + n])
            pos += n
        elif wt == FIXED64:
            if pos + 8 > end:
                raise WireError("unexpected end of data in fixed64")
            yield num, wt, int.from_bytes(buf[pos:pos + 8], "little")
            pos += 8
        elif wt == FIXED32:
            if pos + 4 > end:
                raise WireError("unexpected end of data in fixed32")
            yield num, wt, int.from_bytes(buf[pos:pos + 4], "little")
            pos += 4
        else:
            raise WireError(f"unsupported wire type {wt} for field {num}")


def as_int64(v: int) -> int:
    """Two's-complement int64 from the raw unsigned varint."""
    v &= _MASK64
    return v - (1 << 64) if v >= 1 << 63 else v


def as_int32(v: int) -> int:
    """int32 from the raw varint (negative int32 is sign-extended to 10 bytes; keep the low 32 bits)."""
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >= 1 << 31 else v


def as_uint32(v: int) -> int:
    return v & 0xFFFFFFFF


def as_double(bits: int) -> float:
    return float(_D.unpack(bits.to_bytes(8, "little"))[0])


def as_float(bits: int) -> float:
    return float(_F.unpack(bits.to_bytes(4, "little"))[0])


def unpack_packed(buf: bytes, wire_type: int) -> list[int]:
    """The raw values of a packed repeated scalar field (VARINT, FIXED32 or FIXED64 elements)."""
    out: list[int] = []
    pos = 0
    end = len(buf)
    if wire_type == VARINT:
        while pos < end:
            v, pos = read_varint(buf, pos)
            out.append(v)
    else:
        size = 8 if wire_type == FIXED64 else 4
        if end % size:
            raise WireError("packed fixed-width field has a partial element")
        for i in range(0, end, size):
            out.append(int.from_bytes(buf[i:i + size], "little"))
    return out
