"""Kthena backend: ModelServing (prefill + decode roles), ModelServer (P/D routing), ModelRoute.

Modelled on Kthena's own P/D examples. Pure: same spec, id and revision give the same objects. Role pod
templates carry no revision (see ``podtemplate``), so a scale or a change to one role leaves the other's
pods running.
"""

from __future__ import annotations

from typing import Any

from kube import labels
from topologies.render import engine, podtemplate
from topologies.spec import TopologySpec

WORKLOAD_API = "workload.serving.volcano.sh/v1alpha1"
NETWORKING_API = "networking.serving.volcano.sh/v1alpha1"
KINDS = ((WORKLOAD_API, "ModelServing"), (NETWORKING_API, "ModelServer"), (NETWORKING_API, "ModelRoute"))
REQUIRED_CRDS = (
    "modelservings.workload.serving.volcano.sh",
    "modelservers.networking.serving.volcano.sh",
    "modelroutes.networking.serving.volcano.sh",
)
# Kthena's router knows these engines and KV connector types (ModelServer CRD enums).
INFERENCE_ENGINE = {"vllm": "vLLM", "vllm-ascend": "vLLM", "sglang": "SGLang", "mindie": "vLLM"}
ROUTER_CONNECTOR = {
    "mooncake": "mooncake",
    "mooncake-store": "mooncake",
    "nixl": "nixl",
    "lmcache": "lmcache",
    "llm-datadist": "http",
    "none": "http",
}


def _meta(spec: TopologySpec, name: str, *, topology_id: int, revision: int) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": spec.namespace,
        "labels": labels.topology_labels(topology_id, revision),
    }


def _role(spec: TopologySpec, role: str, *, topology_id: int) -> dict[str, Any]:
    return {
        "name": role,
        "replicas": spec.role(role).replicas,
        "workerReplicas": 0,
        "entryTemplate": podtemplate.pod_template(
            spec, role, engine.pod_spec(spec, role), topology_id=topology_id
        ),
    }


def model_serving(spec: TopologySpec, *, topology_id: int, revision: int) -> dict[str, Any]:
    roles = ["decode"] if spec.connector.type == "none" else ["prefill", "decode"]
    return {
        "apiVersion": WORKLOAD_API,
        "kind": "ModelServing",
        "metadata": _meta(spec, spec.name, topology_id=topology_id, revision=revision),
        "spec": {
            "schedulerName": "volcano",
            "replicas": 1,
            "recoveryPolicy": "ServingGroupRecreate",
            # One serving group: a change to one role's template replaces that role's pods only.
            "rolloutStrategy": {"type": "RoleRollingUpdate"},
            "template": {
                "restartGracePeriodSeconds": 60,
                "roles": [_role(spec, r, topology_id=topology_id) for r in roles],
            },
        },
    }


def model_server(spec: TopologySpec, *, topology_id: int, revision: int) -> dict[str, Any]:
    selector: dict[str, Any] = {"matchLabels": {labels.KTHENA_NAME: spec.name}}
    if spec.connector.type != "none":
        selector["pdGroup"] = {
            "groupKey": labels.KTHENA_GROUP,
            # Tandem's serving-role label, not the owner's role label: an in-place switch relabels it.
            "prefillLabels": {labels.SERVING_ROLE: "prefill"},
            "decodeLabels": {labels.SERVING_ROLE: "decode"},
        }
    body: dict[str, Any] = {
        "model": spec.model_name,
        "inferenceEngine": INFERENCE_ENGINE[spec.engine],
        "workloadPort": {"port": spec.port, "protocol": "http"},
        "workloadSelector": selector,
        "trafficPolicy": {
            "timeout": f"{spec.routing.timeout_seconds}s",
            "retry": {
                "attempts": spec.routing.retry_attempts,
                "retryInterval": f"{spec.routing.retry_interval_ms}ms",
            },
        },
        "kvConnector": {"type": ROUTER_CONNECTOR[spec.connector.type]},
    }
    return {
        "apiVersion": NETWORKING_API,
        "kind": "ModelServer",
        "metadata": _meta(spec, spec.name, topology_id=topology_id, revision=revision),
        "spec": body,
    }


def model_route(spec: TopologySpec, *, topology_id: int, revision: int) -> dict[str, Any]:
    return {
        "apiVersion": NETWORKING_API,
        "kind": "ModelRoute",
        "metadata": _meta(spec, spec.name, topology_id=topology_id, revision=revision),
        "spec": {
            "modelName": spec.routing.model_name,
            "rules": [{"name": "default", "targetModels": [{"modelServerName": spec.name}]}],
        },
    }


def render(spec: TopologySpec, *, topology_id: int, revision: int) -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = []
    if engine.needs_config_map(spec):
        objects.append(engine.config_map(spec, topology_id=topology_id, revision=revision))
    objects.append(model_serving(spec, topology_id=topology_id, revision=revision))
    objects.append(model_server(spec, topology_id=topology_id, revision=revision))
    objects.append(model_route(spec, topology_id=topology_id, revision=revision))
    return objects
