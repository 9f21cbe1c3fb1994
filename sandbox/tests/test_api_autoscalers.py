"""The autoscalers a cluster may run beside Tandem, served as a real API server serves them: autoscaling/v2
HorizontalPodAutoscalers (validated), KEDA ScaledObjects (from the CRD the sandbox carries), and the
managedFields a `kubectl scale` leaves (manager from kubectl's User-Agent, the scale subresource)."""

from __future__ import annotations

import json

from kubernetes import client
from kubernetes.client.rest import ApiException


def _hpa(namespace, max_replicas=3):
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web", "namespace": namespace},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": 1,
            "maxReplicas": max_replicas,
        },
    }


def test_hpas_and_scaled_objects_are_served_and_validated(sandbox_cluster, namespace):
    custom = client.CustomObjectsApi(sandbox_cluster.api_client())
    made = custom.create_namespaced_custom_object(
        "autoscaling", "v2", namespace, "horizontalpodautoscalers", _hpa(namespace)
    )
    assert made["spec"]["scaleTargetRef"]["name"] == "web"
    try:
        custom.create_namespaced_custom_object(
            "autoscaling",
            "v2",
            namespace,
            "horizontalpodautoscalers",
            {**_hpa(namespace, 0), "metadata": {"name": "x"}},
        )
        raise AssertionError("an HPA with maxReplicas 0 was accepted")
    except ApiException as error:
        assert error.status == 422 and "spec.maxReplicas" in error.body
    so = {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {"name": "queue", "namespace": namespace},
        "spec": {
            "scaleTargetRef": {"name": "web"},
            "triggers": [{"type": "prometheus", "metadata": {"query": "q"}}],
        },
    }
    custom.create_namespaced_custom_object("keda.sh", "v1alpha1", namespace, "scaledobjects", so)
    listed = custom.list_namespaced_custom_object("keda.sh", "v1alpha1", namespace, "scaledobjects")
    assert [i["metadata"]["name"] for i in listed["items"]] == ["queue"]
    try:
        custom.create_namespaced_custom_object(
            "keda.sh",
            "v1alpha1",
            namespace,
            "scaledobjects",
            {**so, "metadata": {"name": "bad"}, "spec": {"scaleTargetRef": {"name": "web"}}},
        )
        raise AssertionError("a ScaledObject without triggers was accepted")
    except ApiException as error:
        assert error.status == 422 and "spec.triggers" in error.body


def test_kubectl_scale_is_recorded_as_kubectl_on_the_scale_subresource(sandbox_cluster, namespace):
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": namespace},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "i"}]},
            },
        },
    }
    applied = sandbox_cluster.kubectl(
        "apply", "--server-side", "--field-manager=tandem", "-f", "-", input=json.dumps(deployment)
    )
    assert applied.returncode == 0, applied.stderr
    scaled = sandbox_cluster.kubectl("scale", "deployment/web", "-n", namespace, "--replicas=3")
    assert scaled.returncode == 0, scaled.stderr
    out = sandbox_cluster.kubectl(
        "get", "deployment", "web", "-n", namespace, "-o", "json", "--show-managed-fields"
    )
    entries = json.loads(out.stdout)["metadata"]["managedFields"]
    by = {(e["manager"], e["operation"], e.get("subresource", "")): e for e in entries}
    assert by[("kubectl", "Update", "scale")]["fieldsV1"] == {"f:spec": {"f:replicas": {}}}
    assert "f:replicas" not in by[("tandem", "Apply", "")]["fieldsV1"]["f:spec"]
