"""SPDY/3.1 frames and header blocks (`client/spdy.py`) and the client session over a scripted peer
(`client/spdy_session.py`)."""

from __future__ import annotations

import asyncio
import struct
import zlib
from collections.abc import Callable
from typing import Any

import pytest

from kubecore.client import spdy
from kubecore.client.spdy_session import SpdySession, SpdyStreamError
from tests.unit.client.spdy_peer import Peer, replies, running

SPDY3_DICTIONARY_ADLER32 = 3821447106
"""The Adler-32 of the SPDY/3 header dictionary (as computed from the spec's bytes): the DICTID a
peer's zlib stream announces, so both ends must have the very same 1423 bytes."""


def test_the_dictionary_is_the_spec_one() -> None:
    assert len(spdy.DICTIONARY) == 1423
    assert zlib.adler32(spdy.DICTIONARY) == SPDY3_DICTIONARY_ADLER32
    assert spdy.DICTIONARY.startswith(b"\x00\x00\x00\x07options\x00\x00\x00\x04head")
    assert spdy.DICTIONARY.endswith(b"utf-,*,enq=0.")


def test_a_header_block_is_a_zlib_stream_primed_with_the_dictionary() -> None:
    block = spdy.HeaderCompressor().compress({"streamtype": ["error"]})
    cmf, flg = block[0], block[1]
    assert cmf & 0x0F == 8 and (cmf * 256 + flg) % 31 == 0  # deflate, valid zlib header
    assert flg & 0x20  # FDICT: a preset dictionary, named by its Adler-32
    assert struct.unpack(">I", block[2:6])[0] == SPDY3_DICTIONARY_ADLER32
    assert block.endswith(b"\x00\x00\xff\xff")  # every block ends with a sync flush
    plain = zlib.decompressobj(zdict=spdy.DICTIONARY)
    assert plain.decompress(block) == b"\x00\x00\x00\x01\x00\x00\x00\x0astreamtype\x00\x00\x00\x05error"


def test_name_value_blocks_lowercase_names_and_join_values_with_nul() -> None:
    raw = spdy.pack_headers({"streamType": ["stdin"], "Multi": ["a", "b"]})
    assert raw == (b"\x00\x00\x00\x02" b"\x00\x00\x00\x0astreamtype\x00\x00\x00\x05stdin"
                   b"\x00\x00\x00\x05multi\x00\x00\x00\x03a\x00b")
    assert spdy.unpack_headers(raw) == {"streamtype": ["stdin"], "multi": ["a", "b"]}
    with pytest.raises(spdy.SpdyError):
        spdy.unpack_headers(raw + b"x")
    with pytest.raises(spdy.SpdyError):
        spdy.unpack_headers(raw[:-3])


def test_blocks_share_one_context_per_direction() -> None:
    out, back = spdy.HeaderCompressor(), spdy.HeaderDecompressor()
    first, second = out.compress({"port": ["8080"], "requestid": ["0"]}), out.compress({"port": ["8080"]})
    assert back.decompress(first) == {"port": ["8080"], "requestid": ["0"]}
    assert back.decompress(second) == {"port": ["8080"]}
    with pytest.raises(spdy.SpdyError):  # the second block alone refers to the first's history
        spdy.HeaderDecompressor().decompress(second)


FRAMES: list[spdy.Frame] = [
    spdy.SynStream(1, {"streamtype": ["error"]}, associated_to=0, priority=3),
    spdy.SynStream(3, {"streamtype": ["stdin"]}, flags=spdy.FLAG_FIN),
    spdy.SynReply(1, {"x": ["y"]}),
    spdy.HeadersFrame(1, {"trailer": ["t"]}, flags=spdy.FLAG_FIN),
    spdy.RstStream(5, spdy.RST_CANCEL),
    spdy.Settings({spdy.SETTINGS_INITIAL_WINDOW_SIZE: 1 << 20, 4: 100}),
    spdy.Ping(7),
    spdy.GoAway(9, 0),
    spdy.WindowUpdate(0, 32768),
    spdy.Data(3, b"hello"),
    spdy.Data(3, b"", spdy.FLAG_FIN),
]


def test_every_frame_round_trips_whatever_the_split() -> None:
    compressor = spdy.HeaderCompressor()
    wire = b"".join(spdy.encode(f, compressor=compressor) for f in FRAMES)
    assert spdy.FrameReader().feed(wire) == FRAMES
    reader = spdy.FrameReader()
    assert [f for i in range(len(wire)) for f in reader.feed(wire[i:i + 1])] == FRAMES


def test_fixed_layouts() -> None:
    assert spdy.encode(spdy.Data(3, b"hi", spdy.FLAG_FIN)) == b"\x00\x00\x00\x03\x01\x00\x00\x02hi"
    assert spdy.encode(spdy.Ping(1)) == b"\x80\x03\x00\x06\x00\x00\x00\x04\x00\x00\x00\x01"
    assert spdy.encode(spdy.RstStream(1, 5)) == b"\x80\x03\x00\x03\x00\x00\x00\x08\x00\x00\x00\x01\x00\x00\x00\x05"
    assert spdy.encode(spdy.WindowUpdate(1, 0x10000)) == \
        b"\x80\x03\x00\x09\x00\x00\x00\x08\x00\x00\x00\x01\x00\x01\x00\x00"
    syn = spdy.encode(spdy.SynStream(1, {}, priority=2), compressor=spdy.HeaderCompressor())
    assert syn[:4] == b"\x80\x03\x00\x01" and syn[8:18] == b"\x00\x00\x00\x01\x00\x00\x00\x00\x40\x00"
    assert struct.unpack(">I", syn[4:8])[0] == len(syn) - 8


def test_unknown_control_frames_are_skipped_and_other_versions_refused() -> None:
    unknown = b"\x80\x03\x00\x0a\x00\x00\x00\x02ab"  # type 10 (CREDENTIAL), not implemented
    assert spdy.FrameReader().feed(unknown + spdy.encode(spdy.Ping(2))) == [spdy.Ping(2)]
    with pytest.raises(spdy.SpdyError, match="version 2"):
        spdy.FrameReader().feed(b"\x80\x02\x00\x06\x00\x00\x00\x04\x00\x00\x00\x01")
    with pytest.raises(spdy.SpdyError):
        spdy.encode(spdy.SynReply(1, {}))  # header frames need the connection's compressor


# -- the session -----------------------------------------------------------------------------------
def echo(peer: Peer, frame: spdy.Frame) -> list[spdy.Frame]:
    """Reply to streams; echo data back with an upper-case twist; FIN answers FIN; ping nothing."""
    if isinstance(frame, spdy.Data) and frame.stream_id % 2:
        out: list[spdy.Frame] = [spdy.Data(frame.stream_id, frame.data.upper())] if frame.data else []
        return out + ([spdy.Data(frame.stream_id, b"", spdy.FLAG_FIN)] if frame.fin else [])
    return replies(peer, frame)


async def connect(port: int) -> SpdySession:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    return SpdySession(reader, writer)


async def test_streams_carry_data_both_ways_and_half_close() -> None:
    peer = Peer(echo, with_http=False)
    async with running(peer) as (_, port):
        session = await connect(port)
        stream = await session.open_stream({"streamtype": ["stdin"]})
        other = await session.open_stream({"streamtype": ["stdout"]})
        assert (stream.id, other.id) == (1, 3)
        await stream.write(b"abc")
        assert await stream.read() == b"ABC"
        stream.close_write()
        assert await stream.read() == b""
        assert await stream.read() == b""
        await session.close()
        assert await other.read() == b""  # the connection's end ends every stream
    assert spdy.Data(1, b"", spdy.FLAG_FIN) in peer.received
    assert peer.streams == {1: "stdin", 3: "stdout"}


async def test_a_reset_or_a_goaway_ends_streams_without_errors_on_read() -> None:
    def reset_second(peer: Peer, frame: spdy.Frame) -> list[spdy.Frame]:
        if isinstance(frame, spdy.SynStream) and frame.stream_id == 3:
            return [spdy.RstStream(3, spdy.RST_REFUSED_STREAM)]
        if isinstance(frame, spdy.Data) and frame.data == b"bye":
            return [spdy.GoAway(1)]
        return replies(peer, frame)

    async with running(Peer(reset_second, with_http=False)) as (_, port):
        session = await connect(port)
        first = await session.open_stream({"streamtype": ["error"]})
        with pytest.raises(SpdyStreamError, match="reset by the peer"):
            await session.open_stream({"streamtype": ["stdin"]})
        assert first.aborted is None
        await first.write(b"bye")
        assert await first.read() == b""
        assert first.aborted is not None and "went away" in first.aborted  # no FIN: not a clean end
        with pytest.raises(SpdyStreamError):
            await session.open_stream({"streamtype": ["stdout"]})
        await session.close()


def talkative(big: bytes, *, flow_control: bool) -> Peer:
    """A peer that pings and sends `big` on each new stream, announcing flow control or not."""
    def handler(peer: Peer, frame: spdy.Frame) -> list[spdy.Frame]:
        if not isinstance(frame, spdy.SynStream):
            return []
        announce: list[spdy.Frame] = [spdy.Settings({spdy.SETTINGS_INITIAL_WINDOW_SIZE: len(big)})]
        return [*(announce if flow_control else []), spdy.SynReply(frame.stream_id, {}), spdy.Ping(2),
                spdy.Data(frame.stream_id, big)]

    return Peer(handler, with_http=False)


async def read_exactly(stream: Any, size: int) -> bytes:
    got = b""
    while len(got) < size:
        got += await stream.read()
    return got


async def until(check: Callable[[], bool]) -> None:
    async def poll() -> None:
        while not check():
            await asyncio.sleep(0.01)

    await asyncio.wait_for(poll(), 10)


@pytest.mark.parametrize("flow_control", [False, True])
async def test_pings_are_answered_and_window_updates_go_only_to_a_peer_doing_flow_control(flow_control: bool) -> None:
    big = b"x" * spdy.INITIAL_WINDOW
    peer = talkative(big, flow_control=flow_control)
    async with running(peer) as (_, port):
        session = await connect(port)
        stream = await session.open_stream({"streamtype": ["stdout"]})
        assert await read_exactly(stream, len(big)) == big
        await stream.write(b"marker")  # anything sent before it has arrived once it has
        await until(lambda: spdy.Data(1, b"marker") in peer.received)
        await session.close()
    assert spdy.Ping(2) in peer.received
    granted = {sid: sum(f.delta for f in peer.received if isinstance(f, spdy.WindowUpdate) and f.stream_id == sid)
               for sid in (0, 1)}
    if flow_control:  # at least each half window consumed, never more than was sent
        assert all(len(big) // 2 <= g <= len(big) for g in granted.values()), granted
    else:
        assert granted == {0: 0, 1: 0}


async def test_sending_waits_for_a_peer_that_does_flow_control() -> None:
    def small_window(peer: Peer, frame: spdy.Frame) -> list[spdy.Frame]:
        if isinstance(frame, spdy.SynStream):
            return [spdy.Settings({spdy.SETTINGS_INITIAL_WINDOW_SIZE: 4}), spdy.SynReply(frame.stream_id, {})]
        if isinstance(frame, spdy.Data):  # grant again what was received
            return [spdy.WindowUpdate(frame.stream_id, len(frame.data))] if frame.data else []
        return []

    peer = Peer(small_window, with_http=False)
    async with running(peer) as (_, port):
        session = await connect(port)
        stream = await session.open_stream({"streamtype": ["stdin"]})
        await asyncio.wait_for(stream.write(b"0123456789"), 10)
        await until(lambda: b"".join(f.data for f in peer.received if isinstance(f, spdy.Data)) == b"0123456789")
        sent = [f for f in peer.received if isinstance(f, spdy.Data)]
        assert max(len(f.data) for f in sent) <= 4 and len(sent) >= 3
        await session.close()
