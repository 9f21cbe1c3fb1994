"""The API verbs that are more than one call on `Api`: reading a request body (JSON, YAML or
protobuf), list (paged, or as a `Table`), watch, delete with its options, deletecollection, writes
to the `scale` subresource, and the `proxy` subresource of pods and services."""

from __future__ import annotations

import base64
import json
from typing import Any

from aiohttp import web

from sandbox.apiserver import protobuf, scale, table
from sandbox.apiserver import proxy as proxying
from sandbox.apiserver import watch as watching
from sandbox.apiserver.errors import ApiError, bad_request
from sandbox.apiserver.objects import Api
from sandbox.apiserver.respond import json_response, truthy
from sandbox.apiserver.routing import Target
from sandbox.apiserver.selectors import parse_field_selector, parse_label_selector

DEFAULT_WATCH_TIMEOUT = 1800.0


async def read_body(request: web.Request) -> dict[str, Any]:
    """The request's object: JSON, YAML, or protobuf for what kubectl sends that way."""
    raw = await request.read()
    if "protobuf" in request.headers.get("Content-Type", ""):
        try:
            return protobuf.decode(raw)
        except protobuf.ProtobufError as exc:
            raise ApiError(
                415,
                "UnsupportedMediaType",
                f"the body of the request was in an unknown format - accepted media types include: "
                f"application/json, application/yaml ({exc}; apply a manifest instead)",
                details={},
            ) from exc
    try:
        body = json.loads(raw or b"{}")
    except ValueError:
        import yaml

        try:
            body = yaml.safe_load(raw)
        except yaml.YAMLError as exc:
            raise bad_request(f"error decoding body: {exc}") from exc
    if not isinstance(body, dict):
        raise bad_request("the body of the request must be an object")
    return body


def list_objects(api: Api, t: Target, q: Any, accept: str) -> web.Response:
    """A list, paged with `limit` and `continue`, or a `Table` when the client asks for one."""
    rt = t.rt
    items = api.select(rt, t.namespace, q.get("labelSelector"), q.get("fieldSelector"))
    rv = str(api.store.current_rv)
    meta: dict[str, Any] = {"resourceVersion": rv}
    limit = int(q.get("limit") or 0)
    offset = 0
    if q.get("continue"):
        try:
            token = json.loads(base64.urlsafe_b64decode(q["continue"]))
            offset, rv = int(token["o"]), str(token["rv"])
        except (ValueError, KeyError, TypeError) as exc:
            raise bad_request("continue key is not valid") from exc
        meta["resourceVersion"] = rv
    if limit > 0:
        remaining = len(items) - offset - limit
        page = items[offset : offset + limit]
        if remaining > 0:
            meta["continue"] = base64.urlsafe_b64encode(
                json.dumps({"o": offset + limit, "rv": rv}).encode()
            ).decode()
            meta["remainingItemCount"] = remaining
        items = page
    elif offset:
        items = items[offset:]
    if table.wants_table(accept):
        doc = table.to_table(rt, items, rv, q.get("includeObject", "Metadata"))
        doc["metadata"] = meta
        return json_response(doc)
    if not rt.custom:
        for item in items:
            item.pop("kind", None)
            item.pop("apiVersion", None)
    return json_response(
        {"kind": rt.list_kind, "apiVersion": rt.api_version, "metadata": meta, "items": items}
    )


async def watch(api: Api, request: web.Request, t: Target) -> web.StreamResponse:
    q = request.query
    rt = t.rt
    labels = parse_label_selector(q.get("labelSelector"))
    fields = parse_field_selector(q.get("fieldSelector"), rt.plural)
    if t.name:
        fields += parse_field_selector(f"metadata.name={t.name}", rt.plural)
    timeout = float(q.get("timeoutSeconds") or DEFAULT_WATCH_TIMEOUT)
    as_table = table.wants_table(request.headers.get("Accept", ""))
    include = q.get("includeObject", "Metadata")
    response = web.StreamResponse(
        status=200, headers={"Content-Type": "application/json", "Transfer-Encoding": "chunked"}
    )
    await response.prepare(request)

    def transform(obj: dict[str, Any]) -> dict[str, Any]:
        if as_table:
            return table.to_table(rt, [obj], obj["metadata"].get("resourceVersion", ""), include)
        return obj

    async def send(event: dict[str, Any]) -> None:
        await response.write(watching.encode(event))

    try:
        await watching.stream(
            api.store,
            rt,
            t.namespace,
            labels,
            fields,
            q.get("resourceVersion"),
            timeout,
            truthy(q.get("allowWatchBookmarks")),
            send,
            transform,
        )
        await response.write_eof()
    except (ConnectionResetError, RuntimeError):
        pass
    return response


async def delete(api: Api, request: web.Request, t: Target) -> web.Response:
    assert t.name is not None
    q = request.query
    options: dict[str, Any] = {}
    raw = await request.read()
    if raw:
        try:
            options = json.loads(raw)
        except ValueError as exc:
            raise bad_request("DeleteOptions body is not valid JSON") from exc
    grace = options.get("gracePeriodSeconds", q.get("gracePeriodSeconds"))
    result = api.delete(
        t.rt,
        t.namespace or "",
        t.name,
        grace_seconds=int(grace) if grace is not None else None,
        propagation=options.get("propagationPolicy") or q.get("propagationPolicy"),
        precondition_rv=(options.get("preconditions") or {}).get("resourceVersion"),
        dry_run=q.get("dryRun") == "All" or options.get("dryRun") == ["All"],
    )
    return json_response(result)


def delete_collection(api: Api, t: Target, q: Any) -> web.Response:
    for obj in api.select(t.rt, t.namespace, q.get("labelSelector"), q.get("fieldSelector")):
        try:
            api.delete(t.rt, obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
        except ApiError:
            continue
    return json_response({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"})


async def scale_write(api: Api, request: web.Request, t: Target, manager: str) -> web.Response:
    assert t.name is not None
    namespace = t.namespace or ""
    # The body is read before the object: a patch applies to the object as it is when the patch is
    # applied (a controller's write while the body arrives is no conflict, as on a real API server);
    # only a resourceVersion the client sent is a precondition.
    if request.method == "PUT":
        wanted = await read_body(request)
    else:
        from sandbox.apiserver import patch as patching

        raw = await request.read()
        content_type = request.headers.get("Content-Type", "").split(";")[0]
        body = json.loads(raw or b"{}")
        current = scale.get_scale(api, t.rt, namespace, t.name)
        if content_type == "application/json-patch+json":
            wanted = patching.json_patch(current, body)
        elif content_type == "application/strategic-merge-patch+json":
            wanted = patching.strategic_merge_patch(current, body)
        else:
            wanted = patching.merge_patch(current, body)
    return json_response(scale.update_scale(api, t.rt, namespace, t.name, wanted, manager=manager))


async def proxy(api: Api, relay: proxying.Proxy, request: web.Request, t: Target) -> web.StreamResponse:
    assert t.name is not None
    namespace = t.namespace or ""
    wanted = proxying.split_name(t.proxy_name)
    obj = api.get(t.rt, namespace, t.name)
    if t.rt.plural == "pods":
        ip, port = proxying.pod_location(obj, wanted)
    else:
        endpoints = api.store.peek("", "endpoints", namespace, t.name)
        ip, port = proxying.service_location(obj, endpoints, wanted)
    return await relay.relay(request, wanted.scheme, ip, port, t.proxy_path)
