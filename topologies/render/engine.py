"""Engine containers for one role: command line, KV-transfer flags, env, resources. Pure functions.

Both backends (Kthena and plain Deployments) put the same container in their pod templates, so a
topology behaves the same whichever backend runs it.
"""

from __future__ import annotations

import json
from typing import Any

from kube import labels
from topologies.render.tracing import ENGINE_ID_ENV, trace_forwarder, tracing_args, tracing_env
from topologies.spec import SECRET_REF, TENT_METRICS_DEFAULT_PORT, ConnectorSpec, RoleSpec, TopologySpec

CONFIG_DIR = "/etc/tandem"
# Mooncake's transfer engine (TENT) serves its own /metrics on this port (MetricsConfig.http_port's
# default; kvcache-ai/Mooncake tent/include/tent/metrics/config_loader.h). Rendered only when the spec
# asks (connector.transfer_metrics): declaring it on every Mooncake engine would make Kthena's own
# manifests import with a difference. Telemetry reads it from a pod that declares it.
TENT_METRICS_PORT = TENT_METRICS_DEFAULT_PORT
TENT_PORT_NAME = "tent-metrics"
# TENT's switches (config_loader.h: ENV_METRICS_ENABLED, ENV_METRICS_HTTP_PORT)
TENT_ENV_ENABLED = "TENT_METRICS_ENABLED"
TENT_ENV_PORT = "TENT_METRICS_HTTP_PORT"
ASCEND_MOONCAKE_MODULE = "vllm_ascend.distributed.mooncake_connector"
ASCEND_MOONCAKE_STORE_MODULE = "vllm_ascend.distributed.mooncake.mooncake_store_connector_v1"
ASCEND_LLMDATADIST_MODULE = "vllm_ascend.distributed.llmdatadist_c_mgr_connector"


def config_map_name(spec: TopologySpec) -> str:
    return f"{spec.name}-config"


def needs_config_map(spec: TopologySpec) -> bool:
    return spec.connector.type == "mooncake-store" or spec.engine == "mindie"


def _field_env(name: str, path: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def _env(name: str, value: str | int) -> dict[str, Any]:
    return {"name": name, "value": str(value)}


def kv_role(connector: ConnectorSpec, role: str) -> str:
    if connector.type == "nixl":
        return "kv_both"
    return "kv_producer" if role == "prefill" else "kv_consumer"


def kv_transfer_config(spec: TopologySpec, role: str) -> dict[str, Any] | None:
    """The vLLM ``--kv-transfer-config`` JSON for this role, or None when the engine takes no such flag."""
    c = spec.connector
    if spec.engine not in ("vllm", "vllm-ascend") or c.type == "none":
        return None
    ascend = spec.engine == "vllm-ascend"
    rank = 0 if role == "prefill" else 1
    kv_port = str(c.kv_port + rank)
    layout = {
        "prefill": {"dp_size": spec.prefill.data_parallel_size, "tp_size": spec.prefill.tensor_parallel_size},
        "decode": {"dp_size": spec.decode.data_parallel_size, "tp_size": spec.decode.tensor_parallel_size},
    }
    engine_id = f"$({ENGINE_ID_ENV})"
    if c.type == "mooncake" and ascend:
        return {
            "kv_connector": "MooncakeConnectorV1",
            "kv_buffer_device": "npu",
            "kv_role": kv_role(c, role),
            "kv_parallel_size": 1,
            "kv_port": kv_port,
            "engine_id": engine_id,
            "kv_rank": rank,
            "kv_connector_module_path": ASCEND_MOONCAKE_MODULE,
            "kv_connector_extra_config": layout,
        }
    if c.type == "mooncake":
        return {"kv_connector": "MooncakeConnector", "kv_role": kv_role(c, role), "engine_id": engine_id}
    if c.type == "mooncake-store" and ascend:
        return {
            "kv_connector": "MooncakeConnectorStoreV1",
            "kv_buffer_device": "npu",
            "kv_role": kv_role(c, role),
            "kv_connector_module_path": ASCEND_MOONCAKE_STORE_MODULE,
        }
    if c.type in ("mooncake-store", "lmcache"):
        return {
            "kv_connector": "LMCacheConnectorV1",
            "kv_role": kv_role(c, role),
            "kv_connector_extra_config": {"discard_partial_chunks": False},
        }
    if c.type == "nixl":
        return {"kv_connector": "NixlConnector", "kv_role": "kv_both", "engine_id": engine_id}
    if c.type == "llm-datadist":
        return {
            "kv_connector": "LLMDataDistCMgrConnector",
            "kv_buffer_device": "npu",
            "kv_role": kv_role(c, role),
            "kv_parallel_size": 1,
            "kv_port": kv_port,
            "engine_id": engine_id,
            "kv_rank": rank,
            "kv_connector_module_path": ASCEND_LLMDATADIST_MODULE,
        }
    return None


def _vllm_args(spec: TopologySpec, role: str) -> list[str]:
    r = spec.role(role)
    args = [
        spec.model_source,
        "--host",
        "0.0.0.0",
        "--port",
        str(spec.port),
        "--served-model-name",
        spec.model_name,
        "--tensor-parallel-size",
        str(r.tensor_parallel_size),
    ]
    if r.data_parallel_size > 1:
        args += ["--data-parallel-size", str(r.data_parallel_size)]
    args += list(r.extra_args)
    config = kv_transfer_config(spec, role)
    if config is not None:
        args += ["--kv-transfer-config", json.dumps(config, separators=(",", ":"))]
    return args + tracing_args(spec)


def sglang_role_switch(spec: TopologySpec) -> bool:
    """Whether SGLang instances are started able to switch role in place (``--enable-pd-role-switch``,
    ``POST /pd_role_switch``): with the Mooncake transfer backend on Kthena, where Tandem routes by its
    serving-role label (rebalancing/switching.py). Both roles then get the bootstrap port, which a
    decode instance serves once it becomes prefill."""
    return spec.engine == "sglang" and spec.connector.type == "mooncake" and spec.backend == "kthena"


def _sglang_args(spec: TopologySpec, role: str) -> list[str]:
    r = spec.role(role)
    c = spec.connector
    args = [
        "--model-path",
        spec.model_source,
        "--served-model-name",
        spec.model_name,
        "--host",
        "$(POD_IP)",
        "--port",
        str(spec.port),
        "--tp-size",
        str(r.tensor_parallel_size),
    ]
    if r.data_parallel_size > 1:
        args += ["--dp-size", str(r.data_parallel_size)]
    if c.type != "none":
        backend = "nixl" if c.type == "nixl" else "mooncake"
        args += ["--disaggregation-mode", role, "--disaggregation-transfer-backend", backend]
        if role == "prefill" or sglang_role_switch(spec):
            args += ["--disaggregation-bootstrap-port", str(c.bootstrap_port)]
        if sglang_role_switch(spec):
            args.append("--enable-pd-role-switch")
    if c.type == "mooncake-store":
        args += ["--enable-hierarchical-cache", "--hicache-storage-backend", "mooncake"]
    args += ["--enable-metrics", *r.extra_args]
    return args + tracing_args(spec)


def command_and_args(spec: TopologySpec, role: str) -> tuple[list[str], list[str]]:
    if spec.engine in ("vllm", "vllm-ascend"):
        return ["vllm", "serve"], _vllm_args(spec, role)
    if spec.engine == "sglang":
        return ["python3", "-m", "sglang.launch_server"], _sglang_args(spec, role)
    # MindIE reads its server config (role, ports, model, LLM-DataDist settings) from a file.
    return ["/bin/bash", "-c"], [
        f"cp {CONFIG_DIR}/mindie-{role}.json $MIES_INSTALL_PATH/conf/config.json && "
        "cd $MIES_INSTALL_PATH && exec ./bin/mindieservice_daemon"
    ]


def tent_metrics(spec: TopologySpec) -> bool:
    """TENT's metrics server is on: asked for on an engine whose KV moves through Mooncake's transfer
    engine (vLLM's ``MooncakeConnector``, vllm-ascend's ``MooncakeConnectorV1``, SGLang's
    ``--disaggregation-transfer-backend mooncake``)."""
    return spec.connector.transfer_metrics and spec.connector.type == "mooncake" and spec.engine != "mindie"


def _connector_env(spec: TopologySpec, role: str) -> list[dict[str, Any]]:
    c = spec.connector
    env: list[dict[str, Any]] = []
    if tent_metrics(spec):
        env += [_env(TENT_ENV_ENABLED, "true"), _env(TENT_ENV_PORT, c.transfer_metrics_port)]
    if c.type == "mooncake" and spec.engine == "vllm" and role == "prefill":
        env.append(_env("VLLM_MOONCAKE_BOOTSTRAP_PORT", c.bootstrap_port))
    if c.type == "nixl" and spec.engine in ("vllm", "vllm-ascend"):
        env += [
            _field_env("VLLM_NIXL_SIDE_CHANNEL_HOST", "status.podIP"),
            _env("VLLM_NIXL_SIDE_CHANNEL_PORT", c.side_channel_port),
        ]
    if c.type == "mooncake-store":
        env += [
            _env("MOONCAKE_CONFIG_PATH", f"{CONFIG_DIR}/mooncake.json"),
            _env("MOONCAKE_MASTER", c.master_address),
        ]
        if spec.engine == "vllm":
            env += [
                _env("LMCACHE_REMOTE_URL", f"mooncakestore://{c.master_address}/"),
                _env("LMCACHE_CONFIG_FILE", f"{CONFIG_DIR}/mooncake.json"),
            ]
    if c.type == "lmcache":
        env += [
            _env("LMCACHE_ENABLE_PD", "True"),
            _env("LMCACHE_PD_ROLE", "sender" if role == "prefill" else "receiver"),
            _env("LMCACHE_TRANSFER_CHANNEL", "nixl"),
            _env("LMCACHE_PD_PEER_INIT_PORT", c.kv_port),
        ]
    if c.type == "llm-datadist":
        env += [
            _env("LLM_DATADIST_ROLE", "PROMPT" if role == "prefill" else "DECODER"),
            _env(
                "LLM_DATADIST_CLUSTER_ID", c.prefill_cluster_id if role == "prefill" else c.decode_cluster_id
            ),
            _env(
                "LLM_DATADIST_REMOTE_CLUSTER_ID",
                c.decode_cluster_id if role == "prefill" else c.prefill_cluster_id,
            ),
            _env("LLM_DATADIST_LINK_PORT", c.link_port),
        ]
        if c.cache_desc is not None:
            env += [
                _env("LLM_DATADIST_CACHE_NUM_TENSORS", c.cache_desc.num_tensors),
                _env("LLM_DATADIST_CACHE_SHAPE", ",".join(str(s) for s in c.cache_desc.shape)),
                _env("LLM_DATADIST_CACHE_DTYPE", c.cache_desc.dtype),
            ]
    return env


def container_env(spec: TopologySpec, role: str) -> list[dict[str, Any]]:
    env = [
        _field_env("POD_IP", "status.podIP"),
        _field_env(ENGINE_ID_ENV, "metadata.name"),
        _env("TANDEM_ROLE", role),
        _env("TANDEM_ENGINE", spec.engine),
        _env("TANDEM_KV_CONNECTOR", spec.connector.type),
    ]
    if spec.engine in ("vllm-ascend", "mindie"):
        env += [
            _field_env("HCCL_IF_IP", "status.podIP"),
            _env("HCCL_SOCKET_IFNAME", "eth0"),
            _env("GLOO_SOCKET_IFNAME", "eth0"),
            _env("TP_SOCKET_IFNAME", "eth0"),
        ]
    if spec.engine == "mindie":
        env += [
            _env("MIES_INSTALL_PATH", "/usr/local/Ascend/mindie/latest/mindie-service"),
            _env("MIES_SERVICE_MONITOR_MODE", "1"),
            _field_env("MIES_CONTAINER_IP", "status.podIP"),
            _field_env("MIES_CONTAINER_MANAGEMENT_IP", "status.podIP"),
        ]
    env += _connector_env(spec, role)
    env += tracing_env(spec, role)
    env += [_user_env(k, v) for k, v in spec.role(role).env.items()]
    return env


def _user_env(name: str, value: str) -> dict[str, Any]:
    """An env entry of the spec; "secret:<secret-name>/<key>" becomes a reference to that Secret's key."""
    ref = SECRET_REF.match(value)
    if ref is None:
        return _env(name, value)
    return {"name": name, "valueFrom": {"secretKeyRef": {"name": ref.group(1), "key": ref.group(3)}}}


def container_ports(spec: TopologySpec, role: str) -> list[dict[str, Any]]:
    c = spec.connector
    ports: list[dict[str, Any]] = [{"name": "http", "containerPort": spec.port, "protocol": "TCP"}]
    if c.type in ("mooncake", "llm-datadist") and spec.engine != "sglang":
        ports.append(
            {"name": "kv", "containerPort": c.kv_port + (0 if role == "prefill" else 1), "protocol": "TCP"}
        )
    if c.type != "none" and spec.engine == "sglang" and (role == "prefill" or sglang_role_switch(spec)):
        ports.append({"name": "bootstrap", "containerPort": c.bootstrap_port, "protocol": "TCP"})
    if c.type == "mooncake" and spec.engine == "vllm" and role == "prefill":
        ports.append({"name": "bootstrap", "containerPort": c.bootstrap_port, "protocol": "TCP"})
    if c.type == "nixl" and spec.engine != "sglang":
        ports.append({"name": "nixl", "containerPort": c.side_channel_port, "protocol": "TCP"})
    if c.type == "llm-datadist":
        ports.append({"name": "link", "containerPort": c.link_port, "protocol": "TCP"})
    if spec.engine == "mindie":
        ports.append({"name": "metrics", "containerPort": mindie_metrics_port(spec.port), "protocol": "TCP"})
    if tent_metrics(spec):
        ports.append({"name": TENT_PORT_NAME, "containerPort": c.transfer_metrics_port, "protocol": "TCP"})
    return ports


def mindie_metrics_port(port: int) -> int:
    """MindIE's metrics plane (``metricsPort``, compulsory in its config.json): MindIE serves /metrics
    only there when it differs from ``port``. Two above the service port, as MindIE's own defaults
    (1025 / 1026 / 1027, MindIE-LLM ``src/server/conf/config.json``); telemetry scrapes it there."""
    return port + 2


def resources(role: RoleSpec) -> dict[str, Any]:
    amounts: dict[str, Any] = {}
    if role.accelerator_count:
        amounts[role.accelerator_resource] = str(role.accelerator_count)
    if role.cpu:
        amounts["cpu"] = role.cpu
    if role.memory:
        amounts["memory"] = role.memory
    return {"limits": dict(amounts), "requests": dict(amounts)} if amounts else {}


def pod_spec(spec: TopologySpec, role: str) -> dict[str, Any]:
    """The pod spec for one role's engine instance (same for every backend)."""
    r = spec.role(role)
    command, args = command_and_args(spec, role)
    container: dict[str, Any] = {
        "name": role,
        "image": spec.image,
        "imagePullPolicy": "IfNotPresent",
        "command": command,
        "args": args,
        "env": container_env(spec, role),
        "ports": container_ports(spec, role),
        "readinessProbe": {
            "httpGet": {"path": "/health", "port": spec.port},
            "initialDelaySeconds": 5,
            "periodSeconds": 5,
            "failureThreshold": 3,
        },
        "volumeMounts": [{"name": "shm", "mountPath": "/dev/shm"}],  # noqa: S108 (shared memory)
    }
    res = resources(r)
    if res:
        container["resources"] = res
    volumes: list[dict[str, Any]] = [{"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}}]
    if spec.engine in ("vllm-ascend", "mindie"):
        container["volumeMounts"].append(
            {"name": "hccn-config", "mountPath": "/etc/hccn.conf", "readOnly": True}
        )
        volumes.append({"name": "hccn-config", "hostPath": {"path": "/etc/hccn.conf", "type": "File"}})
    if needs_config_map(spec):
        container["volumeMounts"].append({"name": "tandem-config", "mountPath": CONFIG_DIR, "readOnly": True})
        volumes.append({"name": "tandem-config", "configMap": {"name": config_map_name(spec)}})
    pod: dict[str, Any] = {"containers": [container], "volumes": volumes}
    forwarder = trace_forwarder(spec, role)
    if forwarder is not None:
        pod["containers"].append(forwarder)
    if r.node_selector:
        pod["nodeSelector"] = dict(r.node_selector)
    return pod


def mindie_config(spec: TopologySpec, role: str) -> dict[str, Any]:
    """MindIE-Service config.json for one role (PD-separated "dmi" mode with LLM-DataDist)."""
    r = spec.role(role)
    c = spec.connector
    desc = c.cache_desc
    return {
        "ServerConfig": {
            # MindIE refuses to listen on 0.0.0.0: both planes take the pod's address from
            # MIES_CONTAINER_IP / MIES_CONTAINER_MANAGEMENT_IP (container_env), which override these.
            "ipAddress": "127.0.0.1",
            "port": spec.port,
            # The management API (role assignment, /v1/status) on the same address and port (MindIE's
            # single-address, single-port scheme): Tandem reaches it there through the pods proxy for
            # in-place role switches (docs/role-switches.md).
            "managementPort": spec.port,
            # /metrics on its own plane (docs/ascend.md); the other keys MindIE-LLM's server_config.cpp
            # makes compulsory, with the values of its shipped config.json (https off: Tandem reaches
            # the engine over plain HTTP through the pods proxy).
            "metricsPort": mindie_metrics_port(spec.port),
            "allowAllZeroIpListening": False,
            "maxLinkNum": 1000,
            "httpsEnabled": False,
            "tokenTimeout": 600,
            "e2eTimeout": 600,
            "inferMode": "dmi" if c.type == "llm-datadist" else "standard",
            "interCommPort": c.link_port,
        },
        "BackendConfig": {
            "npuDeviceIds": [list(range(r.accelerator_count))],
            "multiNodesInferEnabled": False,
            "ModelDeployConfig": {
                "ModelConfig": [
                    {
                        "modelName": spec.model_name,
                        "modelWeightPath": spec.model_source,
                        "worldSize": r.tensor_parallel_size,
                    }
                ],
            },
        },
        "LLMDataDist": {
            "role": "PROMPT" if role == "prefill" else "DECODER",
            "clusterId": c.prefill_cluster_id if role == "prefill" else c.decode_cluster_id,
            "remoteClusterId": c.decode_cluster_id if role == "prefill" else c.prefill_cluster_id,
            "linkPort": c.link_port,
            "cacheDesc": None
            if desc is None
            else {
                "numTensors": desc.num_tensors,
                "shape": list(desc.shape),
                "dataType": desc.dtype,
            },
        },
    }


def config_map(spec: TopologySpec, *, topology_id: int, revision: int) -> dict[str, Any]:
    """Files the engines read: Mooncake client config and/or MindIE per-role server configs."""
    data: dict[str, str] = {}
    c = spec.connector
    if c.type == "mooncake-store":
        data["mooncake.json"] = json.dumps(
            {
                "metadata_server": c.metadata_server,
                "master_server_address": c.master_address,
                "protocol": c.protocol,
                "device_name": "",
                "global_segment_size": 3355443200,
                "local_buffer_size": 1073741824,
                "chunk_size": 256,
                "remote_url": f"mooncakestore://{c.master_address}/",
            },
            indent=2,
            sort_keys=True,
        )
    if spec.engine == "mindie":
        for role in ("prefill", "decode"):
            data[f"mindie-{role}.json"] = json.dumps(mindie_config(spec, role), indent=2, sort_keys=True)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": config_map_name(spec),
            "namespace": spec.namespace,
            "labels": labels.topology_labels(topology_id, revision),
        },
        "data": data,
    }
