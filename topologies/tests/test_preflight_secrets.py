"""Preflight cannot read Secrets (Tandem holds no permission on them): it says which ones it cannot
verify, where the pods reference them and how to check, and never blocks on them."""

from __future__ import annotations

from topologies.preflight import ClusterFacts, NodeFacts, has_errors, run_preflight
from topologies.preflight_secrets import check_secret_references
from topologies.render import kthena
from topologies.spec import TopologySpec
from topologies.tests.conftest import spec_of


def _with_env(**env: str) -> TopologySpec:
    data = spec_of("deepseek-ascend-mooncake").to_dict()
    data["roles"]["prefill"]["env"] = {**data["roles"]["prefill"].get("env", {}), **env}
    return TopologySpec.from_dict(data)


def test_a_secret_env_reference_is_a_cannot_verify_warning_naming_it() -> None:
    facts = ClusterFacts(
        crds=frozenset(kthena.REQUIRED_CRDS),
        nodes=tuple(NodeFacts(name=f"n{i}", allocatable={"huawei.com/ascend-1980": 8}) for i in range(2)),
    )
    findings = run_preflight(_with_env(HF_TOKEN="secret:hf-token/token"), facts)
    [finding] = [f for f in findings if f.code == "secret_unverified"]
    assert not has_errors(findings)
    assert (finding.level, finding.field) == ("warning", "roles.prefill.env")
    assert finding.message == (
        "cannot verify Secret hf-token in namespace dev (Tandem has no RBAC on Secrets): the prefill pods "
        "reference it (key token for env HF_TOKEN in container prefill); if it is missing they will not "
        "start (CreateContainerConfigError)"
    )
    assert finding.fix.startswith("check it exists before deploying (kubectl get secret hf-token -n dev)")
    assert not [
        f for f in run_preflight(spec_of("deepseek-ascend-mooncake"), facts) if f.code == "secret_unverified"
    ]


def test_every_kind_of_secret_reference_is_named_once_per_secret_and_optional_ones_are_not() -> None:
    pod_spec = {
        "initContainers": [{"name": "fetch", "envFrom": [{"secretRef": {"name": "hub"}}]}],
        "containers": [
            {
                "name": "engine",
                "env": [
                    {"name": "A", "valueFrom": {"secretKeyRef": {"name": "hub", "key": "a"}}},
                    {
                        "name": "B",
                        "valueFrom": {"secretKeyRef": {"name": "opt", "key": "b", "optional": True}},
                    },
                ],
            }
        ],
        "volumes": [
            {"name": "certs", "secret": {"secretName": "tls"}},
            {"name": "both", "projected": {"sources": [{"secret": {"name": "proj"}}]}},
        ],
    }
    rendered = [
        {
            "kind": "Deployment",
            "spec": {"template": {"metadata": {"labels": {"tandem.io/role": "decode"}}, "spec": pod_spec}},
        },
        {
            "kind": "Deployment",
            "spec": {
                "template": {
                    "metadata": {"labels": {"tandem.io/role": "router"}},
                    "spec": {"containers": [{"name": "r", "envFrom": [{"secretRef": {"name": "hub"}}]}]},
                }
            },
        },
    ]
    findings = check_secret_references("ns", rendered)
    assert [f.message.split(" in namespace")[0] for f in findings] == [
        "cannot verify Secret hub",
        "cannot verify Secret proj",
        "cannot verify Secret tls",
    ]
    hub = findings[0]
    assert "the decode and router pods reference it" in hub.message
    assert (
        "envFrom in container fetch; envFrom in container r; key a for env A in container engine"
        in hub.message
    )
    assert hub.field == ""  # the router is no role of the spec
    assert findings[2].field == "roles.decode.env" and "volume certs in the pod" in findings[2].message
