"""Time from "deploy" to every pod Ready for a 4-prefill / 4-decode topology in the sandbox.

Starts a sandbox cluster (4 nodes × 8 huawei.com/ascend-1980), registers it, creates the DeepSeek
Ascend + Mooncake seed topology scaled to 4P/4D (8 pods × 4 NPUs: the whole cluster), and runs the
real deployment job (preflight → apply → wait for Ready) several times, deleting between runs. After
each deploy it scales decode 4 → 3 (a new revision, deployed the same way) and counts the surviving
pods that were replaced: a scale should replace none. Prints each run and the medians.

    .venv/bin/python bench/deploy_4p4d.py [--runs 5] [--poll 1.0]

The job runs in this process exactly as a Celery worker runs it (the queue hop adds milliseconds).
Environment: ``BENCH_DATABASE_URL`` (default: a temporary SQLite file, migrated at start),
``BENCH_REDIS_URL`` (redis://127.0.0.1:6379/7).
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def configure(poll: float) -> None:
    tmp = tempfile.mkdtemp(prefix="tandem-bench-deploy-")
    os.environ.update(
        DATABASE_URL=os.environ.get("BENCH_DATABASE_URL", f"sqlite:///{tmp}/bench.sqlite3"),
        REDIS_URL=os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/7"),
        SECRET_KEY="bench-secret-key-not-for-production-0123456789abcdef",
        FIELD_ENCRYPTION_KEYS="qx7dD0H3ZxKdbMgFq3aXNd7R5lOqdRkk2m8Wq1fW0cM=",
        TANDEM_HTTPS="false",
        LOG_LEVEL="warning",
        DEPLOY_POLL_SECONDS=str(poll),
        DJANGO_SETTINGS_MODULE="controlplane.settings",
    )
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)


def phase_seconds(deployment: Any) -> dict[str, float]:
    """Seconds spent in each state, from the deployment's step log (first step of each state)."""
    firsts: dict[str, Any] = {}
    for step in deployment.steps.all():
        firsts.setdefault(step.state, step.time)
    order = [s for s in ("queued", "preflight", "applying", "waiting", "succeeded") if s in firsts]
    return {a: (firsts[b] - firsts[a]).total_seconds() for a, b in itertools.pairwise(order)}


def pod_uids(conn: Any, namespace: str) -> dict[str, str]:
    import kube

    items = kube.list_objects(conn, "v1", "Pod", namespace)
    return {
        p["metadata"]["name"]: p["metadata"]["uid"]
        for p in items
        if not p["metadata"].get("deletionTimestamp")
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--poll", type=float, default=1.0, help="readiness poll interval, seconds (product default 1)"
    )
    args = parser.parse_args()
    configure(args.poll)

    from clusters.selectors import cluster_connection
    from clusters.services import cluster_register
    from deployments import runner
    from deployments.models import Kind, State
    from deployments.services import deployment_start, topology_scale_start
    from sandbox.testing import SandboxCluster
    from topologies.presets import preset_spec
    from topologies.services import topology_create

    with SandboxCluster(nodes=4, accelerators=["huawei.com/ascend-1980=8"]) as sandbox:
        cluster = cluster_register(name="bench", server=sandbox.server, token=sandbox.token)
        conn = cluster_connection(cluster)
        times: list[float] = []
        scale_times: list[float] = []
        breakdown: dict[str, list[float]] = {}
        print(f"4P/4D DeepSeek Ascend + Mooncake on a sandbox of 4 nodes × 8 NPUs; poll {args.poll}s")
        print(
            f"{'run':>3}  {'deploy→Ready (s)':>16}  {'pods':>5}  state      {'scale D 4→3 (s)':>15}  replaced"
        )
        for run in range(1, args.runs + 1):
            spec = preset_spec("deepseek-ascend-mooncake", name=f"bench-{run}", namespace=f"bench-{run}")
            spec["roles"]["prefill"]["replicas"] = 4
            spec["roles"]["decode"]["replicas"] = 4
            spec["rebalancing"] = {
                "prefill": {"min": 1, "max": 7},
                "decode": {"min": 1, "max": 7},
                "accelerator_budget": 32,
            }
            topology = topology_create(cluster=cluster, spec=spec, actor=None)
            started = time.perf_counter()
            deployment = deployment_start(topology=topology, actor=None, source_ip=None)
            runner.run(deployment.pk, worker="bench")
            elapsed = time.perf_counter() - started
            deployment.refresh_from_db()
            phases = phase_seconds(deployment)
            for name, seconds in phases.items():
                breakdown.setdefault(name, []).append(seconds)
            scale_text = ""
            if deployment.state == State.SUCCEEDED:
                times.append(elapsed)
                before = pod_uids(conn, topology.namespace)
                started = time.perf_counter()
                scale = topology_scale_start(
                    topology=topology, role="decode", replicas=3, actor=None, source_ip=None
                )
                runner.run(scale.pk, worker="bench")
                scale_elapsed = time.perf_counter() - started
                scale.refresh_from_db()
                after = pod_uids(conn, topology.namespace)
                replaced = sum(1 for name, uid in after.items() if before.get(name, uid) != uid)
                scale_text = f"  {scale_elapsed:>15.2f}  {replaced} of {len(after)} ({scale.state})"
                if scale.state == State.SUCCEEDED:
                    scale_times.append(scale_elapsed)
            print(
                f"{run:>3}  {elapsed:>16.2f}  "
                f"{deployment.pods_ready:>2}/{deployment.pods_total:<2}  {deployment.state:<9}{scale_text}"
            )
            if deployment.state != State.SUCCEEDED:
                print(f"     {deployment.error}")
            topology.refresh_from_db()
            removal = deployment_start(topology=topology, kind=Kind.DELETE, actor=None, source_ip=None)
            runner.run(removal.pk, worker="bench")
        if breakdown:
            print(
                "median per phase: "
                + ", ".join(f"{k} {statistics.median(v):.2f} s" for k, v in breakdown.items())
            )
        if times:
            print(
                f"median deploy→all pods Ready: {statistics.median(times):.2f} s over {len(times)} runs "
                f"(min {min(times):.2f}, max {max(times):.2f})"
            )
        if scale_times:
            print(
                f"median scale decode 4→3 to done: {statistics.median(scale_times):.2f} s over "
                f"{len(scale_times)} runs (min {min(scale_times):.2f}, max {max(scale_times):.2f})"
            )
    return 0 if times else 1


if __name__ == "__main__":
    raise SystemExit(main())
