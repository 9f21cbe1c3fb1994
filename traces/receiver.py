"""POST /v1/traces: an OTLP/HTTP trace receiver on the gateway's lean ASGI path.

Authenticated by an API key holding the `traces:write` scope (the `telemetry` purpose), sent as
`Authorization: Bearer tdm_i_...` (OTEL_EXPORTER_OTLP_TRACES_HEADERS). Answers as OTLP/HTTP asks:
200 with an ExportTraceServiceResponse (partial_success when spans were rejected), 400 with a
google.rpc.Status on a body that is not an export request, 413 over TRACES_MAX_BODY_MB, 415 on an
encoding other than protobuf or JSON. Decoding and the write run in a worker thread.
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings

from gateway import incoming
from keys.hotpath import KeyRefused
from keys.hotpath_async import authenticate
from keys.scopes import Scope
from traces import otlp, services

logger = logging.getLogger(__name__)
PATH = "/v1/traces"
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
# google.rpc.Code values for the Status body
INVALID_ARGUMENT, UNAUTHENTICATED, PERMISSION_DENIED, RESOURCE_EXHAUSTED, UNAVAILABLE = 3, 16, 7, 8, 14


class Refused(Exception):
    def __init__(
        self, status: int, code: int, message: str, headers: tuple[tuple[bytes, bytes], ...] = ()
    ) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.headers = status, code, message, headers


def _headers(scope: dict[str, Any]) -> dict[bytes, str]:
    return {k: v.decode("latin-1") for k, v in scope.get("headers", ())}


def _token(headers: dict[bytes, str]) -> str:
    header = headers.get(b"authorization", "")
    scheme, _, rest = header.partition(" ")
    if scheme.lower() == "bearer" and rest.strip():
        return rest.strip()
    if headers.get(b"x-api-key"):
        return headers[b"x-api-key"].strip()
    raise Refused(
        401,
        UNAUTHENTICATED,
        "No API key: send `Authorization: Bearer tdm_i_...` with a key of the telemetry purpose "
        "(OTEL_EXPORTER_OTLP_TRACES_HEADERS=Authorization=Bearer%20tdm_i_...).",
    )


async def _read(receive: Receive, limit: int) -> bytes:
    return await incoming.read_upto(
        receive,
        limit,
        lambda: Refused(
            413,
            RESOURCE_EXHAUSTED,
            f"The export request is over {limit // 1048576} MiB: send smaller batches.",
        ),
    )


def _inflate(body: bytes, encoding: str, limit: int) -> bytes:
    if not encoding or encoding == "identity":
        return body
    if encoding != "gzip":
        raise Refused(
            415, INVALID_ARGUMENT, f"Content-Encoding {encoding!r} is not served: send gzip or none."
        )
    inflater = zlib.decompressobj(wbits=31)
    try:
        out = inflater.decompress(body, limit + 1)
    except zlib.error:
        raise Refused(400, INVALID_ARGUMENT, "The body is not valid gzip.") from None
    if len(out) > limit:
        raise Refused(413, RESOURCE_EXHAUSTED, f"The export request inflates to over {limit // 1048576} MiB.")
    return out


async def serve(scope: dict[str, Any], receive: Receive, send: Send, *, source_ip: str | None) -> None:
    headers = _headers(scope)
    kind = headers.get(b"content-type", "").split(";")[0].strip().lower()
    answer_as = otlp.PROTOBUF if kind == otlp.PROTOBUF else otlp.JSON
    grant = None
    try:
        if scope["method"] != "POST":
            raise Refused(405, INVALID_ARGUMENT, f"{PATH} takes POST (OTLP/HTTP export requests).")
        if kind not in (otlp.PROTOBUF, otlp.JSON):
            raise Refused(
                415,
                INVALID_ARGUMENT,
                "Send Content-Type application/x-protobuf or application/json (OTLP/HTTP).",
            )
        token = _token(headers)
        limit = settings.TRACES_MAX_BODY_BYTES
        body = _inflate(
            await _read(receive, limit), headers.get(b"content-encoding", "").strip().lower(), limit
        )
        try:
            grant = await authenticate(token, kind="inference", source_ip=source_ip)
        except KeyRefused as refused:
            extra = ((b"retry-after", str(refused.retry_after).encode()),) if refused.retry_after else ()
            code = (
                UNAUTHENTICATED
                if refused.status == 401
                else RESOURCE_EXHAUSTED
                if refused.status == 429
                else PERMISSION_DENIED
            )
            raise Refused(refused.status, code, refused.message, extra) from None
        if Scope.TRACES_WRITE not in grant.record.scopes:
            raise Refused(
                403,
                PERMISSION_DENIED,
                "This key lacks the `traces:write` scope: use a key of the telemetry purpose.",
            )
        try:
            received = await sync_to_async(services.spans_receive, thread_sensitive=False)(
                body=body, content_type=kind
            )
        except otlp.OtlpError as error:
            raise Refused(400, INVALID_ARGUMENT, str(error)) from None
        payload = otlp.success_body(answer_as, rejected=received.rejected, problem=received.problem)
        await send(
            {"type": "http.response.start", "status": 200, "headers": [(b"content-type", answer_as.encode())]}
        )
        await send({"type": "http.response.body", "body": payload})
    except Refused as refused:
        body = otlp.error_body(answer_as, code=refused.code, message=refused.message)
        start = [(b"content-type", answer_as.encode()), *refused.headers]
        await send({"type": "http.response.start", "status": refused.status, "headers": start})
        await send({"type": "http.response.body", "body": body})
    except ConnectionResetError:
        return
    except Exception:  # the database or Redis failed: the exporter retries a 503 (OTLP's retryable codes)
        logger.exception("could not store an OTLP export request")
        body = otlp.error_body(
            answer_as, code=UNAVAILABLE, message="Tandem could not store the spans now; retry."
        )
        start = [(b"content-type", answer_as.encode()), (b"retry-after", b"5")]
        await send({"type": "http.response.start", "status": 503, "headers": start})
        await send({"type": "http.response.body", "body": body})
    finally:
        if grant is not None:
            try:
                await grant.settle(tokens_used=0)
            except Exception:
                logger.warning("could not settle a trace export's key usage")
