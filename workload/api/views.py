"""Workload REST: a topology's hit rate explained and its request trace; trace files checked and converted."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.parsers import BaseParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.roles import Role
from controlplane.api.errors import DomainError
from keys.scopes import Scope
from topologies.models import Topology
from workload import selectors
from workload.api.serializers import (
    HitRateSerializer,
    ImportQuerySerializer,
    TraceSummarySerializer,
    WindowQuerySerializer,
)
from workload.hitrate import reuse
from workload.tracefile import MAX_REQUESTS, TraceError, TraceRequest, export_jsonl, parse

WINDOW = [
    OpenApiParameter("start", OpenApiTypes.STR, description="Unix seconds or ISO 8601; default end-1h."),
    OpenApiParameter("end", OpenApiTypes.STR, description="Unix seconds or ISO 8601; default now."),
]
TEXT_TYPES = ("text/plain", "text/csv", "application/x-ndjson", "application/jsonl", "application/json")


class TraceFileParser(BaseParser):
    """The uploaded trace as bytes (its format is read from its content, not its Content-Type)."""

    media_type = "*/*"

    def parse(
        self, stream: Any, media_type: str | None = None, parser_context: Any = None
    ) -> dict[str, bytes]:
        return {"file": stream.read() if stream is not None else b""}


def _stamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=UTC).isoformat()


class TopologyHitRateView(APIView):
    required_scopes = {"read": Scope.TELEMETRY_READ}

    @extend_schema(
        operation_id="topology_hit_rate",
        summary="The prefix-cache hit rate of a topology, explained",
        description=(
            "Over the window: the share of requests repeating an earlier prefix group (gateway records), "
            "the share of those placed on a warm instance (kept traces' engine spans) and the engines' "
            "delivered hit rate (telemetry), with the largest loss in words. See docs/hit-rate.md."
        ),
        parameters=WINDOW,
        responses=HitRateSerializer,
    )
    def get(self, request: Request, pk: int) -> Response:
        topology = get_object_or_404(Topology, pk=pk)
        query = WindowQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        start, end = query.validated_data["start"], query.validated_data["end"]
        found = selectors.hit_rate_breakdown(topology_id=topology.pk, start=start, end=end)
        return Response(selectors.breakdown_payload(found, start=start, end=end))


class TopologyTraceView(APIView):
    required_scopes = {"read": Scope.TELEMETRY_READ}

    @extend_schema(
        operation_id="topology_request_trace",
        summary="The request trace of a topology's window, in Tandem's trace format",
        description=(
            "Application requests through the gateway in the window (no probes), one JSON line each "
            "after a header line: arrival_ms (from the first request), prompt_tokens, output_tokens, "
            "prefix_group. Served as text/plain, to save as <name>.jsonl. See docs/hit-rate.md."
        ),
        parameters=WINDOW,
        responses={(200, "text/plain"): OpenApiResponse(OpenApiTypes.STR, description="Tandem JSONL.")},
    )
    def get(self, request: Request, pk: int) -> HttpResponse:
        topology = get_object_or_404(Topology, pk=pk)
        query = WindowQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        start, end = query.validated_data["start"], query.validated_data["end"]
        found = selectors.trace_requests(topology_id=topology.pk, start=start, end=end)
        if len(found) > MAX_REQUESTS:
            raise DomainError(
                f"the window holds {len(found)} requests, more than {MAX_REQUESTS}; narrow it",
                fields={"start": ["move start later"]},
            )
        header = {
            "topology": topology.name,
            "start": _stamp(start),
            "end": _stamp(end),
            "requests": len(found),
        }
        response = HttpResponse(export_jsonl(found, header), content_type="text/plain; charset=utf-8")
        stamp = datetime.fromtimestamp(start, tz=UTC).strftime("%Y%m%dT%H%M%SZ")
        response["Content-Disposition"] = f'attachment; filename="{topology.name}-{stamp}.jsonl"'
        return response


def summary(chosen: str, requests: list[TraceRequest]) -> dict[str, Any]:
    counts = reuse(r.prefix_group for r in requests)
    n = len(requests)
    return {
        "format": chosen,
        "requests": n,
        "duration_ms": requests[-1].arrival_ms - requests[0].arrival_ms,
        "prompt_tokens_mean": sum(r.prompt_tokens for r in requests) / n,
        "output_tokens_mean": sum(r.output_tokens for r in requests) / n,
        "prefix_groups": counts.groups,
        "reuse": counts.repeats / n if counts.requests else None,
    }


def _read_upload(request: Request) -> tuple[str, list[TraceRequest]]:
    query = ImportQuerySerializer(data=request.query_params)
    query.is_valid(raise_exception=True)
    raw = request.data.get("file", b"") if isinstance(request.data, dict) else b""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise DomainError(
            f"the file is not UTF-8 text (byte {error.start}); save it as UTF-8",
            code="invalid_trace",
            fields={"file": ["not UTF-8 text"]},
        ) from None
    try:
        return parse(text, query.validated_data.get("file_format", ""))
    except TraceError as error:
        where = f"line {error.line}, " if error.line else ""
        raise DomainError(
            f"{where}{error.field}: {error.message}",
            code="invalid_trace",
            fields={error.field: [f"{where}{error.message}"]},
        ) from None


FORMAT = [
    OpenApiParameter(
        "file_format",
        OpenApiTypes.STR,
        enum=["tandem", "mooncake", "azure"],
        description="The file's format; default: read from its first line.",
    )
]
UPLOAD_BODY = {media: OpenApiTypes.STR for media in TEXT_TYPES}
ABOUT_UPLOAD = (
    "The body is the file itself: Tandem's JSONL, Mooncake's JSONL (timestamp, input_length, output_length, "
    "hash_ids) or Azure's CSV (TIMESTAMP,ContextTokens,GeneratedTokens), up to the API's body limit (a "
    "larger one is a 413). A bad file is a 400 naming the line and the field. See docs/hit-rate.md."
)


class TraceImportView(APIView):
    required_scopes = {"write": Scope.TELEMETRY_READ}
    write_role = Role.VIEWER  # reads the upload and answers; nothing is stored
    parser_classes = [TraceFileParser]

    @extend_schema(
        operation_id="trace_import",
        summary="Check a trace file: what it holds",
        description=ABOUT_UPLOAD,
        responses=TraceSummarySerializer,
        parameters=FORMAT,
        request=UPLOAD_BODY,
    )
    def post(self, request: Request) -> Response:
        chosen, found = _read_upload(request)
        return Response(summary(chosen, found))


class TraceConvertView(APIView):
    required_scopes = {"write": Scope.TELEMETRY_READ}
    write_role = Role.VIEWER
    parser_classes = [TraceFileParser]

    @extend_schema(
        operation_id="trace_convert",
        summary="Read a trace file as Tandem's trace format",
        description=ABOUT_UPLOAD + " The answer is the same requests in Tandem's JSONL (text/plain).",
        responses={(200, "text/plain"): OpenApiResponse(OpenApiTypes.STR, description="Tandem JSONL.")},
        parameters=FORMAT,
        request=UPLOAD_BODY,
    )
    def post(self, request: Request) -> HttpResponse:
        chosen, found = _read_upload(request)
        header = {"source_format": chosen, "requests": len(found)}
        return HttpResponse(export_jsonl(found, header), content_type="text/plain; charset=utf-8")
