"""W3C traceparent parsing and formatting (gateway.tracecontext): pure, no database."""

from __future__ import annotations

import pytest

from gateway import tracecontext

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"


def test_it_reads_a_version_00_traceparent():
    assert tracecontext.parse_traceparent(f"00-{TRACE}-{PARENT}-01") == (TRACE, PARENT, "01")
    assert tracecontext.parse_traceparent(f" 00-{TRACE}-{PARENT}-00\t") == (TRACE, PARENT, "00")


@pytest.mark.parametrize(
    "value",
    [
        None,
        "",
        f"00-{'0' * 32}-{PARENT}-01",  # an all-zero trace id is invalid
        f"00-{TRACE}-{'0' * 16}-01",  # an all-zero parent id too
        f"00-{TRACE.upper()}-{PARENT}-01",  # hex must be lowercase
        f"ff-{TRACE}-{PARENT}-01",  # version ff is forbidden
        f"00-{TRACE}-{PARENT}-01-extra",  # version 00 is exactly 55 characters
        f"00-{TRACE[:-1]}-{PARENT}-01",
        f"00-{TRACE}-{PARENT}-1",
        f"00_{TRACE}_{PARENT}_01",
        f"0g-{TRACE}-{PARENT}-01",
        f"00-{TRACE}-{PARENT}-zz",
    ],
)
def test_it_refuses_an_invalid_traceparent(value):
    assert tracecontext.parse_traceparent(value) is None


def test_it_reads_a_later_version_by_its_first_four_fields():
    assert tracecontext.parse_traceparent(f"01-{TRACE}-{PARENT}-01-what-comes-later") == (TRACE, PARENT, "01")
    assert tracecontext.parse_traceparent(f"01-{TRACE}-{PARENT}-01") == (TRACE, PARENT, "01")
    assert tracecontext.parse_traceparent(f"01-{TRACE}-{PARENT}-01x") is None


def test_new_ids_are_lowercase_hex_of_the_right_length_and_differ():
    trace_id, span_id = tracecontext.new_ids()
    assert len(trace_id) == 32 and len(span_id) == 16
    assert int(trace_id, 16) and int(span_id, 16)
    assert tracecontext.new_ids() != (trace_id, span_id)
    assert len(tracecontext.new_span_id()) == 16 and len(tracecontext.new_trace_id()) == 32


def test_formatted_traceparent_parses_back():
    header = tracecontext.format_traceparent(TRACE, PARENT)
    assert header == f"00-{TRACE}-{PARENT}-01"
    assert tracecontext.parse_traceparent(header) == (TRACE, PARENT, "01")


def test_upstream_headers_name_the_gateway_span_and_keep_tracestate():
    assert tracecontext.upstream_headers(TRACE, PARENT, "congo=t61rcWkgMzE") == {
        "traceparent": f"00-{TRACE}-{PARENT}-01",
        "tracestate": "congo=t61rcWkgMzE",
    }
    assert tracecontext.upstream_headers(TRACE, PARENT, None) == {"traceparent": f"00-{TRACE}-{PARENT}-01"}
    assert tracecontext.valid_tracestate("a=" + "x" * 600) is None
