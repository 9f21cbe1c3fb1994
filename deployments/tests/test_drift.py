"""Live objects are compared with the desired manifests on the fields Tandem sets."""

from __future__ import annotations

import copy

from deployments.drift import manifest_differences, object_differences

DESIRED = {
    "apiVersion": "workload.serving.volcano.sh/v1alpha1",
    "kind": "ModelServing",
    "metadata": {"name": "deepseek", "namespace": "dev", "labels": {"tandem.io/topology": "3"}},
    "spec": {
        "replicas": 1,
        "template": {"roles": [{"name": "prefill", "replicas": 2}, {"name": "decode", "replicas": 2}]},
    },
}


def _live() -> dict:
    live = copy.deepcopy(DESIRED)
    live["metadata"].update({"uid": "u-1", "resourceVersion": "77", "managedFields": [{"manager": "tandem"}]})
    live["metadata"]["labels"]["extra"] = "added-by-someone"
    live["spec"]["schedulerName"] = "default-scheduler"
    live["status"] = {"replicas": 1}
    return live


def test_server_noise_is_not_drift():
    assert object_differences(_live(), DESIRED) == []


def test_changed_replicas_reads_like_a_sentence():
    live = _live()
    live["spec"]["template"]["roles"][1]["replicas"] = 1
    [diff] = object_differences(live, DESIRED)
    assert diff["text"] == "ModelServing/deepseek: spec.template.roles[1].replicas live 1, desired 2"


def test_missing_object_and_label_change_are_drift():
    live = _live()
    live["metadata"]["labels"]["tandem.io/topology"] = "9"
    diffs = manifest_differences([DESIRED], {"ModelServing/deepseek": live})
    assert [d["path"] for d in diffs] == ["metadata.labels.tandem.io/topology"]
    diffs = manifest_differences([DESIRED], {})
    assert diffs[0]["text"] == "ModelServing/deepseek: missing from the cluster"


def test_list_length_change_and_string_number_equivalence():
    live = _live()
    live["spec"]["template"]["roles"].pop()
    live["spec"]["replicas"] = "1"
    diffs = object_differences(live, DESIRED)
    assert [d["path"] for d in diffs] == ["spec.template.roles (length)"]


def test_quantities_the_api_server_rewrote_are_not_drift():
    desired = {
        "kind": "Deployment",
        "metadata": {"name": "d"},
        "spec": {
            "template": {
                "spec": {"containers": [{"resources": {"requests": {"cpu": "1.5", "memory": "0.5Gi"}}}]}
            }
        },
    }
    live = copy.deepcopy(desired)
    live["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"] = {
        "cpu": "1500m",
        "memory": "512Mi",
    }
    assert object_differences(live, desired) == []
    live["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "2"
    assert [d["path"] for d in object_differences(live, desired)] == [
        "spec.template.spec.containers[0].resources.requests.cpu"
    ]
