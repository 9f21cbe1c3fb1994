"""Freshness against a real vLLM: Tandem (counter change → browser DOM) beside Prometheus (counter
change → PromQL), both reading the same real engine at the same interval, in one run.

A sandbox cluster runs the topology's pods as real vLLM processes (``SANDBOX_REAL_ENGINES=vllm``: the
CPU build serving a tiny model). A real Prometheus scrapes the pods every interval; Celery beat and a
worker collect the topology for Tandem at the same interval; uvicorn serves the topology page to a
headless Chromium. Each sample sends one completion straight to the prefill engine (its
``vllm:prompt_tokens_total`` rises when the answer ends); from that moment a thread polls PromQL until
the new value is visible, and a MutationObserver in the page records when the pod's "Prompt tok/s"
cell shows the request. Samples start at random phases of the interval.
Target: Tandem's DOM p95 within 150 ms of Prometheus's own p95.

Also printed: what the real-engine lane costs (install when missing, engines' start to Ready).

    .venv/bin/python bench/real_engine_freshness.py [--samples 30] [--interval 1]

Environment as for bench/telemetry_fanout.py (a bench database and Redis db 10).
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import threading
import time
from pathlib import Path

import requests
from telemetry_fanout import Uvicorn, apply_env, ensure_database, quantile, session_cookie
from telemetry_freshness import BASELINE_TPS, CHROMIUM_ARGS, OBSERVE_JS, celery, deploy_topology

TARGET_MS = 150.0
TOPOLOGY_ID: list[int] = [0]
DEBUG: list[tuple[str, str]] = []


def promql_value(prometheus: str, query: str) -> float | None:
    answer = requests.get(f"{prometheus}/api/v1/query", params={"query": query}, timeout=5).json()
    result = answer["data"]["result"]
    return float(result[0]["value"][1]) if result else None


def prometheus_sees(prometheus: str, query: str, above: float, since: float, out: dict[str, float]) -> None:
    """Poll PromQL every 20 ms until ``query`` is above ``above``; when, in ``out["t"]``."""
    while time.time() - since < 30:
        value = promql_value(prometheus, query)
        if value is not None and value > above:
            out["t"] = time.time()
            return
        time.sleep(0.02)


def measure(page, pod_url, model, prometheus, query, samples, interval):  # type: ignore[no-untyped-def]
    tandem: list[float] = []
    prom: list[float] = []
    session = requests.Session()
    rng = random.Random(5)
    for _ in range(samples):
        page.wait_for_function(
            "(floor) => { const c = window.__changes; return c.length && c[c.length - 1].v < floor; }",
            arg=BASELINE_TPS,
            timeout=int(30_000 * interval),
        )
        time.sleep(rng.uniform(0, interval))
        before = promql_value(prometheus, query) or 0.0
        response = session.post(
            f"{pod_url}/v1/completions",
            # a prompt no earlier sample sent: vLLM 0.32's ExampleConnector on a prefill counts its own
            # saved KV of a repeated prompt as a negative connector hit, and the engine dies of it
            json={"model": model, "prompt": f"sample {len(tandem)} " + "the cache " * 64, "max_tokens": 1},
            timeout=30,
        )
        response.raise_for_status()
        changed_at = time.time()
        seen_by_prometheus: dict[str, float] = {}
        poller = threading.Thread(
            target=prometheus_sees, args=(prometheus, query, before, changed_at, seen_by_prometheus)
        )
        poller.start()
        try:
            seen = page.wait_for_function(
                "([t0, floor]) => window.__changes.find(c => c.t >= t0 && c.v >= floor)",
                arg=[changed_at, BASELINE_TPS],
                timeout=int(30_000 * interval),
            ).json_value()
        except Exception:
            print(
                "the page never showed the request; its last changes:",
                page.evaluate("window.__changes.slice(-8)"),
            )
            raise
        poller.join(35)
        tandem.append(seen["t"] - changed_at)
        prom.append(seen_by_prometheus.get("t", float("nan")) - changed_at)
    return tandem, prom


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=30)
    parser.add_argument("--interval", type=float, default=1.0, help="collection and scrape interval, s")
    args = parser.parse_args()
    apply_env(TELEMETRY_INTERVAL_SECONDS=str(args.interval))
    ensure_database()
    import django

    django.setup()
    from playwright.sync_api import sync_playwright

    from realengine import install
    from sandbox.monitoring import SandboxPrometheus
    from sandbox.testing import SandboxCluster

    started = time.monotonic()
    was_installed = install.stamp().exists()
    install.install()
    install_s = time.monotonic() - started
    cookie = session_cookie()
    cluster = SandboxCluster(nodes=2, accelerators=["nvidia.com/gpu=8"], env={"SANDBOX_REAL_ENGINES": "vllm"})
    with tempfile.TemporaryDirectory(prefix="tandem-bench-") as tmp, cluster as sandbox:
        started = time.monotonic()
        topology, prefill = deploy_topology(sandbox, preset="qwen-gpu-nixl", ready_within=420.0)
        ready_s = time.monotonic() - started
        TOPOLOGY_ID[0] = topology.pk
        pod_url = f"http://{prefill.ip}:{prefill.container_ports[0] if prefill.container_ports else 8000}"
        query = f'sum(vllm:prompt_tokens_total{{pod="{prefill.name}"}})'
        worker = celery(["worker", "-P", "solo", "-Q", "telemetry", "--without-gossip", "--without-mingle"])
        beat = celery(["beat", "-s", str(Path(tmp) / "beat-schedule")])
        try:
            with (
                SandboxPrometheus(sandbox, scrape_interval=f"{args.interval:g}s") as prometheus,
                Uvicorn() as server,
                sync_playwright() as pw,
            ):
                prometheus.wait_for_targets(topology.namespace, 2)
                browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
                context = browser.new_context(viewport={"width": 1440, "height": 1000})
                context.add_cookies([{"name": "sessionid", "value": cookie, "url": server.base}])
                page = context.new_page()
                DEBUG.append((server.base, cookie))
                page.goto(f"{server.base}/topologies/{topology.pk}/")
                page.wait_for_selector(f'#telemetry-live tr[data-pod="{prefill.name}"]', timeout=60_000)
                page.evaluate(OBSERVE_JS, prefill.name)
                tandem, prom = measure(
                    page, pod_url, topology.model_name, prometheus.url, query, args.samples, args.interval
                )
                browser.close()
        finally:
            for proc in (beat, worker):
                proc.terminate()
                proc.wait(15)
            topology.deployed_revision = None
            topology.save(update_fields=["deployed_revision"])
    t_ms = [v * 1000 for v in tandem]
    p_ms = [v * 1000 for v in prom if v == v]
    print(f"freshness against a real vLLM 0.32 (CPU), interval {args.interval:g} s, {len(t_ms)} samples")
    print("                              p50      p95      max")
    print(
        f"  Tandem (change -> DOM)   {quantile(t_ms, 0.5):6.0f} ms {quantile(t_ms, 0.95):6.0f} ms "
        f"{max(t_ms):6.0f} ms"
    )
    print(
        f"  Prometheus (-> PromQL)   {quantile(p_ms, 0.5):6.0f} ms {quantile(p_ms, 0.95):6.0f} ms "
        f"{max(p_ms):6.0f} ms   ({len(p_ms)} seen)"
    )
    gap = quantile(t_ms, 0.95) - quantile(p_ms, 0.95)
    print(f"  p95 gap: Tandem {gap:+.0f} ms vs Prometheus (target <= +{TARGET_MS:.0f} ms)")
    print("real-engine lane")
    print(f"  install: {'cached' if was_installed else 'installed'} in {install_s:.0f} s")
    print(f"  engines: 1 prefill + 1 decode Ready {ready_s:.0f} s after the apply")
    print("  samples Tandem (ms): " + json.dumps([round(v) for v in t_ms]))
    print("  samples Prometheus (ms): " + json.dumps([round(v) for v in p_ms]))


if __name__ == "__main__":
    main()
