"""Values that used to pass save and preflight (or answer 500) and fail only at apply: Unicode digits
as integers, cpu "八", memory "lots", a 100 kB image, a 200 kB model name. Refused with a field error
by the API (create, update, preflight) and by the editor page (save and live preflight)."""

from __future__ import annotations

import html

import pytest

from topologies.forms import spec_to_values
from topologies.models import Topology
from topologies.presets import preset_spec
from topologies.spec_values import IMAGE_MAX, MODEL_NAME_MAX, ascii_int, image_problem, quantity_problem

pytestmark = pytest.mark.django_db
URL = "/api/v1/topologies/"

CASES = [
    # (field path in the spec, value, message fragment)
    ("roles.prefill.replicas", "²", "written with the digits 0-9"),
    ("roles.decode.replicas", "١", "written with the digits 0-9"),
    ("port", "８０００", "written with the digits 0-9"),
    ("roles.prefill.cpu", "八", "is not a Kubernetes quantity"),
    ("roles.decode.memory", "lots", "is not a Kubernetes quantity"),
    ("roles.decode.memory", "-1Gi", "must not be negative"),
    ("image", "registry.example.com/" + "a" * 100_000, f"has at most {IMAGE_MAX}"),
    ("image", "Quay.io/UPPER/Case Image", "is not an image reference"),
    ("model_name", "m" * 200_000, f"use at most {MODEL_NAME_MAX}"),
    ("model_name", "qwen\u202e3", "control or invisible characters (U+202E)"),
]
IDS = [f"{path}={value[:12]!r}" for path, value, _ in CASES]


def _spec_with(path: str, value: str) -> dict:
    spec = preset_spec("qwen-gpu-nixl")
    target = spec
    *parents, last = path.split(".")
    for key in parents:
        target = target[key]
    target[last] = value
    return spec


def _field_error(response, path: str) -> str:
    assert response.status_code == 400, response.content[:300]
    fields = response.json()["error"]["fields"]
    assert f"spec.{path}" in fields, fields
    return " ".join(fields[f"spec.{path}"])


@pytest.mark.parametrize(("path", "value", "fragment"), CASES, ids=IDS)
def test_the_api_refuses_it_at_create_update_and_preflight(
    api_client, operator, cluster, path, value, fragment
):
    api_client.force_authenticate(operator)
    spec = _spec_with(path, value)
    assert fragment in _field_error(
        api_client.post(URL, {"cluster": cluster.pk, "spec": spec}, format="json"), path
    )
    assert not Topology.objects.exists()
    good = api_client.post(URL, {"cluster": cluster.pk, "spec": preset_spec("qwen-gpu-nixl")}, format="json")
    topology_id = good.json()["id"]
    assert fragment in _field_error(
        api_client.put(f"{URL}{topology_id}/", {"spec": spec}, format="json"), path
    )
    preflight = api_client.post(f"{URL}preflight/", {"cluster": cluster.pk, "spec": spec}, format="json")
    assert fragment in _field_error(preflight, path)


@pytest.mark.parametrize(("path", "value", "fragment"), CASES[:6], ids=IDS[:6])
def test_the_editor_page_refuses_it_at_save_and_in_live_preflight(
    client, operator, cluster, path, value, fragment
):
    client.force_login(operator)
    form = {**spec_to_values(preset_spec("qwen-gpu-nixl")), "cluster": str(cluster.pk), path: value}
    saved = client.post("/topologies/new/", form)
    assert saved.status_code == 400
    assert fragment in html.unescape(saved.content.decode())
    assert not Topology.objects.exists()
    live = client.post("/topologies/preflight/", form)
    assert fragment in html.unescape(live.content.decode())


@pytest.mark.parametrize(
    "value", ["8", "500m", "1.5", ".5", "2.", "64Gi", "1Ki", "1e3", "1E", "+1", "0", "1.5m", "12E-3"]
)
def test_quantities_the_api_server_accepts_are_accepted(value):
    assert quantity_problem(value, what="CPU", example="8") is None


@pytest.mark.parametrize(
    "value", ["八", "lots", "1K", "1e", "Gi", "1.2.3", "1 Gi", "--1", "1ki", "0x10", "١"]
)
def test_quantities_the_api_server_refuses_are_refused(value):
    assert quantity_problem(value, what="CPU", example="8") is not None


def test_image_references_follow_the_registry_grammar():
    for good in (
        "vllm/vllm-openai:v0.11.0",
        "quay.io/ascend/vllm-ascend:v0.10.1",
        "localhost:5000/team/engine@sha256:" + "a" * 64,
        "registry.example.com:443/a__b/c-d.e:tag_1",
    ):
        assert image_problem(good) is None, good
    for bad in ("UPPER/case", "a b", "-lead", "repo:", "repo@sha256:short", "x" * 2000):
        assert image_problem(bad) is not None, bad


def test_integers_are_ascii_digits_only():
    assert ascii_int("42") == 42 and ascii_int(" -3 ") == -3 and ascii_int(7) == 7
    for value in ("²", "١", "٣", "４２", "1.0", True, 1.5, None, "", "1" * 40):
        assert ascii_int(value) is None, value
