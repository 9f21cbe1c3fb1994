"""The delete job: remove the topology's cluster objects (only those carrying its labels), then the row."""

from __future__ import annotations

import time
from typing import Any

import kube
from deployments import plan
from deployments.job import Cancelled, Job, connection, deploy_options, setting
from deployments.models import State
from topologies.selectors import pod_selector


def run_delete(job: Job) -> None:
    from topologies.models import Revision, Topology

    deployment = job.load()
    topology = deployment.topology
    if topology is None:
        job.move(State.SUCCEEDED, "The topology was already deleted")
        return
    conn = connection(deployment)
    objects: dict[tuple[str, str, str, str], Any] = {}
    for manifests in Revision.objects.filter(topology=topology).values_list("manifests", flat=True):
        for obj in manifests or []:
            objects.setdefault(plan.object_key(obj), obj)
    keys = list(reversed(list(objects)))
    job.move(State.APPLYING, f"Deleting {len(keys)} objects from the cluster")
    removed = []
    try:
        for api_version, kind, namespace, name in keys:
            live = kube.get_object(conn, api_version, kind, namespace or None, name)
            if plan.owned_by_topology(live, topology.pk) and kube.delete_object(
                conn, api_version, kind, namespace or None, name
            ):
                removed.append(f"{kind}/{name}")
        job.move(State.WAITING, f"Deleted {len(removed)} objects; waiting for the pods to go", pods_total=0)
        deadline = time.monotonic() + min(120.0, deploy_options(deployment)[0])
        while True:
            left = kube.list_pods(conn, topology.namespace, pod_selector(topology))
            job.beat(pods_ready=len(left))
            if not left or time.monotonic() >= deadline:
                break
            time.sleep(float(setting("DEPLOY_POLL_SECONDS", 1.0)))
    except kube.KubeError as error:
        job.move(State.FAILED, f"Failed: {error}", error=str(error)[:2000])
        return
    except Cancelled:
        job.move(State.FAILED, "Cancelled by an operator; some objects may remain", error="cancelled")
        return
    job.move(State.SUCCEEDED, f"Deleted topology {topology.name} and {len(removed)} cluster objects")
    from audit.services import audit_record

    audit_record(action="topology.deleted", target=topology, detail={"objects": removed})
    Topology.objects.filter(pk=topology.pk).delete()
