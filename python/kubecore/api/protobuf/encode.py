"""Protocol-buffers wire format writer (no dependencies), the counterpart of `wire.py`'s reader.

A `Writer` appends fields to one growing buffer in the order they are written. It follows proto3's
encoding rules for what it is given: scalar fields equal to their default (0, "", b"", False) are
not written, sub-messages are written whenever the caller writes them (presence is the caller's
decision), repeated fields are one field per element (strings, bytes, messages) and int64 values
are two's complement in ten bytes when negative, as `wire.as_int64` expects back.
"""

from __future__ import annotations

from kubecore.api.protobuf.wire import LEN, VARINT

__all__ = ["Writer", "varint"]

_MASK64 = (1 << 64) - 1


def varint(value: int) -> bytes:
    """Base-128 varint of `value` taken as an unsigned 64-bit number (negatives wrap, as int64 does)."""
    v = value & _MASK64
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


class Writer:
    """One message being encoded. Every method returns the writer, so calls chain."""

    __slots__ = ("_buf",)

    def __init__(self) -> None:
        self._buf = bytearray()

    def _key(self, num: int, wire_type: int) -> None:
        self._buf += varint(num << 3 | wire_type)

    def integer(self, num: int, value: int) -> Writer:
        """int32/int64/uint32/uint64/enum: a varint, skipped when 0."""
        if value:
            self._key(num, VARINT)
            self._buf += varint(value)
        return self

    def boolean(self, num: int, value: bool) -> Writer:
        if value:
            self._key(num, VARINT)
            self._buf.append(1)
        return self

    def blob(self, num: int, value: bytes) -> Writer:
        if value:
            self.message(num, value)
        return self

    def string(self, num: int, value: str) -> Writer:
        if value:
            self.message(num, value.encode())
        return self

    def message(self, num: int, encoded: bytes) -> Writer:
        """A length-delimited field written even when empty (a present sub-message)."""
        self._key(num, LEN)
        self._buf += varint(len(encoded))
        self._buf += encoded
        return self

    def strings(self, num: int, values: list[str]) -> Writer:
        """A repeated string: every element, empty ones included."""
        for v in values:
            self.message(num, v.encode())
        return self

    def string_map(self, num: int, values: dict[str, str]) -> Writer:
        """A map<string, string>: one entry message (key = 1, value = 2) per item."""
        for k, v in values.items():
            self.message(num, Writer().string(1, k).string(2, v).finish())
        return self

    def finish(self) -> bytes:
        return bytes(self._buf)
