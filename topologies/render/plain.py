"""Plain backend for clusters without Kthena: a Deployment + headless Service per role, and a router.

The router is the topology's entry point: a Deployment (with a ServiceAccount allowed to discover
the role pods) behind a Service labelled ``tandem.io/role=router`` whose annotations name the
prefill and decode Services, the served model and the routing policy.
"""

from __future__ import annotations

from typing import Any

from kube import labels
from topologies.render import engine, podtemplate
from topologies.spec import TopologySpec

ROUTER_IMAGES = {
    "sglang": "docker.io/lmsysorg/sgl-model-gateway:latest",
    "vllm": "docker.io/lmcache/lmstack-router:latest",
    "vllm-ascend": "docker.io/lmcache/lmstack-router:latest",
    "mindie": "docker.io/lmcache/lmstack-router:latest",
}
ANNOTATION_PREFILL = "tandem.io/prefill-service"
ANNOTATION_DECODE = "tandem.io/decode-service"
ANNOTATION_MODEL = "tandem.io/model"
ANNOTATION_TIMEOUT = "tandem.io/timeout-seconds"
ANNOTATION_RETRIES = "tandem.io/retry-attempts"
ANNOTATION_RETRY_INTERVAL = "tandem.io/retry-interval-ms"


def role_name(spec: TopologySpec, role: str) -> str:
    return f"{spec.name}-{role}"


def router_name(spec: TopologySpec) -> str:
    return f"{spec.name}-router"


def _meta(spec: TopologySpec, name: str, *, topology_id: int, revision: int, role: str) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": spec.namespace,
        "labels": {**labels.topology_labels(topology_id, revision), labels.ROLE: role},
    }


def _selector(topology_id: int, role: str) -> dict[str, str]:
    # Selectors are immutable on Deployments: never include the revision.
    return {labels.TOPOLOGY: str(topology_id), labels.ROLE: role}


def role_deployment(spec: TopologySpec, role: str, *, topology_id: int, revision: int) -> dict[str, Any]:
    pod = engine.pod_spec(spec, role)
    pod["terminationGracePeriodSeconds"] = 60
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(spec, role_name(spec, role), topology_id=topology_id, revision=revision, role=role),
        "spec": {
            "replicas": spec.role(role).replicas,
            "selector": {"matchLabels": _selector(topology_id, role)},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "template": podtemplate.pod_template(spec, role, pod, topology_id=topology_id),
        },
    }


def role_service(spec: TopologySpec, role: str, *, topology_id: int, revision: int) -> dict[str, Any]:
    ports = [
        {"name": p["name"], "port": p["containerPort"], "targetPort": p["containerPort"], "protocol": "TCP"}
        for p in engine.container_ports(spec, role)
    ]
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(spec, role_name(spec, role), topology_id=topology_id, revision=revision, role=role),
        "spec": {
            "clusterIP": "None",
            "selector": _selector(topology_id, role),
            "ports": ports,
            "publishNotReadyAddresses": False,
        },
    }


def _router_args(spec: TopologySpec, topology_id: int) -> tuple[list[str], list[str]]:
    selector = f"{labels.TOPOLOGY}={topology_id}"
    if spec.engine == "sglang":
        return ["sgl-model-gateway"], [
            "--host",
            "0.0.0.0",
            "--port",
            str(spec.port),
            "--pd-disaggregation",
            "--service-discovery",
            "--service-discovery-namespace",
            spec.namespace,
            "--service-discovery-port",
            str(spec.port),
            "--prefill-selector",
            selector,
            f"{labels.ROLE}=prefill",
            "--decode-selector",
            selector,
            f"{labels.ROLE}=decode",
            "--request-timeout-secs",
            str(spec.routing.timeout_seconds),
            "--retry-max-retries",
            str(spec.routing.retry_attempts),
        ]
    return ["vllm-router"], [
        "--host",
        "0.0.0.0",
        "--port",
        str(spec.port),
        "--service-discovery",
        "k8s",
        "--k8s-namespace",
        spec.namespace,
        "--k8s-port",
        str(spec.port),
        "--k8s-label-selector",
        selector,
        "--routing-logic",
        "disaggregated_prefill" if spec.connector.type != "none" else "roundrobin",
        "--prefill-model-labels",
        "prefill",
        "--decode-model-labels",
        "decode",
    ]


def router_objects(spec: TopologySpec, *, topology_id: int, revision: int) -> list[dict[str, Any]]:
    name = router_name(spec)
    meta = _meta(spec, name, topology_id=topology_id, revision=revision, role="router")
    command, args = _router_args(spec, topology_id)
    service_meta = _meta(spec, name, topology_id=topology_id, revision=revision, role="router")
    service_meta["annotations"] = {
        ANNOTATION_PREFILL: role_name(spec, "prefill") if spec.connector.type != "none" else "",
        ANNOTATION_DECODE: role_name(spec, "decode"),
        ANNOTATION_MODEL: spec.routing.model_name,
        ANNOTATION_TIMEOUT: str(spec.routing.timeout_seconds),
        ANNOTATION_RETRIES: str(spec.routing.retry_attempts),
        ANNOTATION_RETRY_INTERVAL: str(spec.routing.retry_interval_ms),
    }
    env = [
        {"name": "TANDEM_MODEL_NAME", "value": spec.routing.model_name},
        {"name": "TANDEM_PREFILL_SERVICE", "value": service_meta["annotations"][ANNOTATION_PREFILL]},
        {"name": "TANDEM_DECODE_SERVICE", "value": role_name(spec, "decode")},
        {"name": "TANDEM_KV_CONNECTOR", "value": spec.connector.type},
    ]
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": meta,
            "rules": [
                {"apiGroups": [""], "resources": ["pods", "endpoints"], "verbs": ["get", "list", "watch"]}
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": meta,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": spec.namespace}],
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": meta,
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": _selector(topology_id, "router")},
                "template": podtemplate.pod_template(
                    spec,
                    "router",
                    {
                        "serviceAccountName": name,
                        "containers": [
                            {
                                "name": "router",
                                "image": spec.routing.router_image or ROUTER_IMAGES[spec.engine],
                                "imagePullPolicy": "IfNotPresent",
                                "command": command,
                                "args": args,
                                "env": env,
                                "ports": [{"name": "http", "containerPort": spec.port, "protocol": "TCP"}],
                                "readinessProbe": {
                                    "httpGet": {"path": "/health", "port": spec.port},
                                    "periodSeconds": 5,
                                },
                            }
                        ],
                    },
                    topology_id=topology_id,
                ),
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": service_meta,
            "spec": {
                "type": spec.routing.service_type,
                "selector": _selector(topology_id, "router"),
                "ports": [{"name": "http", "port": spec.port, "targetPort": spec.port, "protocol": "TCP"}],
            },
        },
    ]


def render(spec: TopologySpec, *, topology_id: int, revision: int) -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = []
    if engine.needs_config_map(spec):
        objects.append(engine.config_map(spec, topology_id=topology_id, revision=revision))
    roles = ["decode"] if spec.connector.type == "none" else ["prefill", "decode"]
    for role in roles:
        objects.append(role_deployment(spec, role, topology_id=topology_id, revision=revision))
        objects.append(role_service(spec, role, topology_id=topology_id, revision=revision))
    objects += router_objects(spec, topology_id=topology_id, revision=revision)
    return objects
