"""Spec validation: every error names the field path and says how to fix it."""

from __future__ import annotations

import pytest

from topologies.presets import PRESETS, preset_spec
from topologies.spec import SpecError, TopologySpec


def _errors(data: dict) -> dict[str, list[str]]:  # type: ignore[type-arg]
    with pytest.raises(SpecError) as caught:
        TopologySpec.from_dict(data)
    return caught.value.errors


@pytest.mark.parametrize("key", list(PRESETS))
def test_presets_are_valid_and_round_trip(key: str) -> None:
    spec = TopologySpec.from_dict(preset_spec(key))
    assert TopologySpec.from_dict(spec.to_dict()) == spec
    assert TopologySpec.from_dict(spec.to_dict()).to_dict() == spec.to_dict()


def test_accelerator_count_below_tensor_parallel_names_the_fix() -> None:
    data = preset_spec("qwen-gpu-nixl")
    data["roles"]["prefill"]["tensor_parallel_size"] = 8
    assert _errors(data)["roles.prefill.accelerator_count"] == [
        "must be ≥ tensor_parallel_size (8); set it to 8 or lower --tensor-parallel-size"
    ]


def test_every_problem_is_reported_at_once() -> None:
    data = preset_spec("qwen-gpu-nixl", name="Bad_Name", engine="tgi", port=70000)
    del data["image"]
    errors = _errors(data)
    assert set(errors) >= {"name", "engine", "port", "image"}
    assert "lower-case" in errors["name"][0]
    assert "choose one of: vllm, vllm-ascend, sglang, mindie" in errors["engine"][0]
    assert errors["port"] == ["must be between 1 and 65535 (got 70000)"]
    assert errors["image"] == ["is required"]


def test_connector_must_suit_engine() -> None:
    errors = _errors(preset_spec("qwen-sglang-mooncake", connector={"type": "llm-datadist"}))
    assert "sglang cannot use the llm-datadist connector" in errors["connector.type"][0]


def test_mooncake_store_needs_master_address() -> None:
    errors = _errors(preset_spec("qwen-gpu-nixl", connector={"type": "mooncake-store"}))
    assert "mooncake-master.<namespace>.svc:50051" in errors["connector.master_address"][0]
    errors = _errors(
        preset_spec("qwen-gpu-nixl", connector={"type": "mooncake-store", "master_address": "x"})
    )
    assert "host:port" in errors["connector.master_address"][0]


def test_llm_datadist_needs_cache_desc_and_distinct_cluster_ids() -> None:
    errors = _errors(
        preset_spec(
            "deepseek-ascend-mooncake",
            connector={"type": "llm-datadist", "prefill_cluster_id": 3, "decode_cluster_id": 3},
        )
    )
    assert "num_tensors, shape and dtype" in errors["connector.cache_desc"][0]
    assert "must differ from prefill_cluster_id (3)" in errors["connector.decode_cluster_id"][0]
    errors = _errors(
        preset_spec(
            "deepseek-ascend-mooncake",
            connector={
                "type": "llm-datadist",
                "cache_desc": {"num_tensors": 0, "shape": [1, -2], "dtype": "fp8"},
            },
        )
    )
    assert "connector.cache_desc.num_tensors" in errors
    assert "-2 is not a positive size" in errors["connector.cache_desc.shape"][0]
    assert "choose one of: float16" in errors["connector.cache_desc.dtype"][0]


def test_cache_desc_shape_accepts_text() -> None:
    spec = TopologySpec.from_dict(
        preset_spec(
            "deepseek-ascend-mooncake",
            connector={
                "type": "llm-datadist",
                "cache_desc": {"num_tensors": 54, "shape": "2048, 128, 1, 576", "dtype": "bfloat16"},
            },
        )
    )
    assert spec.connector.cache_desc is not None and spec.connector.cache_desc.shape == (2048, 128, 1, 576)


def test_extra_args_may_not_override_managed_flags() -> None:
    data = preset_spec("qwen-gpu-nixl")
    data["roles"]["decode"]["extra_args"] = ["--max-model-len", "4096", "--kv-transfer-config={}"]
    assert "--kv-transfer-config is set by Tandem" in _errors(data)["roles.decode.extra_args"][0]


def test_env_and_node_selector_keys_are_checked() -> None:
    data = preset_spec("qwen-gpu-nixl")
    data["roles"]["prefill"]["env"] = {"BAD-NAME": "1"}
    data["roles"]["decode"]["node_selector"] = {"bad key!": "x"}
    errors = _errors(data)
    assert "environment variable name" in errors["roles.prefill.env.BAD-NAME"][0]
    assert "node label key" in errors["roles.decode.node_selector.bad key!"][0]


def test_replicas_must_sit_within_rebalancing_bounds_and_budget() -> None:
    data = preset_spec("qwen-gpu-nixl")
    data["roles"]["decode"]["replicas"] = 5
    errors = _errors(data)
    assert "within the rebalancing bounds 1..3" in errors["roles.decode.replicas"][0]
    assert "must be ≥ the 6 accelerators" in errors["rebalancing.accelerator_budget"][0]


def test_no_connector_means_no_prefill_role() -> None:
    errors = _errors(preset_spec("qwen-gpu-nixl", connector={"type": "none"}))
    assert "set prefill replicas to 0" in errors["roles.prefill.replicas"][0]


def test_vllm_ascend_refuses_nvidia_resources() -> None:
    data = preset_spec("deepseek-ascend-mooncake")
    data["roles"]["decode"]["accelerator_resource"] = "nvidia.com/gpu"
    assert "huawei.com" in _errors(data)["roles.decode.accelerator_resource"][0]


def test_defaults_fill_in() -> None:
    spec = TopologySpec.from_dict(
        {
            "name": "tiny",
            "model_name": "m",
            "engine": "vllm",
            "image": "vllm/vllm-openai:v0.10.0",
            "connector": {"type": "nixl"},
            "roles": {
                "prefill": {"accelerator_resource": "nvidia.com/gpu", "accelerator_count": 1},
                "decode": {"accelerator_resource": "nvidia.com/gpu", "accelerator_count": 1},
            },
        }
    )
    assert spec.namespace == "default" and spec.backend == "kthena" and spec.port == 8000
    assert spec.routing.model_name == "m" and spec.model_source == "m"
    assert spec.rebalancing.accelerator_budget == 2 and spec.prefill.replicas == 1


def test_non_object_spec_is_refused() -> None:
    assert "must be an object" in _errors([])["spec"][0]  # type: ignore[arg-type]


def test_credentials_in_env_must_reference_a_secret() -> None:
    data = preset_spec("qwen-gpu-nixl")
    data["roles"]["prefill"]["env"] = {
        "HF_TOKEN": "hf_abc123",
        "TOKENIZERS_PARALLELISM": "false",
        "SANDBOX_PREFILL_MS_PER_TOKEN": "0.5",  # a rate per token, not a token
        "SUPER_TOKEN": "abc",
    }
    data["roles"]["decode"]["env"] = {"OPENAI_API_KEY": "secret:openai"}
    errors = _errors(data)
    assert "roles.prefill.env.SANDBOX_PREFILL_MS_PER_TOKEN" not in errors
    assert "Kubernetes Secret" in errors["roles.prefill.env.SUPER_TOKEN"][0]
    assert "Kubernetes Secret" in errors["roles.prefill.env.HF_TOKEN"][0]
    assert "secret:<secret-name>/<key>" in errors["roles.prefill.env.HF_TOKEN"][0]
    assert "roles.prefill.env.TOKENIZERS_PARALLELISM" not in errors
    assert errors["roles.decode.env.OPENAI_API_KEY"] == [
        "a secret reference reads secret:<secret-name>/<key>, e.g. secret:hf/token"
    ]


def test_secret_reference_renders_as_a_secret_key_ref() -> None:
    from topologies.render.engine import container_env

    data = preset_spec("qwen-gpu-nixl")
    data["roles"]["prefill"]["env"] = {"HF_TOKEN": "secret:hf-cred/token"}
    spec = TopologySpec.from_dict(data)
    assert spec.role("prefill").env == {"HF_TOKEN": "secret:hf-cred/token"}
    env = {e["name"]: e for e in container_env(spec, "prefill")}
    assert env["HF_TOKEN"] == {
        "name": "HF_TOKEN",
        "valueFrom": {"secretKeyRef": {"name": "hf-cred", "key": "token"}},
    }
