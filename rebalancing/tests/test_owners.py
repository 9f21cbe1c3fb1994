"""Who else sets the replica counts (rebalancing.owners, pure): each kind of other owner, whether auto mode
refuses or pauses for it, and what it is told to do."""

from __future__ import annotations

from rebalancing import owners
from rebalancing.owners import Workload, check_start, check_tick, replica_edits, seen

KTHENA = "workload.serving.volcano.sh/v1alpha1"


def _entry(manager, fields, *, operation="Update", subresource="", time="2026-12-03T10:00:00Z"):
    entry = {
        "manager": manager,
        "operation": operation,
        "time": time,
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
    }
    if subresource:
        entry["subresource"] = subresource
    return entry


REPLICAS = {"f:spec": {"f:replicas": {}}}
ROLES = {"f:spec": {"f:template": {"f:roles": {}}}}


def _deployment(name, replicas, managed, *, labels=None, annotations=None):
    meta = {"name": name, "namespace": "default", "managedFields": managed}
    meta.update({"labels": labels or {}, "annotations": annotations or {}})
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta, "spec": {"replicas": replicas}}


def _plain(decode=1, managed=None, **meta):
    obj = _deployment(
        "llama-decode", decode, managed or [_entry("tandem", REPLICAS, operation="Apply")], **meta
    )
    return [
        Workload(
            "apps/v1",
            "Deployment",
            "default",
            "llama-prefill",
            ("prefill",),
            _deployment("llama-prefill", 1, []),
        ),
        Workload("apps/v1", "Deployment", "default", "llama-decode", ("decode",), obj),
    ]


def _serving(groups=1, prefill=1, decode=2, managed=None, labels=None):
    obj = {
        "apiVersion": KTHENA,
        "kind": "ModelServing",
        "metadata": {
            "name": "llama",
            "namespace": "default",
            "labels": labels or {},
            "managedFields": managed
            if managed is not None
            else [
                _entry(
                    "tandem", {"f:spec": {"f:replicas": {}, "f:template": {"f:roles": {}}}}, operation="Apply"
                )
            ],
        },
        "spec": {
            "replicas": groups,
            "template": {
                "roles": [{"name": "prefill", "replicas": prefill}, {"name": "decode", "replicas": decode}]
            },
        },
    }
    return [Workload(KTHENA, "ModelServing", "default", "llama", ("prefill", "decode"), obj)]


def _hpa(target, name="llama-decode", kind="Deployment", owner_refs=None):
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name, "namespace": "default", "ownerReferences": owner_refs or []},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": kind, "name": target},
            "minReplicas": 1,
            "maxReplicas": 4,
        },
    }


def _policy(spec, name="llama-pd"):
    return {
        "apiVersion": KTHENA,
        "kind": "AutoscalingPolicy",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }


def test_an_hpa_on_the_decode_deployment_refuses_auto_and_says_what_to_do():
    check = check_start(_plain(), [_hpa("llama-decode")])
    [owner] = check.blocking
    assert owner.kind == "hpa" and owner.roles == ("decode",)
    assert check.reason == (
        "HPA default/llama-decode scales the decode replicas (Deployment default/llama-decode, 1–4): "
        "remove it (kubectl delete hpa -n default llama-decode) or switch Tandem to advisory"
    )


def test_an_hpa_on_another_workload_or_keda_s_own_hpa_is_not_another_owner():
    assert not check_start(_plain(), [_hpa("other")]).owners
    keda_hpa = _hpa("llama-decode", name="keda-hpa-so", owner_refs=[{"kind": "ScaledObject", "name": "so"}])
    assert not check_start(_plain(), [keda_hpa]).owners


def test_an_hpa_on_the_model_serving_scales_every_role():
    hpa = _hpa("llama", kind="ModelServing")
    hpa["spec"]["scaleTargetRef"]["apiVersion"] = KTHENA
    [owner] = check_start(_serving(), [hpa]).blocking
    assert owner.roles == ("prefill", "decode") and "prefill and decode replicas" in owner.message


def test_a_keda_scaled_object_refuses_auto_unless_paused():
    so = {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {"name": "decode-queue", "namespace": "default"},
        "spec": {"scaleTargetRef": {"name": "llama-decode"}, "triggers": [{"type": "prometheus"}]},
    }
    [owner] = check_start(_plain(), [so]).blocking
    assert owner.name == "ScaledObject default/decode-queue" and owner.roles == ("decode",)
    assert "autoscaling.keda.sh/paused" in owner.remedy
    so["metadata"]["annotations"] = {"autoscaling.keda.sh/paused": "true"}
    check = check_start(_plain(), [so])
    assert not check.blocking and check.owners[0].kind == "keda" and "paused" in check.owners[0].message


def test_a_kthena_disaggregated_policy_refuses_auto_and_offers_the_ratio_handoff():
    policy = _policy(
        {
            "disaggregatedTarget": {
                "targetRef": {"kind": "ModelServing", "name": "llama"},
                "roles": {"prefill": {}, "decode": {}},
            }
        }
    )
    [owner] = check_start(_serving(), [policy]).blocking
    assert owner.kind == "kthena_policy" and owner.handoff == "llama-pd"
    assert owner.message == (
        "Kthena AutoscalingPolicy default/llama-pd scales the prefill and decode replicas "
        "(ModelServing default/llama)"
    )
    assert "ratioConstraint" in owner.remedy


def test_a_kthena_policy_on_one_role_or_the_whole_serving_offers_no_handoff():
    one = _policy({"disaggregatedTarget": {"targetRef": {"name": "llama"}, "roles": {"decode": {}}}})
    [owner] = check_start(_serving(), [one]).blocking
    assert owner.roles == ("decode",) and not owner.handoff and "delete the policy" in owner.remedy
    whole = _policy(
        {
            "homogeneousTarget": {
                "target": {"targetRef": {"name": "llama"}},
                "minReplicas": 1,
                "maxReplicas": 3,
            }
        }
    )
    [owner] = check_start(_serving(), [whole]).blocking
    assert "the whole ModelServing" in owner.message and not owner.handoff
    elsewhere = _policy(
        {
            "disaggregatedTarget": {
                "targetRef": {"name": "llama", "namespace": "prod"},
                "roles": {"decode": {}},
            }
        }
    )
    assert not check_start(_serving(), [elsewhere]).owners


def test_argo_cd_blocks_only_when_its_manager_owns_the_replicas():
    marked = {"annotations": {owners.ARGO_ANNOTATION: "llama-app:apps/Deployment:default/llama-decode"}}
    owning = [_entry("argocd-controller", REPLICAS, operation="Apply")]
    [owner] = check_start(_plain(managed=owning, **marked), []).blocking
    assert owner.name == "Argo CD Application llama-app" and "ignoreDifferences" in owner.remedy
    note = check_start(_plain(**marked), [])
    assert not note.blocking and "but not its replica fields" in note.owners[0].message
    by_label = check_start(_plain(managed=owning, labels={owners.ARGO_LABEL: "llama-app"}), [])
    assert by_label.blocking[0].kind == "argocd"


def test_flux_kustomization_owning_the_roles_list_blocks_and_helm_marks_are_noted():
    labels = {
        "kustomize.toolkit.fluxcd.io/name": "apps",
        "kustomize.toolkit.fluxcd.io/namespace": "flux-system",
    }
    managed = [_entry("kustomize-controller", ROLES, operation="Apply")]
    [owner] = check_start(_serving(managed=managed, labels=labels), []).blocking
    assert owner.name == "Flux Kustomization flux-system/apps" and owner.roles == ("prefill", "decode")
    helm = {"helm.toolkit.fluxcd.io/name": "llama", "helm.toolkit.fluxcd.io/namespace": "default"}
    check = check_start(_serving(labels=helm), [])
    assert not check.blocking and check.owners[0].name == "Flux HelmRelease default/llama"


def test_kubectl_scale_of_a_role_while_auto_runs_pauses_it_naming_kubectl_and_the_change():
    before = seen(_plain(decode=1))
    scaled = [_entry("kubectl", REPLICAS, subresource="scale", time="2026-12-03T10:05:00Z")]
    check = check_tick(_plain(decode=3, managed=scaled), [], before)
    [owner] = check.blocking
    assert owner.kind == "field_manager" and owner.name == "kubectl" and owner.change == {"decode": [1, 3]}
    assert owner.message.startswith(
        "kubectl changed Deployment default/llama-decode spec.replicas 1 → 3 "
        "(decode 1 → 3; Update via /scale at "
    )


def test_tandem_s_own_replica_change_is_not_an_edit():
    before = seen(_plain(decode=1))
    assert not replica_edits(_plain(decode=2), before)
    legacy = [_entry("tandem-controlplane", REPLICAS, subresource="scale")]
    assert not replica_edits(_plain(decode=2, managed=legacy), before)
    assert not replica_edits(_plain(decode=2), {})  # nothing seen yet: the first tick only remembers


def test_model_serving_edits_name_the_roles_whose_counts_moved():
    before = seen(_serving(groups=1, prefill=1, decode=2))
    groups = [
        _entry("tandem", ROLES, operation="Apply"),
        _entry("kubectl", REPLICAS, subresource="scale", time="2026-12-03T10:05:00Z"),
    ]
    [owner] = replica_edits(_serving(groups=2, managed=groups), before)
    assert owner.change == {"prefill": [1, 2], "decode": [2, 4]}
    patched = [
        _entry("kubectl-patch", ROLES, time="2026-12-03T10:05:00Z"),
        _entry("tandem", REPLICAS, operation="Apply"),
    ]
    [owner] = replica_edits(_serving(decode=3, managed=patched), before)
    assert owner.name == "kubectl-patch" and owner.change == {"decode": [2, 3]}
    keyed = [
        _entry("tandem", REPLICAS, operation="Apply"),
        _entry(
            "tandem", {"f:spec": {"f:template": {"f:roles": {'k:{"name":"prefill"}': {"f:replicas": {}}}}}}
        ),
        _entry(
            "ops-script", {"f:spec": {"f:template": {"f:roles": {'k:{"name":"decode"}': {"f:replicas": {}}}}}}
        ),
    ]
    [owner] = replica_edits(_serving(decode=1, managed=keyed), before)
    assert owner.name == "ops-script" and owner.change == {"decode": [2, 1]}


def test_a_tick_joins_every_blocking_owner_into_the_reason():
    before = seen(_plain(decode=1))
    scaled = [_entry("kubectl", REPLICAS, subresource="scale")]
    check = check_tick(_plain(decode=2, managed=scaled), [_hpa("llama-decode")], before)
    assert [o.kind for o in check.blocking] == ["field_manager", "hpa"]
    assert check.reason.startswith("kubectl changed") and "; HPA default/llama-decode scales" in check.reason
    assert [o["kind"] for o in check.as_list()] == ["field_manager", "hpa"]
