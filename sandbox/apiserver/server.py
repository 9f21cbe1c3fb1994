"""HTTP layer: routing of Kubernetes API paths to the object semantics in `objects.py`."""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aiohttp import web

from sandbox.apiserver import authn, discovery, faults, logs, openapi, protobuf, rbac, scale, table
from sandbox.apiserver import proxy as proxying
from sandbox.apiserver import watch as watching
from sandbox.apiserver.audit import AuditLog
from sandbox.apiserver.errors import ApiError, bad_request, method_not_allowed, not_found, unauthorized
from sandbox.apiserver.objects import Api
from sandbox.apiserver.rbac_escalation import EscalationCheck
from sandbox.apiserver.resources import ResourceType
from sandbox.apiserver.selectors import parse_field_selector, parse_label_selector
from sandbox.apiserver.ssa import manager_from_user_agent

log = logging.getLogger("sandbox.apiserver")
PUBLIC_PATHS = {"/version", "/version/", "/healthz", "/livez", "/readyz"}
DEFAULT_WATCH_TIMEOUT = 1800.0
PROXIED = frozenset({"pods", "services"})


@dataclass(frozen=True)
class Target:
    rt: ResourceType
    namespace: str | None
    name: str | None
    subresource: str
    watch_path: bool
    proxy_name: str = ""  # `proxy` subresource: the `[scheme:]name[:port]` segment
    proxy_path: str = ""  # and the path after `/proxy/`


def _json_response(body: dict[str, Any], status: int = 200) -> web.Response:
    return web.Response(
        body=json.dumps(body, separators=(",", ":")).encode(), status=status, content_type="application/json"
    )


def _truthy(value: str | None) -> bool:
    return value is not None and value.lower() in ("1", "true", "yes")


class ApiServer:
    def __init__(
        self, api: Api, token: str, *, log_requests: bool = False, audit_log: Path | None = None
    ) -> None:
        self.api = api
        self.audit = AuditLog(audit_log) if audit_log is not None else None
        self.token = token
        self.issuer = authn.TokenIssuer()
        self.authenticator = authn.Authenticator(token, api.store, self.issuer)
        self.authorizer = rbac.Authorizer(api.store)
        self.aggregation = rbac.AggregationController(api)
        api.admission.append(EscalationCheck(self.authorizer, api.store))
        self.log_requests = log_requests
        self.log_source: logs.LogSource | None = None
        self.server_address = "127.0.0.1:0"
        self.faults = faults.FaultTable()
        self.proxy = proxying.Proxy()

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._middleware], client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        return app

    @web.middleware
    async def _middleware(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        if self.log_requests:
            log.info("%s %s accept=%s", request.method, request.path_qs, request.headers.get("Accept", ""))
        received = datetime.now(UTC)
        code = 500
        try:
            if request.path != faults.CONTROL_PATH:
                injected = await faults.respond(self.faults, request)
                if injected is not None:
                    code = injected.status
                    return injected
            request["user"] = self._authorize(request)
            rbac.current_user.set(request["user"])
            response: web.StreamResponse
            if request.path == faults.CONTROL_PATH:
                response = await faults.control(self.faults, request)
            else:
                response = await handler(request)
            code = response.status
            return response
        except ApiError as exc:
            code = exc.code
            return _json_response(exc.status(), exc.code)
        finally:
            if self.audit is not None:
                self.audit.record(
                    user=request.get("user"),
                    attrs=rbac.request_attributes(request.method, request.path, request.query),
                    uri=request.path_qs,
                    code=code,
                    received=received,
                )

    def _authorize(self, request: web.Request) -> authn.User:
        """Authenticate the bearer token (401 when missing or invalid), then apply RBAC (403)."""
        header = request.headers.get("Authorization", "")
        given = header[7:].strip() if header.lower().startswith("bearer ") else ""
        if given:
            user = self.authenticator.authenticate(given)
            if user is None:
                raise unauthorized()
        elif request.path in PUBLIC_PATHS:
            user = authn.ANONYMOUS_USER
        else:
            raise unauthorized()
        if user.privileged:
            return user
        attrs = rbac.request_attributes(request.method, request.path, request.query)
        allowed, _, _ = self.authorizer.decide(user, attrs)
        if not allowed:
            raise rbac.forbidden(user, attrs)
        return user

    # -- routing ------------------------------------------------------------------------------
    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        if path in ("/version", "/version/"):
            return _json_response(discovery.version_info())
        if path in ("/healthz", "/livez", "/readyz"):
            return web.Response(text="ok")
        parts = [p for p in path.split("/") if p]
        if parts[:2] == ["openapi", "v3"]:
            return self._openapi(parts[2:])
        if not parts or parts[0] not in ("api", "apis"):
            raise ApiError(404, "NotFound", "the server could not find the requested resource", details={})
        registry = self.api.registry
        if parts[0] == "api":
            if len(parts) == 1:
                return _json_response(discovery.api_versions(self.server_address))
            group, version, rest = "", parts[1], parts[2:]
        else:
            if len(parts) == 1:
                return _json_response(discovery.api_group_list(registry))
            if len(parts) == 2:
                doc = discovery.api_group(registry, parts[1])
                if doc is None:
                    raise ApiError(
                        404, "NotFound", "the server could not find the requested resource", details={}
                    )
                return _json_response(doc)
            group, version, rest = parts[1], parts[2], parts[3:]
        if not rest:
            doc = discovery.resource_list(registry, group, version)
            if doc is None:
                raise ApiError(
                    404, "NotFound", "the server could not find the requested resource", details={}
                )
            return _json_response(doc)
        target = self._target(group, version, rest, trailing_slash=path.endswith("/"))
        return await self._handle(request, target)

    def _openapi(self, rest: list[str]) -> web.Response:
        registry = self.api.registry
        if not rest:
            return _json_response(openapi.root_document(registry))
        if rest[0] == "api" and len(rest) == 2:
            doc = openapi.group_version_document(registry, "", rest[1])
        elif rest[0] == "apis" and len(rest) == 3:
            doc = openapi.group_version_document(registry, rest[1], rest[2])
        else:
            doc = None
        if doc is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource", details={})
        return _json_response(doc)

    def _target(self, group: str, version: str, rest: list[str], *, trailing_slash: bool = False) -> Target:
        registry = self.api.registry
        watch_path = rest[0] == "watch"
        if watch_path:
            rest = rest[1:]
        not_found = ApiError(404, "NotFound", "the server could not find the requested resource", details={})
        namespace: str | None = None
        if len(rest) >= 3 and rest[0] == "namespaces":
            rt = registry.lookup(group, version, rest[2])
            if rt is not None and rt.namespaced:
                namespace, rest = rest[1], rest[2:]
        if not rest:
            raise not_found
        rt = registry.lookup(group, version, rest[0])
        if rt is not None and len(rest) >= 3 and rest[2] == "proxy" and rt.plural in PROXIED:
            tail = "/".join(rest[3:]) + ("/" if trailing_slash and len(rest) > 3 else "")
            wanted = proxying.split_name(rest[1])
            return Target(rt, namespace, wanted.name, "proxy", watch_path, rest[1], tail)
        if rt is None or len(rest) > 3:
            raise not_found
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else ""
        allowed_sub = {
            "status": rt.status,
            "scale": rt.scale is not None,
            "log": rt.log,
            "token": rt.key == ("", "serviceaccounts"),
            "": True,
        }
        if not allowed_sub.get(sub, False):
            raise not_found
        return Target(rt, namespace, name, sub, watch_path)

    async def _handle(self, request: web.Request, t: Target) -> web.StreamResponse:
        q = request.query
        method = request.method
        rt = t.rt
        verb = {"GET": "get" if t.name else "list", "POST": "create", "PUT": "update", "PATCH": "patch"}.get(
            method
        )
        if method == "DELETE":
            verb = "delete" if t.name else "deletecollection"
        if verb == "list" and (_truthy(q.get("watch")) or t.watch_path):
            verb = "watch"
        if verb is None or (verb not in rt.verbs and not t.subresource):
            raise method_not_allowed()
        namespace = t.namespace or ""
        if rt.namespaced and t.namespace is None and verb not in ("list", "watch"):
            raise method_not_allowed()
        if t.subresource == "proxy":
            return await self._proxy(request, t)
        manager = q.get("fieldManager") or manager_from_user_agent(request.headers.get("User-Agent"))
        dry_run = q.get("dryRun") == "All"
        strict = q.get("fieldValidation") == "Strict"
        accept = request.headers.get("Accept", "")
        if verb == "watch":
            return await self._watch(request, t)
        if verb == "list":
            return self._list(t, q, accept)
        if verb == "get":
            assert t.name is not None
            if t.subresource == "scale":
                return _json_response(scale.get_scale(self.api, rt, namespace, t.name))
            if t.subresource == "log":
                if _truthy(q.get("follow")):
                    return await logs.follow(self.api, self.log_source, request, namespace, t.name)
                return logs.read(self.api, self.log_source, namespace, t.name, q)
            obj = self.api.get(rt, namespace, t.name)
            if table.wants_table(accept):
                return _json_response(
                    table.to_table(
                        rt, [obj], obj["metadata"]["resourceVersion"], q.get("includeObject", "Metadata")
                    )
                )
            return _json_response(obj)
        if verb == "create" and t.subresource == "token" and t.name:
            account = self.api.find(rt, namespace, t.name)
            if account is None:
                raise not_found(rt.plural, rt.group, t.name)
            return _json_response(authn.token_request(self.issuer, account, await self._body(request)), 201)
        if verb == "create":
            if t.name:
                raise method_not_allowed()
            body = await self._body(request)
            if rt.plural == "selfsubjectaccessreviews":
                return _json_response(rbac.access_review(self.authorizer, request["user"], body), 201)
            if rt.plural == "selfsubjectrulesreviews":
                return _json_response(rbac.rules_review(self.authorizer, request["user"], body), 201)
            created = self.api.create(rt, namespace, body, manager=manager, dry_run=dry_run, strict=strict)
            return _json_response(created, 201)
        assert verb in ("update", "patch", "delete", "deletecollection")
        if verb == "deletecollection":
            return self._delete_collection(t, q)
        assert t.name is not None
        if verb == "delete":
            return await self._delete(request, t)
        if t.subresource == "scale":
            return await self._scale_write(request, t, manager)
        if verb == "update":
            body = await self._body(request)
            replaced = self.api.replace(
                rt,
                namespace,
                t.name,
                body,
                manager=manager,
                subresource=t.subresource,
                dry_run=dry_run,
                strict=strict,
            )
            return _json_response(replaced)
        raw = await request.read()
        content_type = request.headers.get("Content-Type", "application/json")
        is_apply = content_type.startswith("application/apply-patch")
        code, obj = self.api.patch(
            rt,
            namespace,
            t.name,
            content_type,
            raw,
            manager=q.get("fieldManager") if is_apply else manager,
            force=_truthy(q.get("force")),
            subresource=t.subresource,
            dry_run=dry_run,
            strict=strict,
        )
        return _json_response(obj, code)

    # -- verbs --------------------------------------------------------------------------------
    async def _proxy(self, request: web.Request, t: Target) -> web.StreamResponse:
        assert t.name is not None
        namespace = t.namespace or ""
        wanted = proxying.split_name(t.proxy_name)
        obj = self.api.get(t.rt, namespace, t.name)
        if t.rt.plural == "pods":
            ip, port = proxying.pod_location(obj, wanted)
        else:
            endpoints = self.api.store.peek("", "endpoints", namespace, t.name)
            ip, port = proxying.service_location(obj, endpoints, wanted)
        return await self.proxy.relay(request, wanted.scheme, ip, port, t.proxy_path)

    async def _body(self, request: web.Request) -> dict[str, Any]:
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

    def _list(self, t: Target, q: Any, accept: str) -> web.Response:
        rt = t.rt
        items = self.api.select(rt, t.namespace, q.get("labelSelector"), q.get("fieldSelector"))
        rv = str(self.api.store.current_rv)
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
            return _json_response(doc)
        if not rt.custom:
            for item in items:
                item.pop("kind", None)
                item.pop("apiVersion", None)
        return _json_response(
            {"kind": rt.list_kind, "apiVersion": rt.api_version, "metadata": meta, "items": items}
        )

    async def _watch(self, request: web.Request, t: Target) -> web.StreamResponse:
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
                self.api.store,
                rt,
                t.namespace,
                labels,
                fields,
                q.get("resourceVersion"),
                timeout,
                _truthy(q.get("allowWatchBookmarks")),
                send,
                transform,
            )
            await response.write_eof()
        except (ConnectionResetError, RuntimeError):
            pass
        return response

    async def _delete(self, request: web.Request, t: Target) -> web.Response:
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
        result = self.api.delete(
            t.rt,
            t.namespace or "",
            t.name,
            grace_seconds=int(grace) if grace is not None else None,
            propagation=options.get("propagationPolicy") or q.get("propagationPolicy"),
            precondition_rv=(options.get("preconditions") or {}).get("resourceVersion"),
            dry_run=q.get("dryRun") == "All" or options.get("dryRun") == ["All"],
        )
        return _json_response(result)

    def _delete_collection(self, t: Target, q: Any) -> web.Response:
        for obj in self.api.select(t.rt, t.namespace, q.get("labelSelector"), q.get("fieldSelector")):
            try:
                self.api.delete(t.rt, obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
            except ApiError:
                continue
        return _json_response({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"})

    async def _scale_write(self, request: web.Request, t: Target, manager: str) -> web.Response:
        assert t.name is not None
        namespace = t.namespace or ""
        # The body is read before the object: a patch applies to the object as it is when the patch is
        # applied (a controller's write while the body arrives is no conflict, as on a real API server);
        # only a resourceVersion the client sent is a precondition.
        if request.method == "PUT":
            wanted = await self._body(request)
        else:
            from sandbox.apiserver import patch as patching

            raw = await request.read()
            content_type = request.headers.get("Content-Type", "").split(";")[0]
            body = json.loads(raw or b"{}")
            current = scale.get_scale(self.api, t.rt, namespace, t.name)
            if content_type == "application/json-patch+json":
                wanted = patching.json_patch(current, body)
            elif content_type == "application/strategic-merge-patch+json":
                wanted = patching.strategic_merge_patch(current, body)
            else:
                wanted = patching.merge_patch(current, body)
        return _json_response(scale.update_scale(self.api, t.rt, namespace, t.name, wanted, manager=manager))
