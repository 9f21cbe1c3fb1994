"""Schemathesis over the whole OpenAPI document: the REST API under /api/v1/ and the gateway's /v1/ paths.

    .venv/bin/python bench/schema_fuzz.py [--max-examples 100] [--seed 20261203] [--workers 2]
        [--phases examples,fuzzing] [--schemathesis var/schemathesis-venv/bin/schemathesis]
    .venv/bin/python bench/schema_fuzz.py --max-examples 3     # a quick run

Schemathesis is not a dependency of Tandem; it runs from a virtualenv of its own (git-ignored var/):
``python3 -m venv var/schemathesis-venv && var/schemathesis-venv/bin/pip install schemathesis``.

Everything runs here, on loopback, as in production but small: a private Redis (tests/faults/services.py),
the bench database (dropped and created afresh each run; with the fixed seed two runs give the same
figures, the number of cases varying by a few as ids read from answers and two workers' order do), a
one-node sandbox cluster registered as a cluster, a simulated P/D stack (sandbox engines and router,
bench/gateway_peers.py's ``sim``: vLLM's endpoints and errors) serving a topology's route, and the ASGI
app under uvicorn (bench/gateway_peers.py's TandemGateway: the gateway's /v1/ and Django in one process,
as docker/Dockerfile serves them). Seeded objects: an admin (whose id no generated integer
reaches), a management key holding every management scope and an inference key (both without limits a
run could reach), a second user and key for the per-object operations to change and delete (a write on
a key or a user never takes an id from an earlier answer, so no case revokes the run's own keys or
demotes its admin), the topology (two revisions, a queued deployment, a queued verification run).
Path parameters take a real object's id nine times in ten (schemathesis dictionaries), a random one
otherwise; the gateway's request bodies name the served model as often.

The document is fetched with the management key (it is behind sign-in) and stored in var/schema-fuzz/;
schemathesis runs on that file with a generated configuration: auth per security scheme (the REST API's
``bearerAuth`` takes the management key, the gateway's ``inferenceKey`` the inference key), every check
but those EXCLUDED_CHECKS names (each a false positive here, said why), the examples and fuzzing
phases, ``--max-examples`` cases per operation and a fixed seed. Printed: the schemathesis version,
operations tested, cases sent, 5xx answers, schema violations (a response body, status code, content
type or header the document does not describe), other failures. Its own log and reports and the app's
log stay in var/schema-fuzz/. Target: 0 × 5xx, 0 violations.
Environment: ``BENCH_DATABASE_URL`` (postgres://postgres@127.0.0.1:5432/tandem_bench_fuzz).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.request import Request, urlopen

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.faults.services: the private Redis

from gateway_peers import TandemGateway, sim_upstream
from telemetry_fanout import ROOT, apply_env, ensure_database

OUT = ROOT / "var" / "schema-fuzz"
MODEL = "bench/fuzz"
ADMIN_ID = 7_700_001  # far above what the cases' small integers reach
NO_LIMITS = {
    "requests_per_minute": None,
    "tokens_per_minute": None,
    "max_concurrent": None,
    "requests_per_day": None,
    "requests_per_month": None,
    "tokens_per_day": None,
    "tokens_per_month": None,
}
# The path segment before a path parameter -> the seeded objects' dictionary it takes.
RESOURCES = {
    "clusters": "clusters",
    "topologies": "topologies",
    "revisions": "revisions",
    "deployments": "deployments",
    "users": "users",
    "keys": "keys",
    "probe-runs": "probe_runs",
    "audit-events": "audit_events",
}
# Checks left out or widened, each a false positive of schemathesis here (docs/api-keys.md says why).
EXCLUDED_CHECKS = {
    # A schema-valid request refused with a 4xx. The API's rules go beyond what a JSON schema says: the
    # cluster or revision an id names must exist, a password must not be weak, a ratio must lie within
    # the topology's rebalancing bounds, a rollback needs a revision that once ran, a what-if needs
    # recorded traffic. Each refusal is a documented 400/404/409 naming the field.
    "positive_data_acceptance": "rules a JSON schema cannot hold (ids that exist, state, cross-field bounds)",
}
# Statuses that reject invalid data besides schemathesis's defaults: 413 is the documented answer to a
# body over the API's limit (a generated string past `maxLength` can be megabytes long).
REJECTION_STATUSES = [400, 401, 403, 404, 405, 406, 409, 413, 415, 422, 428, 429]
# Schemathesis's failure codes (`schemathesis explain CODE`): a 5xx, and an answer the document does not
# describe (status ST103, content type ST104-ST106, header ST107, body ST108-ST111).
SERVER_ERRORS = {"ST101", "ST102"}
VIOLATIONS = {"ST103", "ST104", "ST105", "ST106", "ST107", "ST108", "ST109", "ST110", "ST111"}


def recreate_database() -> None:
    """Drop the bench database (when present) so every run starts from the same rows."""
    from urllib.parse import urlparse

    import psycopg

    url = urlparse(os.environ["DATABASE_URL"])
    name = url.path.lstrip("/")
    if not name.startswith("tandem_bench"):
        raise SystemExit(f"refusing to drop {name!r}: the bench database's name starts with tandem_bench")
    with psycopg.connect(url._replace(path="/postgres").geturl(), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    ensure_database()


def seed(sandbox: Any, upstream_url: str) -> dict[str, Any]:
    """The objects the cases reach; returns the keys' secrets and the dictionaries' values."""
    from accounts.models import User
    from audit.models import AuditEvent
    from clusters.services import cluster_register
    from deployments.services import deployment_start
    from gateway.services import probe_run_start, route_update
    from keys.scopes import MANAGEMENT_SCOPES
    from keys.services import key_create
    from topologies.presets import preset_spec
    from topologies.services import topology_create, topology_update

    admin = User.objects.create(pk=ADMIN_ID, username="fuzz-admin", role="admin")
    other = User.objects.create(username="fuzz-viewer", role="viewer")
    management = key_create(
        actor=admin,
        name="fuzz management",
        purpose="automation",
        kind="management",
        scopes=sorted(MANAGEMENT_SCOPES),
        limits_given=NO_LIMITS,
    )
    inference = key_create(actor=admin, name="fuzz inference", purpose="production", limits_given=NO_LIMITS)
    target = key_create(actor=other, name="fuzz target", purpose="production")
    cluster = cluster_register(name="fuzz", server=sandbox.server, token=sandbox.token, actor=admin)
    spec = preset_spec("qwen-gpu-nixl")
    spec.update(name="fuzz", namespace="fuzz", model_name=MODEL, backend="deployments")
    spec["routing"]["model_name"] = MODEL
    topology = topology_create(cluster=cluster, spec=spec, actor=admin)
    spec["roles"]["decode"]["replicas"] = 2
    topology = topology_update(topology=topology, spec=spec, actor=admin, message="second revision")
    route_update(topology=topology, changes={"endpoint_url": upstream_url}, actor=admin)
    deployment = deployment_start(topology=topology, actor=admin, source_ip=None)
    run = probe_run_start(topology=topology, kinds=None, params=None, actor=admin)
    return {
        "management": management.secret,
        "inference": inference.secret,
        "dictionaries": {
            "clusters": [cluster.pk],
            "topologies": [topology.pk],
            "revisions": sorted(topology.revisions.values_list("number", flat=True)),
            "deployments": [deployment.pk],
            "users": [other.pk],
            "keys": [str(target.key.pk)],
            "probe_runs": [run.pk],
            "audit_events": list(AuditEvent.objects.order_by("pk").values_list("pk", flat=True)[:5]),
            "models": [MODEL],
        },
    }


def fetch_schema(base: str, secret: str) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {secret}", "Accept": "application/json"}
    request = Request(base + "/api/v1/schema/?format=json", headers=headers)  # noqa: S310 - loopback only
    with urlopen(request, timeout=60) as response:  # noqa: S310 - loopback only
        document: dict[str, Any] = json.load(response)
    return document


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)  # a TOML basic string
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(value)


def bindings(document: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(path, its parameter bindings) for every path with a path parameter or a gateway model."""
    found = []
    for path in sorted(document.get("paths", {})):
        params: dict[str, Any] = {}
        for before, name in re.findall(r"([\w-]+)/\{(\w+)\}", path):
            if before in RESOURCES:
                params[f"path.{name}"] = {"dictionary": RESOURCES[before], "probability": 0.9}
        if path.startswith("/v1/") and path != "/v1/models":
            params["body.model"] = {"dictionary": "models", "probability": 0.9}
        if params:
            found.append((path, params))
    return found


def write_config(
    path: Path, document: dict[str, Any], setup: dict[str, Any], args: argparse.Namespace
) -> None:
    lines = [
        f"seed = {args.seed}",
        f"workers = {args.workers}",
        "request-timeout = 60",
        "",
        "[cache]",
        "enabled = false  # nothing carried over from an earlier run",
        "",
        "[checks]",
        f"negative_data_rejection.expected-statuses = {toml_value(REJECTION_STATUSES)}",
        "",
        "[auth.openapi.bearerAuth]",
        f"bearer = {toml_value(setup['management'])}",
        "",
        "[auth.openapi.inferenceKey]",
        f"bearer = {toml_value(setup['inference'])}",
        "",
    ]
    for name, values in setup["dictionaries"].items():
        lines += [f"[dictionaries.{name}]", f"values = {toml_value(values)}", ""]
    # Fuzzing takes ids from earlier answers too (GET /keys/ lists the run's own keys): a write on a key
    # or a user takes only the seeded target's id or a generated one, never the caller's own key or user.
    lines += ["[[operations]]", 'include-path-regex = "^/api/v1/(keys|users)/"']
    lines += ['include-method-regex = "^(POST|PUT|PATCH|DELETE)$"']
    lines += ["phases.examples.extra-data-sources.responses = false"]
    lines += ["phases.fuzzing.extra-data-sources.responses = false", ""]
    for op_path, params in bindings(document):
        lines += ["[[operations]]", f"include-path = {toml_value(op_path)}"]
        lines += [f"parameters = {toml_value(params)}", ""]
    path.write_text("\n".join(lines))


def schemathesis_version(binary: Path) -> str:
    out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, check=True).stdout
    return out.strip().rsplit(" ", 1)[-1]


def run_schemathesis(binary: Path, base: str, args: argparse.Namespace) -> tuple[dict[str, Any], float]:
    argv = [str(binary), "--config-file", str(OUT / "schemathesis.toml"), "--no-color", "run"]
    argv += [str(OUT / "openapi.json"), "--url", base, "--checks", "all", "--phases", args.phases]
    argv += ["--exclude-checks", ",".join(EXCLUDED_CHECKS)]
    argv += ["--max-examples", str(args.max_examples), "--report", "json,ndjson"]
    argv += ["--report-dir", str(OUT), "--report-json-path", str(OUT / "report.json")]
    argv += ["--report-ndjson-path", str(OUT / "events.ndjson")]
    print(f"  {time.strftime('%H:%M:%S')} " + " ".join(argv[:1] + argv[3:]), flush=True)
    started = time.monotonic()
    with open(OUT / "schemathesis.log", "w") as log:
        subprocess.run(argv, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, check=False)
    seconds = time.monotonic() - started
    report: dict[str, Any] = json.loads((OUT / "report.json").read_text())
    return report, seconds


def sent_cases() -> int:
    """HTTP requests schemathesis sent (its event stream's interactions)."""
    sent = 0
    with open(OUT / "events.ndjson") as events:
        for line in events:
            if '"ScenarioFinished"' in line[:40]:
                event = json.loads(line)["ScenarioFinished"]
                sent += len(event.get("recorder", {}).get("interactions", {}))
    return sent


def summary(report: dict[str, Any], seconds: float, version: str, log: str) -> None:
    failures = report["failures"]
    server_errors = sum(f["count"] for f in failures if f["code"] in SERVER_ERRORS)
    violations = sum(f["count"] for f in failures if f["code"] in VIOLATIONS)
    other = sum(f["count"] for f in failures if f["code"] not in VIOLATIONS | SERVER_ERRORS)
    operations = report["operations"] or {}
    cases = report["test_cases"]
    print(f"\n  schemathesis {version}, {seconds / 60:.1f} min, seed {report['seed']}")
    print(
        f"  operations tested {operations.get('tested')} of {operations.get('selected')} selected "
        f"({operations.get('errored')} errored, {operations.get('skipped')} skipped)"
    )
    print(f"  cases sent {sent_cases()} ({cases['generated']} generated)")
    print(f"  5xx: {server_errors}   schema violations: {violations}   other failures: {other}")
    for failure in failures:
        print(f"    {failure['code']} ×{failure['count']}: {failure['title']}")
        for operation in failure["operations"][:8]:
            print(f"      {operation}")
    for error in report["errors"]:
        print(f"    error ×{error['count']}: {error['title']}")
    print(
        f"  the app's log: {log.count(' ERROR ')} ERROR lines, {log.count('Traceback')} tracebacks; "
        f"details in {OUT}/schemathesis.log"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-examples", type=int, default=100, help="cases per operation and phase")
    parser.add_argument("--seed", type=int, default=20261203)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--phases", default="examples,fuzzing")
    parser.add_argument("--schemathesis", type=Path, default=ROOT / "var/schemathesis-venv/bin/schemathesis")
    args = parser.parse_args()
    if not args.schemathesis.exists():
        sys.exit(f"{args.schemathesis} is missing; see this file's docstring to install it")
    version = schemathesis_version(args.schemathesis)
    OUT.mkdir(parents=True, exist_ok=True)
    import django

    from tests.faults.services import private_redis

    with private_redis() as redis:
        os.environ["BENCH_REDIS_URL"] = redis.url
        os.environ.setdefault("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/tandem_bench_fuzz")
        apply_env(CHANNEL_PREFIX="tandem-bench-fuzz")
        recreate_database()
        django.setup()
        from sandbox.testing import SandboxCluster

        with (
            SandboxCluster(nodes=1, accelerators=["nvidia.com/gpu=8"], kthena=False) as sandbox,
            sim_upstream(MODEL, 0.05) as upstream,
        ):
            setup = seed(sandbox, upstream.url)
            with TandemGateway(OUT / "tandem.log") as server:
                base = f"http://127.0.0.1:{server.port}"
                document = fetch_schema(base, setup["management"])
                (OUT / "openapi.json").write_text(json.dumps(document, indent=1))
                write_config(OUT / "schemathesis.toml", document, setup, args)
                report, seconds = run_schemathesis(args.schemathesis, base, args)
    summary(report, seconds, version, (OUT / "tandem.log").read_text(errors="replace"))


if __name__ == "__main__":
    main()
