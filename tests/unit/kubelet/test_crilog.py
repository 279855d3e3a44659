"""The CRI log reader: record parsing, partial lines, and the PodLogOptions it honours."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kubecore.api.podlogoptions import LogOptions
from kubecore.kubelet import crilog
from kubecore.kubelet.crilog import format_line, format_rfc3339_nano, messages_of, parse_line, read_messages

T0 = 1_700_000_000.0


def write(path: Path, *records: tuple[float, str, str, bool]) -> None:
    with open(path, "ab") as f:
        for t, stream, text, partial in records:
            f.write(format_line(t, stream, text, partial=partial))


async def collect(path: Path, opts: LogOptions, **kw: object) -> bytes:
    chunks = [chunk async for chunk in read_messages(str(path), opts, now=T0 + 100, **kw)]  # type: ignore[arg-type]
    return b"".join(chunks)


def test_a_record_parses_into_time_stream_tag_and_text() -> None:
    t, stamp, stream, partial, text = parse_line(b"2026-01-02T03:04:05.123456789Z stderr F boom\n")
    assert (stamp, stream, partial, text) == ("2026-01-02T03:04:05.123456789Z", "stderr", False, b"boom\n")
    assert abs(t - 1767323045.123456789) < 1e-6
    assert crilog.render(messages_of([b"2026-01-02T03:04:05.123456789Z stderr F boom\n"])[0], timestamps=True) \
        == b"2026-01-02T03:04:05.123456789Z boom\n"
    assert parse_line(b"2026-01-02T03:04:05Z stdout P part\n")[3:] == (True, b"part")


def test_a_line_that_is_not_a_record_passes_through_as_stdout() -> None:
    assert parse_line(b"just text\n") == (0.0, "", "stdout", False, b"just text\n")


def test_partial_records_are_joined_per_stream() -> None:
    lines = [format_line(T0, "stdout", "hel", partial=True), format_line(T0 + 1, "stderr", "err"),
             format_line(T0 + 2, "stdout", "lo")]
    msgs = messages_of(lines)
    assert [(m.stream, m.text, m.time) for m in msgs] == [("stderr", b"err\n", T0 + 1), ("stdout", b"hello\n", T0)]


def test_rfc3339_nano_trims_trailing_zeros() -> None:
    assert format_rfc3339_nano(T0) == "2023-11-14T22:13:20Z"
    assert format_rfc3339_nano(T0 + 0.5) == "2023-11-14T22:13:20.5Z"


async def test_options_tail_since_limit_timestamps_and_stream(tmp_path: Path) -> None:
    log = tmp_path / "0.log"
    write(log, (T0, "stdout", "one", False), (T0 + 50, "stderr", "two", False), (T0 + 90, "stdout", "three", False))
    assert await collect(log, LogOptions()) == b"one\ntwo\nthree\n"
    assert await collect(log, LogOptions(tail_lines=2)) == b"two\nthree\n"
    assert await collect(log, LogOptions(tail_lines=0)) == b""
    assert await collect(log, LogOptions(since_seconds=60)) == b"two\nthree\n"
    assert await collect(log, LogOptions(since_time=T0 + 60)) == b"three\n"
    assert await collect(log, LogOptions(limit_bytes=6)) == b"one\ntw"
    assert await collect(log, LogOptions(stream="Stderr")) == b"two\n"
    stamped = await collect(log, LogOptions(timestamps=True, tail_lines=1))
    assert stamped == f"{format_rfc3339_nano(T0 + 90)} three\n".encode()


async def test_a_missing_file_is_an_empty_log(tmp_path: Path) -> None:
    assert await collect(tmp_path / "none.log", LogOptions()) == b""


async def test_follow_reads_what_arrives_and_ends_when_the_container_has_stopped(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(crilog, "FOLLOW_POLL", 0.01)
    monkeypatch.setattr(crilog, "FOLLOW_CHECK", 0.02)
    log = tmp_path / "0.log"
    write(log, (T0, "stdout", "first", False))
    alive = True

    async def running() -> bool:
        return alive

    got: list[bytes] = []

    async def follow() -> None:
        async for chunk in read_messages(str(log), LogOptions(follow=True), now=T0, running=running):
            got.append(chunk)

    task = asyncio.ensure_future(follow())
    while got != [b"first\n"]:
        await asyncio.sleep(0.01)
    write(log, (T0 + 1, "stdout", "sec", True), (T0 + 1, "stdout", "ond", False))
    while len(got) < 2:
        await asyncio.sleep(0.01)
    assert got == [b"first\n", b"second\n"] and not task.done()
    write(log, (T0 + 2, "stdout", "last words", False))
    alive = False
    await asyncio.wait_for(task, 10)
    assert got == [b"first\n", b"second\n", b"last words\n"]
