"""parse_engine_spec reads pods the way the engines read their command lines."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from sandbox.engine.spec import EngineArgumentError, parse_engine_spec

EXAMPLES = Path(__file__).resolve().parents[2].parent / "shared" / "reference" / "kthena" / "examples"


def _example_pods(filename: str) -> list[tuple[str, dict[str, Any], dict[str, str]]]:
    """(role name, pod, configmap files mounted by subPath) for each role of a Kthena example."""
    path = EXAMPLES / filename
    assert path.exists(), f"the Kthena examples are expected at {EXAMPLES} (CI has ../shared)"
    docs = list(yaml.safe_load_all(path.read_text()))
    configmaps = {d["metadata"]["name"]: d for d in docs if d and d["kind"] == "ConfigMap"}
    out = []
    for doc in docs:
        if not doc or doc["kind"] != "ModelServing":
            continue
        for role in doc["spec"]["template"]["roles"]:
            spec = copy.deepcopy(role["entryTemplate"]["spec"])
            files: dict[str, str] = {}
            volumes = {v["name"]: v for v in spec.get("volumes", [])}
            for container in spec["containers"]:
                for mount in container.get("volumeMounts", []):
                    volume = volumes.get(mount["name"], {})
                    if "configMap" in volume and mount.get("subPath"):
                        data = configmaps[volume["configMap"]["name"]]["data"]
                        files[mount["mountPath"]] = data[mount["subPath"]]
            labels = {
                "modelserving.volcano.sh/role": role["name"],
                "modelserving.volcano.sh/group-name": "g-0",
                "modelserving.volcano.sh/role-id": f"{role['name']}-0",
            }
            pod = {
                "metadata": {"name": f"{role['name']}-0", "labels": labels},
                "spec": spec,
                "status": {"podIP": "127.0.0.9"},
            }
            out.append((role["name"], pod, files))
    return out


@pytest.mark.parametrize(
    ("filename", "engine", "model", "port", "connector"),
    [
        ("model-serving__gpu-pd-disaggregation.yaml", "vllm", "Qwen/Qwen3-0.6B", 8000, "NixlConnector"),
        (
            "model-serving__prefill-decode-disaggregation.yaml",
            "vllm",
            "deepseek-ai/DeepSeekV2",
            8000,
            "MooncakeConnectorV1",
        ),
        ("model-serving__sglang-pd-disaggregation.yaml", "sglang", "Qwen/Qwen3-0.6B", 30000, "mooncake"),
        ("models__deepseek-v4-flash__modelserving.yaml", "vllm", "deepseek_v4", 7100, "MooncakeConnectorV1"),
    ],
)
def test_kthena_examples_parse_into_prefill_and_decode_specs(filename, engine, model, port, connector):
    pods = _example_pods(filename)
    assert [role for role, _, _ in pods] == ["prefill", "decode"]
    for role, pod, files in pods:
        spec = parse_engine_spec(pod, files=files)
        assert (spec.engine, spec.role, spec.model, spec.port, spec.kv_connector) == (
            engine,
            role,
            model,
            port,
            connector,
        )
        assert spec.mooncake_master is None


def test_script_from_a_configmap_that_is_not_mounted_fails_like_bash():
    _, pod, _ = _example_pods("models__deepseek-v4-flash__modelserving.yaml")[0]
    with pytest.raises(EngineArgumentError, match=r"bash: line 1: ./prefill.sh: No such file or directory"):
        parse_engine_spec(pod)


def test_the_engine_container_is_found_behind_a_sidecar():
    _, pod, _ = _example_pods("model-serving__prefill-decode-disaggregation.yaml")[0]
    assert pod["spec"]["containers"][0]["name"] == "runtime"
    spec = parse_engine_spec(pod)
    assert "--tensor-parallel-size" in spec.args
    assert ("HF_HUB_OFFLINE", "1") in spec.env


def _vllm_pod(
    *args: str, labels: dict[str, str] | None = None, env: list[dict[str, Any]] | None = None
) -> dict:
    container = {
        "name": "vllm",
        "image": "vllm/vllm-openai:v0.10.1",
        "command": ["vllm", "serve"],
        "args": list(args),
        "env": env or [],
    }
    return {"metadata": {"name": "p-0", "labels": labels or {}}, "spec": {"containers": [container]}}


def test_kv_both_takes_its_role_from_the_pod_labels():
    config = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
    pod = _vllm_pod("m", "--kv-transfer-config", config, labels={"tandem.io/role": "decode"})
    assert parse_engine_spec(pod).role == "decode"
    assert parse_engine_spec(_vllm_pod("m", "--kv-transfer-config", config)).role == "both"


def test_no_kv_transfer_config_means_a_mixed_engine_on_the_default_port():
    spec = parse_engine_spec(_vllm_pod("Qwen/Qwen3-0.6B"))
    assert (spec.role, spec.kv_connector, spec.port, spec.model) == ("both", None, 8000, "Qwen/Qwen3-0.6B")


def test_sh_c_script_with_variables_and_continuations():
    script = (
        "export PORT=8100\nMODEL=/models/q  # comment\n"
        'python3 -m vllm.entrypoints.openai.api_server --model "$MODEL" \\\n  --port ${PORT} \\\n'
        "  --served-model-name q --kv-transfer-config "
        '\'{"kv_connector":"MooncakeConnector","kv_role":"kv_consumer"}\'\n'
    )
    pod = {
        "metadata": {"name": "d"},
        "spec": {"containers": [{"name": "c", "image": "x/y:1", "command": ["sh", "-c"], "args": [script]}]},
    }
    spec = parse_engine_spec(pod)
    assert (spec.engine, spec.role, spec.port, spec.model, spec.kv_connector) == (
        "vllm",
        "decode",
        8100,
        "q",
        "MooncakeConnector",
    )


def test_kubernetes_variable_references_expand_from_env_and_field_refs():
    env = [
        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "NAME", "value": "served-$(POD_IP)"},
    ]
    pod = _vllm_pod("m", "--host", "$(POD_IP)", "--served-model-name", "$(NAME)", env=env)
    pod["status"] = {"podIP": "127.0.3.4"}
    spec = parse_engine_spec(pod)
    assert spec.model == "served-127.0.3.4"
    assert "127.0.3.4" in spec.args


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("m", "--kv-transfer-config", "{not json"),
            "argument --kv-transfer-config: Value {not json cannot be",
        ),
        (
            ("m", "--kv-transfer-config", '{"kv_connector":"Warp","kv_role":"kv_producer"}'),
            "ValueError: Unsupported connector type: Warp",
        ),
        (
            ("m", "--kv-transfer-config", '{"kv_connector":"NixlConnector","kv_role":"producer"}'),
            "ValueError: Unsupported kv_role: producer",
        ),
        (("m", "--kv-transfer-config", '{"kv_connector":"NixlConnector"}'), "Please specify kv_role"),
        (
            ("m", "--tensor-parallel-size", "two"),
            "argument --tensor-parallel-size/-tp: invalid int value: 'two'",
        ),
        (("m", "--gpu-memory-utilization", "1.5"), "GPU memory utilization must be within (0, 1]"),
        (("m", "--block-size", "17"), "argument --block-size: invalid choice: '17'"),
        (("m", "--tensor-paralel-size", "2"), "unrecognized arguments: --tensor-paralel-size"),
        (
            (
                "--port",
                "8000",
            ),
            "the following arguments are required: model_tag",
        ),
    ],
)
def test_bad_vllm_arguments_raise_the_line_vllm_prints(args, message):
    with pytest.raises(EngineArgumentError) as caught:
        parse_engine_spec(_vllm_pod(*args))
    assert message in str(caught.value)


def test_store_connectors_need_a_mooncake_master():
    store = '{"kv_connector":"MooncakeStoreConnector","kv_role":"kv_both"}'
    with pytest.raises(EngineArgumentError, match="MOONCAKE_CONFIG_PATH"):
        parse_engine_spec(_vllm_pod("m", "--kv-transfer-config", store))
    pod = _vllm_pod(
        "m", "--kv-transfer-config", store, env=[{"name": "MOONCAKE_MASTER", "value": "mc-master:50051"}]
    )
    assert parse_engine_spec(pod).mooncake_master == "mc-master:50051"
    extra = (
        '{"kv_connector":"MooncakeConnectorStoreV1","kv_role":"kv_producer","kv_connector_extra_config":'
        '{"master_server_address":"store:50051"}}'
    )
    assert parse_engine_spec(_vllm_pod("m", "--kv-transfer-config", extra)).mooncake_master == "store:50051"
    path_only = _vllm_pod(
        "m", "--kv-transfer-config", store, env=[{"name": "MOONCAKE_CONFIG_PATH", "value": "/c.json"}]
    )
    assert parse_engine_spec(path_only).mooncake_master == "mooncake-master:50051"


def test_sglang_bad_disaggregation_mode():
    container = {
        "name": "s",
        "image": "lmsysorg/sglang:latest",
        "command": ["python3", "-m", "sglang.launch_server"],
        "args": ["--model-path", "q", "--disaggregation-mode", "prefil"],
    }
    with pytest.raises(EngineArgumentError, match="invalid choice: 'prefil'"):
        parse_engine_spec({"metadata": {"name": "s"}, "spec": {"containers": [container]}})


def test_mindie_role_and_port_from_env():
    container = {
        "name": "m",
        "image": "ascendhub/mindie:2.0",
        "command": ["/usr/local/bin/mindieservice_daemon"],
        "env": [{"name": "MINDIE_ROLE", "value": "decode"}, {"name": "MINDIE_MODEL_NAME", "value": "ds"}],
        "ports": [{"containerPort": 1025}],
    }
    spec = parse_engine_spec({"metadata": {"name": "m"}, "spec": {"containers": [container]}})
    assert (spec.engine, spec.role, spec.model, spec.port, spec.kv_connector) == (
        "mindie",
        "decode",
        "ds",
        1025,
        "llm-datadist",
    )


def test_a_container_that_is_no_engine_is_refused():
    container = {"name": "n", "image": "nginx:1.27", "command": ["nginx", "-g", "daemon off;"]}
    with pytest.raises(EngineArgumentError, match="not a vLLM, SGLang or MindIE engine"):
        parse_engine_spec({"metadata": {"name": "n"}, "spec": {"containers": [container]}})


def test_mindie_refuses_to_listen_on_all_addresses_unless_told_or_given_the_pods_address():
    import json

    container = {
        "name": "m",
        "image": "ascendhub/mindie:2.0",
        "command": ["/usr/local/bin/mindieservice_daemon"],
        "env": [{"name": "MINDIE_ROLE", "value": "decode"}],
    }
    pod = {"metadata": {"name": "m"}, "spec": {"containers": [container]}}

    def config(**server: object) -> dict[str, str]:
        return {"/etc/tandem/mindie-decode.json": json.dumps({"ServerConfig": {"port": 1025, **server}})}

    with pytest.raises(EngineArgumentError, match=r"ipAddress 0\.0\.0\.0 .* allowAllZeroIpListening"):
        parse_engine_spec(pod, config(ipAddress="0.0.0.0"))
    with pytest.raises(EngineArgumentError, match=r"managementIpAddress 0\.0\.0\.0"):
        parse_engine_spec(pod, config(ipAddress="10.0.0.5", managementIpAddress="0.0.0.0"))
    assert (
        parse_engine_spec(pod, config(ipAddress="0.0.0.0", allowAllZeroIpListening=True)).engine == "mindie"
    )
    container["env"] = [
        *container["env"],
        {"name": "MIES_CONTAINER_IP", "value": "10.0.0.5"},
        {"name": "MIES_CONTAINER_MANAGEMENT_IP", "value": "10.0.0.5"},
    ]
    assert parse_engine_spec(pod, config(ipAddress="0.0.0.0")).role == "decode"  # the env takes precedence
