"""The event reader gives the same events however the bytes are cut, with LF and CRLF blank lines."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.sse import SseReader, event_type

EVENTS = [
    b"event: response.created\ndata: {}\n\n",
    b'data: {"choices":[]}\n\n',
    b"event: response.output_text.delta\r\ndata: {}\r\n\r\n",
    b": a comment\n\n",
    b"data: [DONE]\n\n",
]


def _read(pieces: list[bytes]) -> tuple[list[bytes], bytes]:
    reader = SseReader()
    events = [event for piece in pieces for event in reader.feed(piece)]
    return events, reader.rest()


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from(EVENTS), max_size=8),
    st.binary(max_size=6).filter(lambda tail: b"\n\n" not in tail and b"\r\n\r\n" not in tail),
    st.lists(st.integers(min_value=0, max_value=400), max_size=6),
)
def test_events_do_not_depend_on_where_the_bytes_were_cut(events, tail, cuts):
    stream = b"".join(events) + tail
    points = sorted({min(c, len(stream)) for c in cuts})
    pieces = [stream[a:b] for a, b in zip([0, *points], [*points, len(stream)], strict=True)]
    assert _read(pieces) == (events, tail)


def test_an_event_cut_inside_its_blank_line_waits_for_the_rest():
    reader = SseReader()
    assert reader.feed(b"data: 1\n") == []
    assert reader.feed(b"\ndata: 2\r\n\r") == [b"data: 1\n\n"]
    assert reader.feed(b"\n") == [b"data: 2\r\n\r\n"]


def test_event_type_reads_the_first_line_only():
    assert event_type(b"event: response.completed\ndata: {}\n\n") == b"response.completed"
    assert event_type(b"event:response.failed\r\ndata: {}\r\n\r\n") == b"response.failed"
    assert event_type(b'data: {"type": "response.completed"}\n\n') == b""
