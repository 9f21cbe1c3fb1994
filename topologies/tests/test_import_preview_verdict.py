"""The import preview's verdict: what changes, what cannot be represented, what needs an answer, and the
accelerator resource checked against the selected (sandbox) cluster's nodes, on the page and in the API."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from topologies.models import Topology

pytestmark = pytest.mark.django_db
ASCEND = (
    Path(__file__).resolve().parents[3]
    / "shared"
    / "reference"
    / "kthena"
    / "examples"
    / "model-serving__prefill-decode-disaggregation.yaml"
)


def _ascend(resource: str = "huawei.com/ascend-1980") -> str:
    if not ASCEND.is_file():
        pytest.fail(f"Kthena's Ascend example is expected at {ASCEND} (CI checks out ../shared)")
    return ASCEND.read_text().replace("huawei.com/ascend-1980", resource)


@pytest.fixture
def sandbox_registered(sandbox_cluster: Any) -> Any:
    from clusters.services import cluster_register

    return cluster_register(name="sb-import", server=sandbox_cluster.server, token=sandbox_cluster.token)


def test_the_page_counts_changes_and_questions_and_names_a_resource_no_node_offers(
    client, operator, sandbox_registered
) -> None:
    client.force_login(operator)
    page = client.post(
        "/topologies/import/",
        {"yaml": _ascend("huawei.com/Ascend910"), "cluster": sandbox_registered.pk, "action": "preview"},
    ).content.decode()
    assert 'data-lossless="0"' in page and "Valid topology spec" not in page and "Lossless" not in page
    assert 'id="verdict-nodes"' in page
    nodes = page.split('id="import-node-findings"', 1)[1].split("</div></li></ul></div>", 1)[0]
    assert "roles.prefill.accelerator_resource" in nodes and "roles.decode.accelerator_resource" in nodes
    assert "huawei.com/Ascend910" in nodes and "huawei.com/ascend-1980" in nodes  # asked for, and offered
    for field in ("slo.ttft_ms", "slo.tbt_ms", "rebalancing.prefill", "rebalancing.decode"):
        assert f'<code class="small">{field}</code>' in page  # asked for, not invented
    assert "containers[vllm].ports" in page  # a field the render writes differently is named
    assert "data_parallel_size 2" in page
    assert "init container downloader" in page and "sidecar runtime" in page  # carried, as given
    assert not Topology.objects.exists()

    right = client.post(
        "/topologies/import/",
        {"yaml": _ascend(), "cluster": sandbox_registered.pk, "action": "preview"},
    ).content.decode()
    assert 'id="import-node-findings"' not in right and 'id="verdict-nodes"' not in right


def test_the_api_preview_answers_the_same_counts_and_node_findings(
    api_client, operator, sandbox_registered
) -> None:
    api_client.force_authenticate(operator)
    answer = api_client.post(
        "/api/v1/topologies/import/",
        {"yaml": _ascend("huawei.com/Ascend910"), "cluster": sandbox_registered.pk},
        format="json",
    ).json()
    assert answer["ok"] is True
    verdict = answer["verdict"]
    assert verdict["lossless"] is False and verdict["questions"] == 4
    assert verdict["changed"] == len(answer["report"]["changed"]) > 0
    assert sorted((f["field"], f["code"], f["level"]) for f in answer["findings"]) == [
        ("roles.decode.accelerator_resource", "accelerator_resource_unknown", "error"),
        ("roles.prefill.accelerator_resource", "accelerator_resource_unknown", "error"),
    ]
    assert answer["spec"]["slo"] == {"ttft_ms": None, "tbt_ms": None}
    assert answer["spec"]["rebalancing"]["prefill"] is None
    answered = api_client.post(
        "/api/v1/topologies/import/",
        {
            "yaml": _ascend(),
            "cluster": sandbox_registered.pk,
            "overrides": {
                "slo": {"ttft_ms": 1500, "tbt_ms": 60},
                "rebalancing": {"prefill": {"min": 1, "max": 2}, "decode": {"min": 1, "max": 2}},
            },
        },
        format="json",
    ).json()
    assert answered["findings"] == [] and answered["verdict"]["questions"] == 0


def test_unset_values_are_null_in_the_api_named_by_preflight_and_hold_the_planner(
    api_client, operator, cluster
) -> None:
    from rebalancing.selectors import unset_reason
    from topologies.preflight import check_unanswered
    from topologies.services import topology_import
    from topologies.spec import TopologySpec

    topology, _ = topology_import(cluster=cluster, text=_ascend(), actor=operator)
    assert (topology.slo_ttft_ms, topology.slo_tbt_ms) == (0, 0)  # the stored column's "not set"
    api_client.force_authenticate(operator)
    body = api_client.get(f"/api/v1/topologies/{topology.pk}/").json()
    assert (body["slo_ttft_ms"], body["slo_tbt_ms"]) == (None, None)
    assert body["spec"]["roles"]["prefill"]["data_parallel_size"] == 2
    findings = check_unanswered(TopologySpec.from_dict(topology.spec))
    assert sorted(f.field for f in findings) == [
        "rebalancing.decode",
        "rebalancing.prefill",
        "slo.tbt_ms",
        "slo.ttft_ms",
    ]
    assert not any(f.blocking for f in findings)  # the pods can run; alerts and the planner wait
    waits = unset_reason(topology)  # the planner's observation is "busy" with it: no move
    assert "slo.ttft_ms" in waits and "rebalancing.decode" in waits
    from controlplane.api.errors import DomainError
    from rebalancing.services.rebalances import rebalance_ratio_start

    with pytest.raises(DomainError) as refused:  # a manual move is told what to set, not "bounds 1..1"
        rebalance_ratio_start(topology=topology, prefill=1, decode=2, actor=operator, source_ip=None)
    assert refused.value.fields == {
        "prefill": ["rebalancing.prefill is not set; set its min and max in the topology's editor first"],
        "decode": ["rebalancing.decode is not set; set its min and max in the topology's editor first"],
    }
