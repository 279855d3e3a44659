"""parse_line: the compact `{"type":..,"object":..}` fast path gives the same events as the full
envelope decode, probes the object once, and any other layout still parses."""

from __future__ import annotations

import json

import msgspec
import pytest

from kubecore.client import watch
from kubecore.client.watch import BOOKMARK, INITIAL_EVENTS_END, WatchEvent, parse_line

OBJ = {"metadata": {"resourceVersion": "42", "name": "a", "namespace": "default",
                    "managedFields": [{"manager": "m", "fieldsV1": {"f:data": {}}}]},
       "kind": "ConfigMap", "data": {"k": 'v"},"type":"DELETED'}}


def envelope(kind: str, obj: object) -> bytes:
    return msgspec.json.encode({"type": kind, "object": obj})


def slow(line: bytes) -> WatchEvent:
    env = msgspec.json.decode(line, type=watch._Envelope)
    return WatchEvent(env.type, bytes(env.object))


@pytest.mark.parametrize("kind", ["ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"])
def test_compact_lines_take_the_fast_path_and_match_the_envelope_decode(kind: str) -> None:
    line = envelope(kind, OBJ)
    ev = parse_line(line)
    ref = slow(line)
    assert (ev.type, ev.raw) == (ref.type, ref.raw)
    assert ev.probed is not None and not ev.is_decoded  # probed once, not decoded
    assert ev.resource_version() == "42" and ev.object == OBJ


@pytest.mark.parametrize("line", [
    json.dumps({"type": "ADDED", "object": OBJ}).encode(),                 # spaces after separators
    msgspec.json.encode({"object": OBJ, "type": "ADDED"}),                # another member order
    envelope("ADDED", OBJ) + b"\r",                                        # CRLF framing
    envelope("ADDED", OBJ).replace(b'"ADDED"', b'"ADD\\u0045D"'),          # an escaped type
    envelope("CUSTOM", OBJ),                                              # a type we do not know
    msgspec.json.encode({"type": "ADDED", "object": [1, 2]}),             # an object that is not one
])
def test_other_layouts_parse_as_before(line: bytes) -> None:
    ev = parse_line(line)
    ref = slow(line)
    assert (ev.type, ev.raw) == (ref.type, ref.raw)


def test_a_line_with_a_trailing_member_is_not_mistaken_for_a_compact_one() -> None:
    line = envelope("ADDED", OBJ)[:-1] + b',"extra":1}'
    ev = parse_line(line)
    assert ev.raw == msgspec.json.encode(OBJ) and ev.type == "ADDED"
    with pytest.raises(msgspec.DecodeError):
        parse_line(envelope("ADDED", OBJ)[:-2] + b"}")  # broken JSON still fails


def test_bookmark_end_of_initial_events_is_read_from_the_probe() -> None:
    mark = {"kind": "ConfigMap", "metadata": {"resourceVersion": "7", "annotations": {INITIAL_EVENTS_END: "true"}}}
    ev = parse_line(envelope(BOOKMARK, mark))
    assert ev.is_initial_events_end() and ev.resource_version() == "7" and not ev.is_decoded
    plain = WatchEvent(BOOKMARK, msgspec.json.encode({"metadata": {"resourceVersion": "8"}}))
    assert not plain.is_initial_events_end() and plain.resource_version() == "8"


# -- a stream with a decoder: the object is decoded as its line is parsed, instead of probed ---------------
def _strip(raw: bytes) -> tuple[dict[str, object], bytes]:
    from kubecore.client.rawmeta import decode_without_managed_fields

    return decode_without_managed_fields(raw)  # type: ignore[no-any-return]


@pytest.mark.parametrize("kind", ["ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"])
def test_with_a_decoder_compact_lines_are_decoded_once_and_not_probed(kind: str) -> None:
    line = envelope(kind, OBJ)
    ev = parse_line(line, _strip)
    plain = parse_line(line)
    assert (ev.type, ev.raw) == (plain.type, plain.raw)
    assert ev.prepared is not None and ev.probed is None and not ev.is_decoded
    obj, cut = ev.prepared
    assert "managedFields" not in obj["metadata"] and msgspec.json.decode(cut) == obj
    assert ev.resource_version() == "42" and ev.object == OBJ


def test_with_a_decoder_a_bookmark_still_reads_its_annotations() -> None:
    mark = {"kind": "ConfigMap", "metadata": {"resourceVersion": "7", "annotations": {INITIAL_EVENTS_END: "true"}}}
    ev = parse_line(envelope(BOOKMARK, mark), _strip)
    assert ev.prepared is not None and ev.is_initial_events_end() and ev.resource_version() == "7"
    no_meta = parse_line(envelope("ADDED", {"kind": "X"}), _strip)
    assert no_meta.prepared is not None and no_meta.resource_version() == ""


@pytest.mark.parametrize("obj", [
    [1, 2],                                                                   # not an object
    {"metadata": None, "kind": "X"},                                          # metadata not an object
    {"metadata": {"resourceVersion": 7}},                                     # a resourceVersion not a string
    {"metadata": {"resourceVersion": "7", "annotations": {"a": 1}}},          # annotations not strings
])
def test_with_a_decoder_objects_the_probe_refuses_parse_as_without_one(obj: object) -> None:
    line = envelope("ADDED", obj)
    ev, plain = parse_line(line, _strip), parse_line(line)
    assert ev.prepared is None and (ev.type, ev.raw, ev.probed) == (plain.type, plain.raw, plain.probed)


def test_with_a_decoder_broken_json_still_fails() -> None:
    with pytest.raises(msgspec.DecodeError):
        parse_line(envelope("ADDED", OBJ)[:-2] + b"}", _strip)
    line = envelope("ADDED", OBJ).replace(b'"kind":', b'"kind"::', 1)  # the object's own JSON broken
    with pytest.raises(msgspec.DecodeError):
        parse_line(line, _strip)
