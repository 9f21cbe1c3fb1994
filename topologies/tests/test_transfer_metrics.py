"""connector.transfer_metrics: Mooncake's transfer engine (TENT) serving its own /metrics, rendered only
when asked for, imported back, refused where no TENT runs, and a port clash named by preflight."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from topologies.forms import spec_to_values
from topologies.importing import import_manifests
from topologies.preflight import check_ports
from topologies.presets import preset_spec
from topologies.render import render
from topologies.spec import SpecError, TopologySpec


def _spec(preset: str = "deepseek-ascend-mooncake", **connector: Any) -> TopologySpec:
    data = preset_spec(preset)
    return TopologySpec.from_dict({**data, "connector": {**data["connector"], **connector}})


def _engines(spec: TopologySpec) -> dict[str, dict[str, Any]]:
    """The engine container of each role, as rendered."""
    found = {}
    for obj in render(spec, topology_id=7, revision=1):
        for role in (obj.get("spec") or {}).get("template", {}).get("roles") or []:
            pod = role["entryTemplate"]["spec"]
            found[role["name"]] = next(c for c in pod["containers"] if c["name"] == role["name"])
    return found


def _tent(container: dict[str, Any]) -> tuple[dict[str, str], list[tuple[str, int]]]:
    env = {e["name"]: e.get("value") for e in container.get("env") or [] if e["name"].startswith("TENT_")}
    ports = [(p["name"], p["containerPort"]) for p in container["ports"] if p["name"] == "tent-metrics"]
    return env, ports


@pytest.mark.parametrize("preset", ["deepseek-ascend-mooncake", "qwen-sglang-mooncake"])
def test_on_it_renders_tents_switches_and_declares_its_port_off_nothing(preset):
    on = _engines(_spec(preset, transfer_metrics=True, transfer_metrics_port=9200))
    assert set(on) == {"prefill", "decode"}
    for container in on.values():
        assert _tent(container) == (
            {"TENT_METRICS_ENABLED": "true", "TENT_METRICS_HTTP_PORT": "9200"},
            [("tent-metrics", 9200)],
        )
    default = _engines(_spec(preset, transfer_metrics=True))["decode"]
    assert _tent(default)[1] == [("tent-metrics", 9100)]
    for container in _engines(_spec(preset)).values():
        assert _tent(container) == ({}, [])


def test_a_spec_with_it_on_round_trips_through_import():
    spec = _spec(transfer_metrics=True, transfer_metrics_port=9300)
    exported = yaml.safe_dump_all(render(spec, topology_id=7, revision=1))
    result = import_manifests(exported, overrides={"slo": spec.to_dict()["slo"]})
    assert result.ok, result.errors
    assert result.spec["connector"]["transfer_metrics"] is True
    assert result.spec["connector"]["transfer_metrics_port"] == 9300
    again = TopologySpec.from_dict(result.spec)
    assert render(again, topology_id=7, revision=1) == render(spec, topology_id=7, revision=1)
    mapped = {n.source: n.message for n in result.report.of("mapped")}
    assert any("TENT_METRICS_HTTP_PORT=9300" in m for m in mapped.values()), mapped


def test_it_is_refused_where_no_transfer_engine_runs_and_must_be_a_boolean():
    with pytest.raises(SpecError) as nixl:
        _spec("qwen-gpu-nixl", transfer_metrics=True)
    assert "connector.transfer_metrics" in nixl.value.errors
    assert "only Mooncake's transfer engine" in nixl.value.errors["connector.transfer_metrics"][0]
    with pytest.raises(SpecError) as garbage:
        _spec(transfer_metrics="sometimes")
    assert garbage.value.errors["connector.transfer_metrics"] == ["must be true or false"]


def test_preflight_names_a_clash_with_another_port_of_the_container_and_the_fix():
    spec = _spec(transfer_metrics=True, transfer_metrics_port=20001)  # the prefill's kv port
    findings = check_ports(spec)
    assert [(f.code, f.field) for f in findings] == [("port_collision", "connector.transfer_metrics_port")]
    assert "collides with connector.kv_port in the prefill pods" in findings[0].message
    assert findings[0].fix == "give connector.transfer_metrics_port a port of its own"
    assert check_ports(_spec(transfer_metrics=True)) == []


def test_the_editor_shows_and_keeps_it():
    values = spec_to_values(_spec(transfer_metrics=True).to_dict())
    assert values["connector.transfer_metrics"] == "true"
    assert values["connector.transfer_metrics_port"] == "9100"
    assert spec_to_values(_spec().to_dict())["connector.transfer_metrics"] == "false"
