"""What the fuzz suites share: the API's write endpoints (read from the OpenAPI schema, so a new
endpoint is fuzzed without anyone listing it), a small world of objects for their path parameters,
hostile values, and the check every answer must pass."""

from __future__ import annotations

import contextlib
import json
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from django.conf import settings

WRITE_METHODS = ("post", "put", "patch", "delete")
REPORT_DIR = Path(settings.BASE_DIR) / "var" / "faults"


@dataclass(frozen=True)
class Endpoint:
    method: str  # upper case
    path: str  # OpenAPI template, e.g. /api/v1/topologies/{id}/scale/
    fields: tuple[str, ...] = ()  # top-level request body properties, from the schema

    @property
    def resource(self) -> str:
        """The collection the first path parameter belongs to: clusters, topologies, users, ..."""
        return self.path.removeprefix("/api/v1/").split("/", 1)[0]

    def __str__(self) -> str:
        return f"{self.method} {self.path}"


def _properties(schema: dict[str, Any], ref_or_schema: dict[str, Any]) -> tuple[str, ...]:
    ref = ref_or_schema.get("$ref")
    if ref:
        ref_or_schema = schema["components"]["schemas"][ref.rsplit("/", 1)[1]]
    return tuple(sorted(ref_or_schema.get("properties", {})))


@lru_cache(maxsize=1)
def write_endpoints() -> tuple[Endpoint, ...]:
    """Every POST/PUT/PATCH/DELETE operation of the REST API, as the OpenAPI schema lists them (the
    document also describes the gateway's ``/v1/`` paths, which the gateway's own server answers, not
    Django: their hostile bodies are tested against a running gateway in ``gateway/tests``)."""
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    found: list[Endpoint] = []
    for path, operations in schema["paths"].items():
        if not path.startswith("/api/"):
            continue
        for method, operation in operations.items():
            if method not in WRITE_METHODS:
                continue
            content = (operation.get("requestBody") or {}).get("content") or {}
            body = content.get("application/json", {}).get("schema", {})
            found.append(Endpoint(method.upper(), path, _properties(schema, body)))
    return tuple(found)


def fill_path(template: str, value: str) -> str:
    return re.sub(r"\{[^}]+\}", value, template)


@dataclass
class World:
    """Objects the fuzzed requests can name: one of each kind, ids by resource."""

    ids: dict[str, int]
    cluster_id: int
    spec: dict[str, Any]
    closed_port: int
    templates: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)

    def template(self, endpoint: Endpoint) -> dict[str, Any]:
        """A valid body for the endpoint when one is known (so mutations reach deep validation)."""
        return json.loads(json.dumps(self.templates.get((endpoint.method, endpoint.path), {})))


def build_world(admin: Any) -> World:
    """A cluster (saved unreachable on a closed loopback port), a topology with a revision, a deploy job
    (its task is only queued on commit, which never comes inside a test transaction) and a second user."""
    from accounts.models import User
    from clusters.services import cluster_register
    from deployments.services import deployment_start
    from tests.support import closed_port
    from topologies.presets import preset_spec
    from topologies.services import topology_create

    port = closed_port()
    cluster = cluster_register(
        name="fuzz-cluster",
        server=f"http://127.0.0.1:{port}",
        token="fuzz-token-0123456789",
        allow_unreachable=True,
        actor=admin,
    )
    spec = preset_spec("qwen-gpu-nixl")
    topology = topology_create(cluster=cluster, spec=spec, actor=admin)
    deployment = deployment_start(topology=topology, actor=admin, source_ip=None)
    victim = User.objects.create_user(username="fuzz-victim", password="correct-horse-battery", role="viewer")
    world = World(
        ids={
            "clusters": cluster.pk,
            "topologies": topology.pk,
            "deployments": deployment.pk,
            "users": victim.pk,
        },
        cluster_id=cluster.pk,
        spec=spec,
        closed_port=port,
    )
    server = f"http://127.0.0.1:{port}"
    cluster_body = {"name": "fuzz-b", "server": server, "token": "t0k3n", "allow_unreachable": True}
    world.templates = {
        ("POST", "/api/v1/clusters/"): cluster_body,
        ("PUT", "/api/v1/clusters/{id}/"): {**cluster_body, "description": "d"},
        ("PATCH", "/api/v1/clusters/{id}/"): {"context_name": "lab", "description": "d"},
        ("POST", "/api/v1/topologies/"): {"cluster": cluster.pk, "spec": spec, "message": "m"},
        ("PUT", "/api/v1/topologies/{id}/"): {"spec": spec, "message": "m"},
        ("PATCH", "/api/v1/topologies/{id}/"): {"spec": spec},
        ("POST", "/api/v1/topologies/preflight/"): {"cluster": cluster.pk, "spec": spec},
        ("POST", "/api/v1/topologies/{id}/preflight/"): {"revision": 1},
        ("POST", "/api/v1/topologies/{id}/deploy/"): {"revision": 1},
        ("POST", "/api/v1/topologies/{id}/rollback/"): {"revision": 1},
        ("POST", "/api/v1/topologies/{id}/scale/"): {"role": "decode", "replicas": 2},
        ("PUT", "/api/v1/topologies/{id}/deploy-policy/"): {
            "ready_timeout_seconds": 60,
            "auto_rollback": True,
        },
        ("POST", "/api/v1/users/"): {
            "username": "fuzz-new",
            "password": "correct-horse-battery-staple",
            "role": "viewer",
            "email": "a@example.com",
        },
        ("PUT", "/api/v1/users/{id}/"): {"role": "operator", "email": "b@example.com"},
        ("PATCH", "/api/v1/users/{id}/"): {"role": "operator"},
    }
    return world


@contextlib.contextmanager
def module_world(django_db_blocker: Any) -> Iterator[World]:
    """``build_world`` once for a whole test module (registering its unreachable cluster waits out a
    retry), inside a transaction rolled back when the module ends. Each test's own transaction is a
    savepoint inside it, so what a test changes is undone before the next, as with a world of its own."""
    from django.db import transaction

    from accounts.models import User

    with django_db_blocker.unblock(), transaction.atomic():
        actor = User.objects.create_user(username="fuzz-world-admin", password="correct-horse", role="admin")
        yield build_world(actor)
        transaction.set_rollback(True)


# --- hostile values -------------------------------------------------------------------------------

HOSTILE_TEXTS = [
    "",
    " ",
    "²",
    "١",
    "八",
    "lots",
    "токен",
    "\u202eadmin",
    "a\u200bb",
    "two words",
    "\x00",
    "nul\x00inside",
    "\x1b[31mred",
    "\ud800",
    "line\nbreak",
    "-1",
    "0",
    "1e309",
    "NaN",
    "null",
    "true",
    "0x10",
    "99999999999999999999999",
    "-99999999999999999999999",
    "1.5",
    "<script>alert(1)</script>",
    "../../etc/passwd",
    "'; DROP TABLE accounts_user; --",
    "%s%n%x",
    "{{7*7}}",
    "http://169.254.169.254/",
    "https://127.0.0.1:1",
    "secret:x/y",
    "decode",
    "prefill",
    "viewer",
    "admin",
    "lab",
]


@dataclass
class Tally:
    """Requests made and their statuses, written to var/faults/ and printed at the end of the run."""

    name: str
    statuses: Counter[int] = field(default_factory=Counter)
    by_endpoint: Counter[str] = field(default_factory=Counter)

    def add(self, endpoint: str, status: int) -> None:
        self.statuses[status] += 1
        self.by_endpoint[endpoint] += 1

    @property
    def total(self) -> int:
        return sum(self.statuses.values())

    @property
    def server_errors(self) -> int:
        return sum(count for status, count in self.statuses.items() if status >= 500)

    def line(self) -> str:
        statuses = ", ".join(f"{status}: {count}" for status, count in sorted(self.statuses.items()))
        return (
            f"{self.name}: {self.total} requests over {len(self.by_endpoint)} endpoints, "
            f"{self.server_errors} answered 5xx ({statuses})"
        )

    def write(self) -> Path:
        REPORT_DIR.mkdir(parents=True, exist_ok=True)
        path = REPORT_DIR / f"{self.name}.json"
        path.write_text(
            json.dumps(
                {
                    "requests": self.total,
                    "server_errors": self.server_errors,
                    "statuses": {str(k): v for k, v in sorted(self.statuses.items())},
                    "by_endpoint": dict(sorted(self.by_endpoint.items())),
                },
                indent=2,
            )
        )
        return path


def error_shape_problem(status: int, content_type: str, content: bytes) -> str | None:
    """None when a 4xx answer has the API's one error shape {"error": {"code", "message", "fields"}}."""
    if not content_type.startswith("application/json"):
        return f"{status} answered {content_type or 'no content type'}, not JSON: {content[:200]!r}"
    try:
        body = json.loads(content)
    except ValueError:
        return f"{status} answered invalid JSON: {content[:200]!r}"
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict) or set(error) != {"code", "message", "fields"}:
        return f"{status} answered JSON without the error shape: {content[:300]!r}"
    if not isinstance(error["code"], str) or not isinstance(error["message"], str) or not error["message"]:
        return f"{status} error has no code or message: {content[:300]!r}"
    if not isinstance(error["fields"], dict):
        return f"{status} error fields is not an object: {content[:300]!r}"
    return None
