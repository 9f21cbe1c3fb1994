"""Trace files: Tandem's own JSONL round-trips; Mooncake's JSONL and Azure's CSV read as published."""

from __future__ import annotations

import pytest

from workload.tracefile import TraceError, TraceRequest, export_jsonl, parse

# kvcache-ai/Mooncake, FAST25-release/README.md ("Trace Format"): its two sample requests.
MOONCAKE = (
    '{"timestamp": 27482, "input_length": 6955, "output_length": 52, '
    '"hash_ids": [46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 2353, 2354]}\n'
    '{"timestamp": 30535, "input_length": 6472, "output_length": 26, '
    '"hash_ids": [46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 2366]}\n'
)
# Azure/AzurePublicDataset, data/AzureLLMInferenceTrace_code.csv: its header and first two lines.
AZURE = """TIMESTAMP,ContextTokens,GeneratedTokens
2023-11-16 18:17:03.9799600,4808,10
2023-11-16 18:17:04.0319600,3180,8
"""


def test_tandem_trace_round_trips() -> None:
    requests = [TraceRequest(0, 812, 64, "9f2c0a1b2c3d4e5f"), TraceRequest(250, 90, 12, "")]
    text = export_jsonl(requests, {"topology": "chat", "start": "2026-12-03T11:00:00+00:00"})
    assert text.splitlines()[0].startswith('{"format":"tandem-trace","version":1')
    assert parse(text) == ("tandem", requests)


def test_mooncake_sample_shares_its_first_block_group_and_starts_at_zero() -> None:
    chosen, requests = parse(MOONCAKE)
    assert chosen == "mooncake"
    assert [(r.arrival_ms, r.prompt_tokens, r.output_tokens) for r in requests] == [
        (0, 6955, 52),
        (3053, 6472, 26),
    ]
    assert requests[0].prefix_group == requests[1].prefix_group != ""


def test_azure_sample_reads_arrivals_in_milliseconds() -> None:
    chosen, requests = parse(AZURE)
    assert chosen == "azure"
    assert requests == [TraceRequest(0, 4808, 10, ""), TraceRequest(52, 3180, 8, "")]


@pytest.mark.parametrize(
    ("text", "line", "field"),
    [
        (MOONCAKE.replace('"input_length": 6472', '"input_length": -1'), 2, "input_length"),
        (MOONCAKE.replace('"output_length": 52, ', ""), 1, "output_length"),
        (MOONCAKE + "{not json\n", 3, "json"),
        (AZURE + "2023-11-16 18:17:05.1,12\n", 4, "columns"),
        (AZURE + "yesterday,12,3\n", 4, "TIMESTAMP"),
        (AZURE.replace("3180", "many"), 3, "ContextTokens"),
        (
            '{"format":"tandem-trace","version":1}\n{"arrival_ms":5,"prompt_tokens":1,"output_tokens":1}\n'
            '{"arrival_ms":2,"prompt_tokens":1,"output_tokens":1}\n',
            3,
            "arrival_ms",
        ),
        ("hello,world\n", 1, "format"),
    ],
)
def test_bad_lines_name_the_line_and_field(text: str, line: int, field: str) -> None:
    with pytest.raises(TraceError) as caught:
        parse(text)
    assert (caught.value.line, caught.value.field) == (line, field)


# kvcache-ai/Mooncake, FAST25-release/traces/conversation_trace.jsonl: its first three lines.
CONVERSATION = (
    '{"timestamp": 0, "input_length": 6758, "output_length": 500, "hash_ids": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, '
    "10, 11, 12, 13]}\n"
    '{"timestamp": 0, "input_length": 7322, "output_length": 490, "hash_ids": [0, 14, 15, 16, 17, 18, 19, '
    "20, 21, 22, 23, 24, 25, 26, 27]}\n"
    '{"timestamp": 0, "input_length": 7236, "output_length": 794, "hash_ids": [0, 28, 29, 30, 31, 32, 33, '
    "34, 35, 36, 37, 38, 39, 40, 41]}\n"
)


def test_mooncake_conversation_lines_arrive_together_sharing_their_first_block() -> None:
    chosen, requests = parse(CONVERSATION)
    assert chosen == "mooncake"
    assert [(r.arrival_ms, r.prompt_tokens, r.output_tokens) for r in requests] == [
        (0, 6758, 500),
        (0, 7322, 490),
        (0, 7236, 794),
    ]
    assert len({r.prefix_group for r in requests}) == 1
