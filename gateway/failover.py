"""Which backend answers a request: the topology's cluster, or its fallback.

Fallback is used on a connect error, a timeout before the first byte, a 5xx and (if configured) a
429 from the cluster, never after the first byte reached the client. A circuit breaker per topology
keeps a dead cluster from being tried on every request. An answer that is not an engine's (a body
that is not JSON, an HTML page) is not passed on.
"""

from __future__ import annotations

import json
import logging
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import aiohttp

from gateway import upstream
from gateway.bodies import read_whole
from gateway.breaker import Breaker
from gateway.bulkhead import bulkhead_for
from gateway.errors import GatewayError
from gateway.outcome import Outcome
from gateway.recorder import BreakerRecord, recorder
from gateway.routes import RouteEntry

logger = logging.getLogger(__name__)

_breakers: dict[int, Breaker] = {}


def breaker_for(entry: RouteEntry) -> Breaker:
    found = _breakers.get(entry.topology_id)
    if found is None:
        found = Breaker(failures_to_open=entry.breaker_failures, open_seconds=entry.breaker_open_seconds)
        _breakers[entry.topology_id] = found
    found.failures_to_open = entry.breaker_failures
    found.open_seconds = entry.breaker_open_seconds
    return found


def _note(entry: RouteEntry, state: str | None, reason: str) -> None:
    if state is not None:
        logger.warning("gateway breaker of topology %s is %s: %s", entry.topology_name, state, reason)
        recorder().breaker(BreakerRecord(topology_id=entry.topology_id, state=state, reason=reason))


def _quiet(entry: RouteEntry, state: str | None, reason: str) -> None:
    """A probe's breaker changes are nobody's: not logged, not recorded as the gateway's."""


@dataclass
class Upstream:
    url: str
    body: bytes
    headers: dict[str, str]
    backend: str


def _body(request: dict[str, Any], model: str, raw: bytes | None) -> bytes:
    """The request for `model`: the caller's own bytes when they already name it, else re-encoded."""
    if raw is not None and request.get("model") == model:
        return raw
    return json.dumps({**request, "model": model}).encode()


def _cluster_call(
    path: str, request: dict[str, Any], entry: RouteEntry, raw: bytes | None, outcome: Outcome
) -> Upstream:
    body = _body(request, entry.model, raw)
    return Upstream(f"{entry.endpoint}{path}", body, outcome.trace_headers(), "cluster")


def _fallback_call(
    path: str, request: dict[str, Any], entry: RouteEntry, raw: bytes | None, outcome: Outcome
) -> Upstream:
    assert entry.fallback is not None
    body = _body(request, entry.fallback.model, raw)
    headers = outcome.trace_headers()
    if entry.fallback.api_key:
        headers["Authorization"] = f"Bearer {entry.fallback.api_key}"
    return Upstream(f"{entry.fallback.base_url}{path.removeprefix('/v1')}", body, headers, "fallback")


class Problem(str):
    """Why an answer cannot be passed on; `invalid`: it is not an engine's answer (a non-JSON body, an
    HTML page), as opposed to no answer in time."""

    invalid = False


def _invalid(text: str) -> Problem:
    problem = Problem(text)
    problem.invalid = True
    return problem


async def answer_problem(response: aiohttp.ClientResponse, *, whole: bool) -> Problem:
    """Why this answer cannot be passed on, or "" when it can; waits for its first byte.

    `whole` (a request not streamed): the whole body is read here and must be JSON (an HTML page from
    a proxy in front of the engine is not an answer, whatever its status). A stream: its first byte
    must come within the read timeout, and a 200 must not be an HTML page. What is read is put back,
    so the caller reads the answer from its start. Nothing has reached the client yet: a problem here
    can still go to the fallback."""
    status, kind = response.status, response.content_type
    if status in (404, 405):
        return Problem("")  # the path is not served there: the engine is up (Responses then asks in chat)
    try:
        if whole:
            body = await read_whole(response)
            _unread(response, body)  # the caller reads it again from the buffer
            try:
                json.loads(body)
            except (ValueError, RecursionError):
                return _invalid(f"answered {status} with a body that is not JSON ({kind}, {len(body)} bytes)")
            return Problem("")
        first = await response.content.readany()
        _unread(response, first)
    except TimeoutError:
        return Problem(f"answered {status} but sent no byte of its body in time")
    except aiohttp.ClientError as error:
        return Problem(f"answered {status} but its body failed ({type(error).__name__})")
    if not first:
        return Problem(f"answered {status} and closed the stream before its first byte")
    if status == 200 and kind == "text/html":
        return _invalid(f"answered {status} with an HTML page, not an event stream")
    return Problem("")


def _unread(response: aiohttp.ClientResponse, data: bytes) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the one way to peek at an aiohttp body
        response.content.unread_data(data)


def _cluster_failed(entry: RouteEntry, reason: str) -> GatewayError:
    return GatewayError(
        503,
        "cluster_unavailable",
        f"Topology {entry.topology_name} cannot serve {entry.model}: {reason}, and it has no fallback. "
        "Configure a fallback upstream on the topology's gateway settings, or fix the cluster.",
        headers={"retry-after": "5"},
        reason=reason,
    )


async def _try_cluster(
    path: str,
    request: dict[str, Any],
    entry: RouteEntry,
    outcome: Outcome,
    raw: bytes | None,
    breaker: Breaker,
    note: Callable[[RouteEntry, str | None, str], None],
) -> tuple[aiohttp.ClientResponse | None, Problem]:
    """(the cluster's answer to pass on, or None and why the cluster could not be used).

    The request waits in the cluster's bulkhead until its first byte is in; a full bulkhead turns it
    away before the breaker is asked, so it neither counts as a failure nor takes the half-open trial
    (the requests already waiting tell the breaker how the cluster is)."""
    bulkhead = None if outcome.probe else bulkhead_for(entry.endpoint)  # a probe always tries
    if bulkhead is not None and not bulkhead.enter():
        return None, Problem(f"the cluster {bulkhead.refusal()}")
    try:
        return await _ask_cluster(path, request, entry, outcome, raw, breaker, note)
    finally:
        if bulkhead is not None:
            bulkhead.leave()


async def _ask_cluster(
    path: str,
    request: dict[str, Any],
    entry: RouteEntry,
    outcome: Outcome,
    raw: bytes | None,
    breaker: Breaker,
    note: Callable[[RouteEntry, str | None, str], None],
) -> tuple[aiohttp.ClientResponse | None, Problem]:
    """The breaker's ticket ends in success or failure here, or is released in `finally` when this is
    left any other way (the client went away and the task was cancelled, an unexpected error)."""
    ticket, changed = breaker.allow(time.monotonic())
    note(entry, changed, "trying the cluster again")
    if ticket is None:
        return None, Problem(f"the cluster is skipped for now (circuit open: {breaker.last_reason})")
    ended = False
    response: aiohttp.ClientResponse | None = None
    try:
        call = _cluster_call(path, request, entry, raw, outcome)
        try:
            response = await upstream.post(
                call.url, call.body, headers=call.headers, first_byte_timeout=entry.timeout
            )
        except upstream.UpstreamFailed as failed:
            reason = Problem(failed.reason)
        else:
            retryable = response.status >= 500 or (
                response.status == 429 and entry.fallback is not None and entry.fallback.on_429
            )
            problem = Problem("")
            if not retryable or entry.fallback is None:  # what the client would get: is it an answer?
                problem = await answer_problem(response, whole=request.get("stream") is not True)
            if not retryable and not problem:
                ended = True
                note(entry, breaker.success(ticket), "the cluster answered")
                outcome.backend = "cluster"
                return response, Problem("")
            reason = Problem(
                f"the cluster {problem}" if problem else f"the cluster answered {response.status}"
            )
            reason.invalid = problem.invalid
            if entry.fallback is None and not problem:  # a 5xx (or 429) in the engine's own words
                ended = True
                note(entry, breaker.failure(time.monotonic(), reason, ticket), reason)
                outcome.backend = "cluster"
                return response, Problem("")  # no fallback: the caller gets the cluster's own error
            response.release()
        ended = True
        note(entry, breaker.failure(time.monotonic(), reason, ticket), reason)
        return None, reason
    finally:
        if not ended:
            breaker.release(ticket)
            if response is not None:
                response.close()  # cancelled or failed while reading it: the connection is not reused


async def open_answer(
    path: str,
    request: dict[str, Any],
    entry: RouteEntry,
    outcome: Outcome,
    *,
    raw: bytes | None = None,
    fallback: tuple[str, dict[str, Any]] | None = None,
) -> aiohttp.ClientResponse:
    """The upstream response (headers in, first byte waited for) from the cluster, or the fallback
    when the cluster fails. `raw` is the caller's body when `request` is exactly its parse (sent as it
    came when the model name needs no change). `fallback` is another (path, request) for the
    fallback, when it differs."""
    if outcome.probe:
        breaker, note = Breaker(failures_to_open=1_000_000, open_seconds=0.0), _quiet
    else:
        breaker, note = breaker_for(entry), _note
    if entry.endpoint:
        response, reason = await _try_cluster(path, request, entry, outcome, raw, breaker, note)
        if response is not None:
            return response
    else:
        reason = Problem("no serving endpoint is known for this topology yet")
    if entry.fallback is None:
        if reason.invalid:
            raise GatewayError(502, "upstream_invalid_answer", _invalid_answer(entry, reason), reason=reason)
        raise _cluster_failed(entry, reason)
    path, request = fallback if fallback is not None else (path, request)
    call = _fallback_call(path, request, entry, raw if fallback is None else None, outcome)
    try:
        response = await upstream.post(
            call.url, call.body, headers=call.headers, first_byte_timeout=entry.timeout
        )
    except upstream.UpstreamFailed as failed:
        raise _all_down(entry, reason, failed.reason) from None
    if response.status in (401, 403):
        response.release()
        raise GatewayError(
            502,
            "fallback_rejected_key",
            f"The cluster is unavailable ({reason}) and the fallback upstream refused Tandem's key for it "
            f"({response.status}); update the fallback key on the topology's gateway settings.",
        )
    try:
        problem = await answer_problem(response, whole=request.get("stream") is not True)
    except BaseException:
        response.close()
        raise
    if problem.invalid:
        response.release()
        message = f"the cluster failed ({reason}) and the fallback {problem}"
        raise GatewayError(
            502, "upstream_invalid_answer", message[0].upper() + message[1:] + ".", reason=problem
        )
    if problem:
        response.release()
        raise _all_down(entry, reason, f"the fallback {problem}")
    outcome.backend = "fallback"
    return response


def _invalid_answer(entry: RouteEntry, reason: str) -> str:
    return (
        f"Topology {entry.topology_name}'s serving endpoint did not answer like an OpenAI-compatible "
        f"engine: {reason}. A proxy or load balancer in front of the engine may be answering instead; "
        "check the serving endpoint, or configure a fallback upstream."
    )


def _all_down(entry: RouteEntry, reason: str, fallback_reason: str) -> GatewayError:
    return GatewayError(
        503,
        "all_backends_down",
        f"Topology {entry.topology_name} is unavailable ({reason}) and its fallback too ({fallback_reason}).",
        headers={"retry-after": "5"},
        reason=fallback_reason,
    )
