"""Freshness and collection capacity per metrics source, side by side in one run.

    .venv/bin/python bench/telemetry_sources.py [--samples 30] [--pods 100] [--rounds 10] [--interval 1]

Sources: *direct* against a sandbox on the flat pod network (pod IPs reachable), *proxy* (the API
server's pods proxy) and *prometheus* (a real Prometheus scraping every pod each second, queried with
PromQL) against a sandbox on the isolated pod network, where pod IPs are unreachable (needs root).

Freshness (as bench/telemetry_freshness.py): the whole real path — Celery beat + worker collecting at
``--interval``, uvicorn serving the topology page and its websocket, headless Chromium — from one
completion sent to the prefill engine (through the API server's proxy when the pods are unreachable)
to the new "Prompt tok/s" value in the DOM; p50/p95 per source. Target for direct: p95 <= 1.3 s at
a 1 s interval.

Capacity (as bench/telemetry_collect.py, scrape + parse only): ``--pods`` engine pods of one plain
Deployment, collected round after round through each source by this process's ``Scraper``; pods
per worker CPU-second (target for direct: >= 500). The proxy's cost on the API server: the sandbox
process (API server + engines) CPU per round through the proxy minus the same through direct, per
scraped pod. Prometheus: one query per round; its own CPU (scraping every pod each second) per
second of the run is printed beside it.

Environment as for bench/telemetry_fanout.py (BENCH_DATABASE_URL, BENCH_REDIS_URL).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import requests
from telemetry_fanout import Uvicorn, apply_env, ensure_database, quantile, session_cookie
from telemetry_freshness import CHROMIUM_ARGS, OBSERVE_JS, celery

ENGINE_IMAGE = "vllm/vllm-openai:v0.10.1"


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def deploy(sandbox: Any, source: str, prometheus_url: str = "") -> tuple[Any, Any]:
    """The DeepSeek Ascend + Mooncake preset on the sandbox, collected through ``source``."""
    import kube
    from accounts.models import User
    from clusters.selectors import cluster_connection
    from clusters.services import cluster_register
    from kube.labels import TOPOLOGY
    from topologies.models import Topology
    from topologies.presets import preset_spec
    from topologies.services import topology_create

    Topology.objects.filter(cluster__name__startswith="bench-").update(deployed_revision=None)
    actor, _ = User.objects.get_or_create(username="bench-operator", defaults={"role": "operator"})
    suffix = uuid.uuid4().hex[:6]
    cluster = cluster_register(
        name=f"bench-{suffix}",
        server=sandbox.server,
        token=sandbox.token,
        metrics_source=source,
        prometheus_url=prometheus_url,
    )
    namespace = f"src{suffix}"
    topology = topology_create(
        cluster=cluster, spec=preset_spec("deepseek-ascend-mooncake", namespace=namespace), actor=actor
    )
    conn = cluster_connection(cluster)
    kube.apply_objects(conn, [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}])
    kube.apply_objects(conn, topology.current_revision.manifests)
    topology.deployed_revision = topology.current_revision
    topology.save(update_fields=["deployed_revision"])
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        pods = [p for p in kube.list_pods(conn, namespace, f"{TOPOLOGY}={topology.pk}") if p.ready]
        prefill = [p for p in pods if "prefill" in (p.labels.get("tandem.io/role") or p.name)]
        if prefill and len(pods) >= 2:
            return topology, prefill[0]
        time.sleep(0.3)
    raise RuntimeError("the topology's pods were not Ready within 90 s")


def sender(sandbox: Any, topology: Any, pod: Any) -> Callable[[], None]:
    """Send one completion to the prefill pod: directly when reachable, else through the pods proxy."""
    session = requests.Session()
    port = pod.container_ports[0] if pod.container_ports else 8000
    if sandbox.netns:
        path = f"/api/v1/namespaces/{topology.namespace}/pods/{pod.name}:{port}/proxy/v1/completions"
        url = sandbox.server + path
        session.headers["Authorization"] = f"Bearer {sandbox.token}"
    else:
        url = f"http://{pod.ip}:{port}/v1/completions"

    def send() -> None:
        body = {"model": topology.model_name, "prompt": "fresh " * 64, "max_tokens": 1}
        session.post(url, json=body, timeout=10).raise_for_status()

    return send


def measure(page: Any, send: Callable[[], None], samples: int, interval: float) -> list[float]:
    latencies: list[float] = []
    rng = random.Random(5)
    for _ in range(samples):
        page.wait_for_function(
            "() => { const c = window.__changes; return c.length && c[c.length - 1].v === 0; }",
            timeout=int(30_000 * interval),
        )
        time.sleep(rng.uniform(0, interval))
        send()
        changed_at = time.time()
        seen = page.wait_for_function(
            "(t0) => window.__changes.find(c => c.t >= t0 && c.v > 0)",
            arg=changed_at,
            timeout=int(30_000 * interval),
        ).json_value()
        latencies.append(seen["t"] - changed_at)
    return latencies


def freshness(
    server: Any, browser: Any, cookie: str, sandbox: Any, source: str, args: Any, prom: str = ""
) -> list[float]:
    topology, prefill = deploy(sandbox, source, prom)
    with tempfile.TemporaryDirectory(prefix="tandem-bench-") as tmp:
        worker = celery(["worker", "-P", "solo", "-Q", "telemetry", "--without-gossip", "--without-mingle"])
        beat = celery(["beat", "-s", str(Path(tmp) / "beat-schedule")])
        try:
            context = browser.new_context(viewport={"width": 1440, "height": 1000})
            context.add_cookies([{"name": "sessionid", "value": cookie, "url": server.base}])
            page = context.new_page()
            page.goto(f"{server.base}/topologies/{topology.pk}/")
            page.wait_for_selector(f'#telemetry-live tr[data-pod="{prefill.name}"]', timeout=60_000)
            page.evaluate(OBSERVE_JS, prefill.name)
            latencies = measure(page, sender(sandbox, topology, prefill), args.samples, args.interval)
            context.close()
        finally:
            for proc in (beat, worker):
                proc.terminate()
                proc.wait(15)
            topology.deployed_revision = None
            topology.save(update_fields=["deployed_revision"])
    return latencies


def engine_pods(sandbox: Any, count: int) -> tuple[str, list[Any]]:
    """``count`` engine pods of one Deployment (no accelerators), all Ready."""
    from kubernetes import client

    api = sandbox.api_client()
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    namespace = f"cap{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": namespace}})
    labels = {"app": "bench-engines"}
    container = {
        "name": "engine",
        "image": ENGINE_IMAGE,
        "command": ["vllm", "serve", "bench-model", "--port", "8000"],
        "ports": [{"containerPort": 8000}],
    }
    apps.create_namespaced_deployment(
        namespace,
        {
            "metadata": {"name": "engines"},
            "spec": {
                "replicas": count,
                "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}},
            },
        },
    )

    def ready() -> list[Any] | None:
        pods = core.list_namespaced_pod(namespace).items
        up = [
            p
            for p in pods
            if any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])
        ]
        return up if len(up) == count else None

    return namespace, sandbox.wait_for(ready, timeout=180, interval=0.5, message=f"{count} engine pods Ready")


def capacity(
    sandbox: Any, source: str, namespace: str, pods: list[Any], args: Any, prom: Any = None
) -> dict[str, float]:
    import kube
    from telemetry.assemble import PodTarget
    from telemetry.scrape import Scraper, ScrapeRequest
    from telemetry.sources import DIRECT, ApiProxyTransport, PrometheusSource

    targets = [PodTarget(p.metadata.name, "decode", p.status.pod_ip, 8000, True, "Running") for p in pods]
    requests_ = [ScrapeRequest(target=t) for t in targets]
    scraper = Scraper()
    conn = kube.ClusterConnection(
        cluster_id=-7, server=sandbox.server, token=sandbox.token, credential_version=source
    )
    transport = ApiProxyTransport(namespace, kube.proxy_transport(conn)) if source == "proxy" else DIRECT
    prometheus = PrometheusSource(prom.url) if source == "prometheus" else None

    def one_round() -> list[Any]:
        if prometheus is not None:
            return scraper.query(prometheus, namespace, targets, timeout_s=0.8 * max(args.interval, 2))
        return scraper.scrape(requests_, timeout_s=0.8 * max(args.interval, 2), transport=transport)

    one_round()  # connections
    worker_cpu, failures = [], 0
    prom_started = _cpu_seconds(prom.pid) if prom is not None and prom.pid else None
    wall_started = time.monotonic()
    server_started = _cpu_seconds(sandbox.pid)  # clock ticks: summed over all rounds, then divided
    for _ in range(args.rounds):
        cpu0 = time.process_time()
        results = one_round()
        worker_cpu.append(time.process_time() - cpu0)
        failures += sum(1 for r in results if r.error)
        time.sleep(0.2)
    server_cpu = (_cpu_seconds(sandbox.pid) - server_started) / args.rounds
    scraper.close()
    out = {
        "worker_cpu_ms": statistics.median(worker_cpu) * 1000,
        "pods_per_cpu_s": len(targets) / max(statistics.median(worker_cpu), 1e-6),
        "sandbox_cpu_ms": server_cpu * 1000,
        "failures": failures,
    }
    if prom_started is not None:
        out["prometheus_cpu_per_s"] = (_cpu_seconds(prom.pid) - prom_started) / (
            time.monotonic() - wall_started
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=30)
    parser.add_argument("--interval", type=float, default=1.0, help="collection interval, seconds (>= 1)")
    parser.add_argument("--pods", type=int, default=100, help="engine pods for the capacity rounds")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--skip-freshness", action="store_true")
    args = parser.parse_args()
    apply_env(TELEMETRY_INTERVAL_SECONDS=str(args.interval))
    # Playwright's sync API runs an event loop in this thread; the ORM calls between pages are fine.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    ensure_database()
    import django

    django.setup()
    from playwright.sync_api import sync_playwright

    from sandbox.monitoring import SandboxPrometheus
    from sandbox.testing import SandboxCluster

    cookie = session_cookie()
    fresh: dict[str, list[float]] = {}
    cap: dict[str, dict[str, float]] = {}
    with Uvicorn() as server, sync_playwright() as pw:
        browser = (
            None
            if args.skip_freshness
            else pw.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        )
        with SandboxCluster() as flat:
            if not args.skip_freshness:
                fresh["direct"] = freshness(server, browser, cookie, flat, "direct", args)
            namespace, pods = engine_pods(flat, args.pods)
            cap["direct"] = capacity(flat, "direct", namespace, pods, args)
            cap["direct-through-proxy"] = capacity(flat, "proxy", namespace, pods, args)
        with SandboxCluster(pod_network="isolated") as isolated, SandboxPrometheus(isolated) as prom:
            if not args.skip_freshness:
                fresh["proxy"] = freshness(server, browser, cookie, isolated, "proxy", args)
                fresh["prometheus"] = freshness(
                    server, browser, cookie, isolated, "prometheus", args, prom.url
                )
            namespace, pods = engine_pods(isolated, args.pods)
            prom.wait_for_targets(namespace, args.pods)
            time.sleep(1.5)  # every pod scraped at least once more
            cap["proxy"] = capacity(isolated, "proxy", namespace, pods, args)
            cap["prometheus"] = capacity(isolated, "prometheus", namespace, pods, args, prom)
        if browser is not None:
            browser.close()

    proxy_cost = (cap["direct-through-proxy"]["sandbox_cpu_ms"] - cap["direct"]["sandbox_cpu_ms"]) / args.pods
    print(
        f"\nMetrics sources ({os.cpu_count()} CPUs, interval {args.interval:g} s, {args.samples} freshness "
        f"samples, {args.pods} pods x {args.rounds} capacity rounds, load average {os.getloadavg()[0]:.2f})"
    )
    columns = ("fresh p50", "fresh p95", "pods/CPU-s", "worker ms/round", "failed")
    print(
        f"  {'source':<12}" + "".join(f"{c:>{w}}" for c, w in zip(columns, (11, 11, 12, 17, 8), strict=True))
    )
    for source in ("direct", "proxy", "prometheus"):
        ms = [v * 1000 for v in fresh.get(source, [])]
        p50 = f"{quantile(ms, 0.5):.0f} ms" if ms else "-"
        p95 = f"{quantile(ms, 0.95):.0f} ms" if ms else "-"
        c = cap[source]
        rate, worker, failed = c["pods_per_cpu_s"], c["worker_cpu_ms"], c["failures"]
        print(f"  {source:<12}{p50:>11}{p95:>11}{rate:>12.0f}{worker:>14.0f} ms{failed:>8.0f}")
    print("  targets (direct): freshness p95 <= 1300 ms at a 1 s interval; >= 500 pods per worker CPU-second")
    through, direct = cap["direct-through-proxy"]["sandbox_cpu_ms"], cap["direct"]["sandbox_cpu_ms"]
    print(
        f"  proxy cost on the API server: {proxy_cost:.2f} ms CPU per scrape (sandbox process CPU per round, "
        f"mean incl. 0.2 s idle between rounds: "
        f"{through:.0f} ms through the proxy vs {direct:.0f} ms direct, same {args.pods} pods, flat network)"
    )
    if "prometheus_cpu_per_s" in cap["prometheus"]:
        print(
            f"  Prometheus server CPU while scraping {args.pods + 2} pods each second: "
            f"{cap['prometheus']['prometheus_cpu_per_s'] * 1000:.0f} ms per second"
        )
    print(
        "  freshness samples (ms): "
        + json.dumps({k: [round(v * 1000) for v in vs] for k, vs in fresh.items()})
    )


if __name__ == "__main__":
    sys.exit(main())
