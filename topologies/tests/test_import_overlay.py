"""The pod-template overlay after an import: validated with the spec, kept by the editor, shown in the
editor and the revision diff, applied by both backends; unset values stay unset through an edit."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from kube import labels
from topologies.forms import parse_values, spec_to_values
from topologies.importing import import_manifests
from topologies.render import render
from topologies.selectors import revision_diff
from topologies.spec import SpecError, TopologySpec

ASCEND = (
    Path(__file__).resolve().parents[3]
    / "shared"
    / "reference"
    / "kthena"
    / "examples"
    / "model-serving__prefill-decode-disaggregation.yaml"
)


def _imported() -> dict[str, Any]:
    if not ASCEND.is_file():
        pytest.fail(f"Kthena's Ascend example is expected at {ASCEND} (CI checks out ../shared)")
    result = import_manifests(ASCEND.read_text())
    assert result.ok, result.errors
    return result.spec


def _with_overlay(spec: dict[str, Any], role: str, overlay: Any) -> dict[str, Any]:
    out = copy.deepcopy(spec)
    out["roles"][role]["pod_overlay"] = overlay
    return out


@pytest.mark.parametrize(
    ("overlay", "path", "words"),
    [
        ({"spec": {"nodeSelector": {"a": "b"}}}, "spec.nodeSelector", "node_selector"),
        ({"engine": {"image": "x:1"}}, "engine.image", "set image instead"),
        ({"engine": {"args": ["--x"]}}, "engine.args", "extra_args"),
        ({"metadata": {"labels": {"tandem.io/role": "decode"}}}, "metadata.labels.tandem.io/role", "Tandem"),
        ({"spec": {"hostNetwrk": True}}, "spec.hostNetwrk", "spelling"),
        ({"spec": {"initContainers": [{"name": "fetch"}]}}, "spec.initContainers[fetch].image", "required"),
        ({"engine": {"volumeMounts": [{"name": "w", "mountPath": "/w"}]}}, "spec.volumes", "no volume 'w'"),
        ({"spec": {"tolerations": ["x" * 70000]}}, "", "keep it under 65536"),
        ({"sidecars": []}, "sidecars", "overlay section"),
    ],
)
def test_an_overlay_the_spec_refuses_names_the_field_and_the_fix(overlay: Any, path: str, words: str) -> None:
    with pytest.raises(SpecError) as caught:
        TopologySpec.from_dict(_with_overlay(_imported(), "prefill", overlay))
    where = "roles.prefill.pod_overlay" + (f".{path}" if path else "")
    assert where in caught.value.errors, caught.value.errors
    assert words in " ".join(caught.value.errors[where])


def test_the_editor_keeps_the_overlay_the_data_parallel_size_and_the_unset_values() -> None:
    spec = _imported()
    values = spec_to_values(spec)
    assert "downloader" in values["roles.prefill.pod_overlay"]  # shown in the editor, as YAML
    assert values["slo.ttft_ms"] == "" and values["rebalancing.decode.min"] == ""
    parsed, _raw, errors = parse_values(values)
    assert not errors and parsed is not None
    assert parsed.to_dict() == spec  # an untouched save changes nothing: no default invented
    broken, _raw, errors = parse_values({**values, "roles.decode.pod_overlay": "engine: [unclosed"})
    assert broken is None and "roles.decode.pod_overlay" in errors


@pytest.mark.parametrize("backend", ["kthena", "deployments"])
def test_both_backends_apply_the_overlay_and_a_change_rolls_only_its_role(backend: str) -> None:
    spec = {**_imported(), "backend": backend}
    before = render(TopologySpec.from_dict(spec), topology_id=3, revision=1)
    tolerated = copy.deepcopy(spec)
    tolerated["roles"]["prefill"]["pod_overlay"]["spec"]["tolerations"] = [
        {"key": "huawei.com/Ascend910", "operator": "Exists", "effect": "NoSchedule"}
    ]
    after = render(TopologySpec.from_dict(tolerated), topology_id=3, revision=2)

    def templates(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
        if backend == "kthena":
            serving = next(o for o in objects if o["kind"] == "ModelServing")
            return {r["name"]: r["entryTemplate"] for r in serving["spec"]["template"]["roles"]}
        return {
            o["spec"]["template"]["metadata"]["labels"][labels.ROLE]: o["spec"]["template"]
            for o in objects
            if o["kind"] == "Deployment"
            and o["spec"]["template"]["metadata"]["labels"][labels.ROLE] != "router"
        }

    old, new = templates(before), templates(after)
    assert [c["name"] for c in old["decode"]["spec"]["initContainers"]] == ["downloader"]
    assert new["prefill"]["spec"]["tolerations"][0]["key"] == "huawei.com/Ascend910"
    assert "tolerations" not in new["decode"]["spec"]
    hash_of = labels.TEMPLATE_HASH
    assert old["decode"]["metadata"]["labels"][hash_of] == new["decode"]["metadata"]["labels"][hash_of]
    assert old["prefill"]["metadata"]["labels"][hash_of] != new["prefill"]["metadata"]["labels"][hash_of]


@pytest.mark.django_db
def test_the_edit_page_and_the_revision_diff_show_the_overlay(client, operator, cluster) -> None:
    from topologies.services import topology_import, topology_update

    topology, _ = topology_import(cluster=cluster, text=ASCEND.read_text(), actor=operator)
    client.force_login(operator)
    page = client.get(f"/topologies/{topology.pk}/edit/").content.decode()
    assert 'name="roles.prefill.pod_overlay"' in page and "ghcr.io/volcano-sh/downloader:latest" in page
    assert 'data-needs-answer="slo.ttft_ms"' in page and 'data-needs-answer="rebalancing.prefill.min"' in page
    changed = copy.deepcopy(topology.spec)
    changed["roles"]["decode"]["pod_overlay"]["engine"]["livenessProbe"]["initialDelaySeconds"] = 1200
    topology = topology_update(topology=topology, spec=changed, actor=operator, message="slower start")
    first, second = topology.revisions.order_by("number")
    diff = revision_diff(first, second)
    changed_lines = [" ".join(line.split()) for line in diff.splitlines() if line[:1] in "+-"]
    assert "- initialDelaySeconds: 900" in changed_lines and "+ initialDelaySeconds: 1200" in changed_lines
    refused = client.post(
        f"/topologies/{topology.pk}/edit/",
        {**spec_to_values(topology.spec), "roles.prefill.pod_overlay": "engine:\n  image: other:1\n"},
    ).content.decode()
    assert "engine.image: is modelled by the spec; set image instead" in refused
