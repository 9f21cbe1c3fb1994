"""The container image, compose file and Kubernetes manifests, checked without a Docker engine."""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml
from django.conf import settings

from tests.support import ROOT

DOCKER = ROOT / "docker"
K8S = DOCKER / "k8s"
# A Kubernetes minor both supported by kubernetes-validate and widely deployed.
K8S_VERSION = "1.31.0"


def _compose() -> dict:
    return yaml.safe_load((DOCKER / "compose.yaml").read_text())


def _manifests() -> list[tuple[Path, dict]]:
    docs = []
    for path in sorted(K8S.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        docs += [(path, doc) for doc in yaml.safe_load_all(path.read_text()) if doc]
    return docs


# --- compose -------------------------------------------------------------------------------------


def test_compose_file_matches_the_compose_specification_schema():
    # The compose-spec JSON schema (Apache-2.0) as vendored by check-jsonschema.
    vendor = resources.files("check_jsonschema.builtin_schemas.vendor")
    schema = json.loads((vendor / "compose-spec.json").read_text())
    validator_class = jsonschema.validators.validator_for(schema)
    validator_class.check_schema(schema)
    errors = sorted(validator_class(schema).iter_errors(_compose()), key=str)
    assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors)


def test_compose_has_every_process_with_health_checks_and_start_order():
    services = _compose()["services"]
    assert set(services) == {"postgres", "redis", "migrate", "web", "worker", "checks", "beat"}
    for name in ("postgres", "redis", "web", "worker", "checks"):
        assert services[name]["healthcheck"]["test"], name
    assert "/readyz" in " ".join(services["web"]["healthcheck"]["test"])
    for name in ("web", "worker", "checks", "beat"):
        deps = services[name]["depends_on"]
        assert deps["migrate"]["condition"] == "service_completed_successfully", name
        assert deps["postgres"]["condition"] == "service_healthy", name
        assert deps["redis"]["condition"] == "service_healthy", name
    assert services["migrate"]["command"][-2:] == ["migrate", "--noinput"]
    assert services["migrate"]["restart"] == "no"


def _queues(command: list[str]) -> set[str]:
    return set(command[command.index("-Q") + 1].split(","))


def test_compose_workers_consume_every_queue_and_third_party_images_are_pinned():
    services = _compose()["services"]
    worker, checks = _queues(services["worker"]["command"]), _queues(services["checks"]["command"])
    assert worker | checks == set(settings.TANDEM_QUEUES)
    # The cluster check has a worker of its own, so telemetry or a deploy cannot starve it.
    assert checks == {"cluster-check"} and "cluster-check" not in worker
    for name in ("postgres", "redis"):
        image = services[name]["image"]
        assert re.search(r":\d+\.\d+", image), f"{name} image {image} is not pinned to a version"


def test_compose_requires_the_secrets_instead_of_defaulting_them():
    text = (DOCKER / "compose.yaml").read_text()
    for name in ("SECRET_KEY", "FIELD_ENCRYPTION_KEYS", "POSTGRES_PASSWORD"):
        assert re.search(rf"\$\{{{name}:\?", text), f"{name} must be required (${{{name}:?...}})"


# --- Dockerfile ----------------------------------------------------------------------------------


def _dockerfile_instructions() -> list[tuple[str, str]]:
    text = (DOCKER / "Dockerfile").read_text()
    text = re.sub(r"\\\n", " ", text)
    instructions = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            instructions.append((keyword.upper(), rest.strip()))
    return instructions


def _final_stage(instructions: list[tuple[str, str]]) -> list[tuple[str, str]]:
    starts = [index for index, (keyword, _) in enumerate(instructions) if keyword == "FROM"]
    return instructions[starts[-1] :]


def test_dockerfile_is_multi_stage_with_pinned_base_images():
    froms = [rest for keyword, rest in _dockerfile_instructions() if keyword == "FROM"]
    assert len(froms) >= 3, "node assets, python build and runtime stages"
    for line in froms:
        image = line.split()[0]
        assert ":" in image and not image.endswith(":latest"), f"unpinned base image {image}"
        assert re.search(r":\d+\.\d+\.\d+", image), f"base image {image} should pin a patch version"
    assert any(line.startswith("node:") for line in froms)
    assert all(" AS " in line.upper() for line in froms[:-1]), "every build stage is named"


def test_dockerfile_runtime_runs_as_a_non_root_user_and_checks_health():
    final = _final_stage(_dockerfile_instructions())
    users = [rest for keyword, rest in final if keyword == "USER"]
    assert users, "the runtime stage sets USER"
    assert users[-1].split(":")[0] not in ("root", "0")
    healthchecks = [rest for keyword, rest in final if keyword == "HEALTHCHECK"]
    assert healthchecks and "/healthz" in healthchecks[-1]
    assert any(keyword == "RUN" and "collectstatic" in rest for keyword, rest in final)
    cmd = [rest for keyword, rest in final if keyword == "CMD"][-1]
    assert cmd.startswith("["), "CMD in exec form so signals reach uvicorn"
    assert not any(keyword == "ADD" for keyword, _ in _dockerfile_instructions()), "COPY, not ADD"


def test_docker_build_context_leaves_out_local_state():
    ignored = (DOCKER / "Dockerfile.dockerignore").read_text().split()
    for entry in (".git", ".venv", "node_modules", "var"):
        assert entry in ignored


# --- Kubernetes ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "doc"), _manifests(), ids=lambda v: v.name if isinstance(v, Path) else v["kind"]
)
def test_manifest_validates_against_the_kubernetes_schema(path, doc):
    kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def _by_kind(kind: str) -> dict[str, dict]:
    return {doc["metadata"]["name"]: doc for _, doc in _manifests() if doc["kind"] == kind}


def test_kustomization_lists_every_manifest():
    listed = set(yaml.safe_load((K8S / "kustomization.yaml").read_text())["resources"])
    present = {path.name for path in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    assert listed == present


def test_web_worker_beat_are_separate_deployments_with_the_right_probes():
    deployments = _by_kind("Deployment")
    assert set(deployments) == {"tandem-web", "tandem-worker", "tandem-checks", "tandem-beat"}
    web = deployments["tandem-web"]["spec"]["template"]["spec"]["containers"][0]
    assert web["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert web["readinessProbe"]["httpGet"]["path"] == "/readyz"
    worker, checks = (
        _queues(deployments[name]["spec"]["template"]["spec"]["containers"][0]["command"])
        for name in ("tandem-worker", "tandem-checks")
    )
    assert worker | checks == set(settings.TANDEM_QUEUES)
    assert checks == {"cluster-check"} and "cluster-check" not in worker
    beat = deployments["tandem-beat"]["spec"]
    assert beat["replicas"] == 1 and beat["strategy"]["type"] == "Recreate"
    assert (
        _by_kind("Service")["tandem-web"]["spec"]["selector"]
        == deployments["tandem-web"]["spec"]["selector"]["matchLabels"]
    )


def test_every_pod_uses_the_service_account_and_runs_restricted():
    pods = [
        doc["spec"]["template"]["spec"] for _, doc in _manifests() if doc["kind"] in ("Deployment", "Job")
    ]
    assert len(pods) == 5
    for pod in pods:
        assert pod["serviceAccountName"] == "tandem"
        assert pod["securityContext"]["runAsNonRoot"] is True
        for container in pod["containers"]:
            assert container["securityContext"]["allowPrivilegeEscalation"] is False
            assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]
            refs = {ref.get("configMapRef", ref.get("secretRef"))["name"] for ref in container["envFrom"]}
            assert refs == {"tandem-config", "tandem-secrets"}
    binding = _by_kind("ClusterRoleBinding")["tandem"]
    assert binding["subjects"][0]["name"] == "tandem"


def test_migrate_job_runs_migrations():
    job = _by_kind("Job")["tandem-migrate"]["spec"]["template"]["spec"]
    assert job["containers"][0]["command"] == ["python", "manage.py", "migrate", "--noinput"]
