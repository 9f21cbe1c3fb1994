"""Shared helpers for deployment tests against a real sandbox cluster."""

from __future__ import annotations

import copy
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from django.conf import settings

from deployments import runner
from deployments.models import Deployment, Kind
from deployments.services import deployment_start
from kube.labels import TEMPLATE_HASH
from topologies.render.podtemplate import template_hash

ROOT = Path(__file__).resolve().parents[2]


def register(sandbox, name: str = "sandbox"):
    from clusters.services import cluster_register

    return cluster_register(name=name, server=sandbox.server, token=sandbox.token)


def deploy_now(topology, actor, *, revision=None, kind: str = Kind.DEPLOY) -> Deployment:
    """Start a deployment and run it to its final state in this process (as a worker would)."""
    deployment = deployment_start(
        topology=topology, revision=revision, kind=kind, actor=actor, source_ip=None
    )
    assert runner.run(deployment.pk, worker="test-worker") == "claimed"
    deployment.refresh_from_db()
    topology.refresh_from_db()
    return deployment


def ready_pods(sandbox_cluster_conn, topology, revision: int) -> list[Any]:
    """Ready pods running the templates of revision `revision` (topology + role + template hash).

    A template the revision shares with another one (a role the revision did not change) matches the
    pods of both."""
    import kube
    from deployments.plan import pod_sets
    from kube.labels import topology_selector

    sets = pod_sets(topology.revisions.get(number=revision).manifests)
    pods = kube.list_pods(sandbox_cluster_conn, topology.namespace, topology_selector(topology.pk))
    return [p for p in pods if p.ready and not p.deletion_pending and any(s.matches(p.labels) for s in sets)]


def ready_roles(sandbox_cluster_conn, topology) -> list[str]:
    """Roles of every Ready pod of the topology, sorted (one entry per pod)."""
    import kube
    from kube.labels import ROLE, topology_selector

    pods = kube.list_pods(sandbox_cluster_conn, topology.namespace, topology_selector(topology.pk))
    return sorted(p.labels.get(ROLE, "") for p in pods if p.ready and not p.deletion_pending)


def pod_uids(sandbox_cluster_conn, topology) -> dict[str, str]:
    """Pod name → uid of every pod of the topology not being deleted."""
    import kube
    from kube.labels import topology_selector

    items = kube.list_objects(
        sandbox_cluster_conn, "v1", "Pod", topology.namespace, label_selector=topology_selector(topology.pk)
    )
    return {
        p["metadata"]["name"]: p["metadata"]["uid"]
        for p in items
        if not p["metadata"].get("deletionTimestamp")
    }


def revision_with_manifests(topology, mutate, message: str):
    """A new revision whose spec passes preflight but whose objects carry a fault the spec cannot express
    (as when the cluster changes between preflight and start)."""
    from topologies.models import Revision

    base = topology.current_revision
    manifests = copy.deepcopy(base.manifests)
    number = base.number + 1
    for obj in manifests:
        _relabel(obj, number)
        before = [template_hash(t, {}) for t in pod_templates(obj)]
        mutate(obj)
        for template, old in zip(pod_templates(obj), before, strict=True):
            if template_hash(template, {}) != old:  # as the renderer would: the hash follows the content
                labels = template["metadata"]["labels"]
                labels[TEMPLATE_HASH] = template_hash(template, {"was": labels[TEMPLATE_HASH]})
    revision = Revision.objects.create(
        topology=topology, number=number, spec=base.spec, manifests=manifests, message=message
    )
    topology.current_revision = revision
    topology.save(update_fields=["current_revision"])
    return revision


def _relabel(node: Any, number: int) -> None:
    if isinstance(node, dict):
        labels = node.get("labels")
        if isinstance(labels, dict) and "tandem.io/revision" in labels:
            labels["tandem.io/revision"] = str(number)
        for value in node.values():
            _relabel(value, number)
    elif isinstance(node, list):
        for item in node:
            _relabel(item, number)


def pod_templates(obj: dict[str, Any]) -> list[dict[str, Any]]:
    if obj.get("kind") == "ModelServing":
        roles = obj["spec"]["template"]["roles"]
        return [r[key] for r in roles for key in ("entryTemplate", "workerTemplate") if r.get(key)]
    if obj.get("kind") == "Deployment":
        return [obj["spec"]["template"]]
    return []


class Worker:
    """A real Celery worker process consuming the deploy queue of the test's Redis and database."""

    def __init__(self, name: str, **env_overrides: str) -> None:
        db = settings.DATABASES["default"]
        host = f"{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}"
        env = {
            **os.environ,
            "DATABASE_URL": f"postgres://{db['USER'] or 'postgres'}@{host}/{db['NAME']}",
            "REDIS_URL": settings.REDIS_URL,
            "CELERY_VISIBILITY_TIMEOUT": "4",
            "DEPLOY_HEARTBEAT_STALE_SECONDS": "3",
            "DEPLOY_POLL_SECONDS": "0.2",
            "DEPLOY_FAIL_FAST_SECONDS": "2",
            "DEPLOY_READY_TIMEOUT_SECONDS": "60",
            "LOG_LEVEL": "info",
            **env_overrides,
        }
        command = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "controlplane",
            "worker",
            "-P",
            "solo",
            "-Q",
            "deploy",
        ]
        self.process = subprocess.Popen(
            [*command, "-n", f"{name}@%h", "--without-gossip", "--without-mingle", "--loglevel", "INFO"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.lines: list[str] = []
        self.ready = threading.Event()
        threading.Thread(target=self._pump, daemon=True).start()
        if not self.ready.wait(60):
            self.stop()
            raise AssertionError("celery worker did not start:\n" + "".join(self.lines[-40:]))

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)
            if " ready." in line:
                self.ready.set()
        self.ready.set()

    def kill(self) -> None:
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(5)
