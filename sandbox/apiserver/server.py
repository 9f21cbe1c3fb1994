"""HTTP layer: the API server's middleware (injected faults, authentication, RBAC, audit) and each
request's verb sent to the object semantics in `objects.py` (paths in `routing`, the longer verbs in
`verbs`)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path

from aiohttp import web

from sandbox.apiserver import authn, faults, logs, rbac, routing, scale, table, verbs
from sandbox.apiserver import proxy as proxying
from sandbox.apiserver.audit import AuditLog
from sandbox.apiserver.errors import ApiError, method_not_allowed, not_found, unauthorized
from sandbox.apiserver.objects import Api
from sandbox.apiserver.rbac_escalation import EscalationCheck
from sandbox.apiserver.respond import json_response, truthy
from sandbox.apiserver.routing import Target
from sandbox.apiserver.ssa import manager_from_user_agent

log = logging.getLogger("sandbox.apiserver")
PUBLIC_PATHS = {"/version", "/version/", "/healthz", "/livez", "/readyz"}


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
            return json_response(exc.status(), exc.code)
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
        routed = routing.route(self.api.registry, request.path, self.server_address)
        if isinstance(routed, web.StreamResponse):
            return routed
        return await self._handle(request, routed)

    async def _handle(self, request: web.Request, t: Target) -> web.StreamResponse:
        q = request.query
        method = request.method
        rt = t.rt
        verb = {"GET": "get" if t.name else "list", "POST": "create", "PUT": "update", "PATCH": "patch"}.get(
            method
        )
        if method == "DELETE":
            verb = "delete" if t.name else "deletecollection"
        if verb == "list" and (truthy(q.get("watch")) or t.watch_path):
            verb = "watch"
        if verb is None or (verb not in rt.verbs and not t.subresource):
            raise method_not_allowed()
        namespace = t.namespace or ""
        if rt.namespaced and t.namespace is None and verb not in ("list", "watch"):
            raise method_not_allowed()
        if t.subresource == "proxy":
            return await verbs.proxy(self.api, self.proxy, request, t)
        manager = q.get("fieldManager") or manager_from_user_agent(request.headers.get("User-Agent"))
        dry_run = q.get("dryRun") == "All"
        strict = q.get("fieldValidation") == "Strict"
        accept = request.headers.get("Accept", "")
        if verb == "watch":
            return await verbs.watch(self.api, request, t)
        if verb == "list":
            return verbs.list_objects(self.api, t, q, accept)
        if verb == "get":
            assert t.name is not None
            if t.subresource == "scale":
                return json_response(scale.get_scale(self.api, rt, namespace, t.name))
            if t.subresource == "log":
                if truthy(q.get("follow")):
                    return await logs.follow(self.api, self.log_source, request, namespace, t.name)
                return logs.read(self.api, self.log_source, namespace, t.name, q)
            obj = self.api.get(rt, namespace, t.name)
            if table.wants_table(accept):
                return json_response(
                    table.to_table(
                        rt, [obj], obj["metadata"]["resourceVersion"], q.get("includeObject", "Metadata")
                    )
                )
            return json_response(obj)
        if verb == "create" and t.subresource == "token" and t.name:
            account = self.api.find(rt, namespace, t.name)
            if account is None:
                raise not_found(rt.plural, rt.group, t.name)
            return json_response(
                authn.token_request(self.issuer, account, await verbs.read_body(request)), 201
            )
        if verb == "create":
            if t.name:
                raise method_not_allowed()
            body = await verbs.read_body(request)
            if rt.plural == "selfsubjectaccessreviews":
                return json_response(rbac.access_review(self.authorizer, request["user"], body), 201)
            if rt.plural == "selfsubjectrulesreviews":
                return json_response(rbac.rules_review(self.authorizer, request["user"], body), 201)
            created = self.api.create(rt, namespace, body, manager=manager, dry_run=dry_run, strict=strict)
            return json_response(created, 201)
        assert verb in ("update", "patch", "delete", "deletecollection")
        if verb == "deletecollection":
            return verbs.delete_collection(self.api, t, q)
        assert t.name is not None
        if verb == "delete":
            return await verbs.delete(self.api, request, t)
        if t.subresource == "scale":
            return await verbs.scale_write(self.api, request, t, manager)
        if verb == "update":
            body = await verbs.read_body(request)
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
            return json_response(replaced)
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
            force=truthy(q.get("force")),
            subresource=t.subresource,
            dry_run=dry_run,
            strict=strict,
        )
        return json_response(obj, code)
