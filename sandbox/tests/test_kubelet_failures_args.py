"""The simulated vLLM reads its command line as vLLM 0.32.0 does: every answer the real engine gave
(captured in data/vllm-0.32.0-argparse-cases.json) is the simulator's, and every command line Tandem
renders, for every backend × connector × vLLM engine and each seed preset, is accepted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sandbox.controllers.containers import exit_code
from sandbox.engine.spec import EngineArgumentError, parse_engine_spec

CASES = json.loads((Path(__file__).parent / "data" / "vllm-0.32.0-argparse-cases.json").read_text())


def _pod(command: list[str]) -> dict[str, Any]:
    container = {"name": "engine", "image": "vllm/vllm-openai:v0.32.0", "command": command}
    return {"metadata": {"name": "p"}, "spec": {"containers": [container]}}


@pytest.mark.parametrize("case", CASES["cases"], ids=lambda c: " ".join(c["argv"][2:])[:60])
def test_the_simulator_answers_each_command_line_as_the_real_engine_did(case: dict[str, Any]) -> None:
    command = ["python3", *case["argv"][1:]] if case["argv"][0] == "python" else case["argv"]
    if case["exit"] == 0:
        parse_engine_spec(_pod(command))
        return
    with pytest.raises(EngineArgumentError) as refused:
        parse_engine_spec(_pod(command))
    lines = str(refused.value).splitlines()
    assert lines[-1] == case["stderr_tail"][-1]
    assert exit_code(lines) == case["exit"] == 2
    if case["argv"][0] == "vllm" and "unrecognized arguments" in lines[-1]:
        assert lines[:-1] == CASES["vllm_usage"]  # argparse prints the `vllm` parser's usage first


def _vllm_commands() -> list[tuple[str, dict[str, Any]]]:
    from topologies.preflight import render_objects
    from topologies.presets import PRESETS, preset_spec
    from topologies.spec import TopologySpec
    from topologies.tests.combinations import all_combinations, combination

    specs = [(key, preset_spec(key)) for key in PRESETS if preset_spec(key)["engine"].startswith("vllm")]
    specs += [
        (f"{engine}/{connector}/{backend}", combination(engine, connector, backend))
        for engine, connector, backend in all_combinations()
        if engine.startswith("vllm")
    ]
    out = []
    for name, data in specs:
        for obj in render_objects(TopologySpec.from_dict(data)):
            for template in _templates(obj):
                role = ((template.get("metadata") or {}).get("labels") or {}).get("tandem.io/role")
                if role in ("prefill", "decode"):  # the engines (not the P/D router)
                    out.append((name, template))
    return out


def _templates(node: Any) -> list[dict[str, Any]]:
    if isinstance(node, dict):
        if isinstance(node.get("spec"), dict) and "containers" in node["spec"]:
            return [node]
        return [t for value in node.values() for t in _templates(value)]
    if isinstance(node, list):
        return [t for item in node for t in _templates(item)]
    return []


def test_every_vllm_command_line_tandem_renders_is_accepted() -> None:
    commands = _vllm_commands()
    assert len(commands) >= 10
    for name, template in commands:
        spec = parse_engine_spec({"metadata": template.get("metadata") or {}, "spec": template["spec"]})
        assert spec.engine == "vllm", name
