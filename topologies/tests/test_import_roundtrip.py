"""Every Kthena example with P/D roles imports, renders, and equals the original on the fields Tandem owns.

The comparison reads both sides with its own small projection (not the importer's code): names, role
replicas, engine image, accelerator, CPU and memory requests, served model name, tensor parallelism,
port, the engine's other arguments and plain env values (kept verbatim), and the ModelServer/ModelRoute
routing fields. A field the render changes must be named in the import's report as not representable.
"""

from __future__ import annotations

import functools
import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from topologies.importing import import_manifests
from topologies.render import render
from topologies.spec import CREDENTIAL_ENV, MANAGED_FLAGS, TopologySpec

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO.parent / "shared" / "reference" / "kthena" / "examples"
ENGINE_NAMES = ("vllm", "sglang", "mindie")
RENDERED_ENV_PREFIXES = ("HCCL_", "GLOO_", "TP_SOCKET", "VLLM_NIXL_SIDE_CHANNEL", "POD_IP")
MODEL_FLAGS = ("--model", "--model-path")
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _examples_dir() -> Path:
    if not EXAMPLES.is_dir():
        pytest.fail(f"the upstream Kthena examples are expected at {EXAMPLES} (CI checks out ../shared)")
    return EXAMPLES


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.load_all(path.read_text(), Loader=LOADER) if d]


@functools.cache
def _cases() -> list[tuple[str, str]]:
    """(example name, YAML text): each ModelServing with P/D roles plus the router objects that select it."""
    if not EXAMPLES.is_dir():
        return [("missing-shared", "")]
    routers = [d for p in sorted(EXAMPLES.glob("*.yaml")) for d in _docs(p) if d["kind"] != "ModelServing"]
    cases = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        docs = _docs(path)
        for serving in (d for d in docs if d["kind"] == "ModelServing"):
            roles = {r["name"] for r in serving["spec"]["template"]["roles"]}
            if not {"prefill", "decode"} <= roles:
                continue
            name = serving["metadata"]["name"]
            servers = [
                d
                for d in routers
                if d["kind"] == "ModelServer"
                and d["spec"]["workloadSelector"]["matchLabels"].get("modelserving.volcano.sh/name") == name
            ]
            server_names = {s["metadata"]["name"] for s in servers}
            routes = [
                d
                for d in routers
                if d["kind"] == "ModelRoute"
                and any(
                    t["modelServerName"] in server_names
                    for r in d["spec"]["rules"]
                    for t in r["targetModels"]
                )
            ]
            cases.append((path.stem, yaml.safe_dump_all([*docs, *servers, *routes])))
    return cases


def _argv(container: dict[str, Any]) -> list[str] | None:
    tokens = [str(t) for t in (container.get("command") or []) + (container.get("args") or [])]
    if tokens[:1] and tokens[0].endswith(("sh", "bash")) and tokens[1:2] == ["-c"]:
        script = " ".join(tokens[2:]).replace("\\\n", " ")
        if "&&" in script or ";" in script or "./" in script:
            return None  # a script: its command line is not a field Tandem can own
        return shlex.split(script)
    return tokens


def _flag(tokens: list[str], *names: str) -> str | None:
    for i, token in enumerate(tokens):
        flag, eq, value = token.partition("=")
        if flag in names:
            return value if eq else tokens[i + 1]
    return None


def _other_args(tokens: list[str]) -> list[str]:
    """Arguments Tandem does not render itself: flags and values outside MANAGED_FLAGS and the model."""
    out, skip = [], False
    for i, token in enumerate(tokens):
        if skip:
            skip = False
            continue
        flag = token.partition("=")[0]
        if flag in (*MANAGED_FLAGS, *MODEL_FLAGS):
            skip = "=" not in token
            continue
        if i < 3 and not token.startswith("-"):
            continue  # program, module or positional model
        if token in ("-m", "--enable-metrics"):
            continue
        out.append(token)
    return out


def _engine(pod: dict[str, Any], role: str) -> dict[str, Any]:
    containers = pod["containers"]
    for c in containers:
        if c["name"] == role:
            return c
    for c in containers:
        named = c["name"] in ENGINE_NAMES or any(n in c["image"] for n in ENGINE_NAMES)
        if named and "runtime" not in c["image"]:
            return c
    return containers[-1]


def _port(container: dict[str, Any], tokens: list[str] | None) -> int:
    if tokens and _flag(tokens, "--port"):
        return int(str(_flag(tokens, "--port")))
    return int(container["ports"][0]["containerPort"])


def owned_fields(objects: list[dict[str, Any]]) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for obj in objects:
        kind, spec = obj["kind"], obj.get("spec") or {}
        if kind == "ModelServing":
            fields["namespace"] = obj["metadata"].get("namespace", "default")
            fields["name"] = obj["metadata"]["name"]
            for role in spec["template"]["roles"]:
                c = _engine(role["entryTemplate"]["spec"], role["name"])
                tokens = _argv(c)
                res = c.get("resources", {})
                key = f"roles.{role['name']}"
                fields[f"{key}.replicas"] = role["replicas"]
                fields[f"{key}.image"] = c["image"]
                fields[f"{key}.port"] = _port(c, tokens)
                fields[f"{key}.accelerators"] = {
                    k: str(v) for k, v in res.get("limits", {}).items() if "/" in k
                }
                for q in ("cpu", "memory"):
                    if q in res.get("requests", {}):
                        fields[f"{key}.{q}"] = str(res["requests"][q])
                fields[f"{key}.env"] = {
                    e["name"]: e["value"]
                    for e in c.get("env", [])
                    if "value" in e
                    and not CREDENTIAL_ENV.search(e["name"])
                    and not e["name"].startswith(RENDERED_ENV_PREFIXES)
                }
                if tokens is not None:
                    fields[f"{key}.served_model_name"] = _flag(tokens, "--served-model-name")
                    fields[f"{key}.tensor_parallel"] = _flag(tokens, "--tensor-parallel-size", "--tp-size")
                    fields[f"{key}.other_args"] = _other_args(tokens)
        elif kind == "ModelServer":
            fields["server.model"] = spec.get("model")
            fields["server.port"] = spec["workloadPort"]["port"]
            fields["server.kv_connector"] = spec.get("kvConnector", {}).get("type")
            fields["server.timeout"] = spec.get("trafficPolicy", {}).get("timeout")
            fields["server.retry"] = spec.get("trafficPolicy", {}).get("retry")
        elif kind == "ModelRoute":
            fields["route.model_name"] = spec["modelName"]
    return fields


def _comparable(original: dict[str, Any], rendered: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """Fields whose values differ; a field the original lacks (None) is Tandem's own default."""
    out = {}
    for key, value in original.items():
        if value is None:
            continue
        got = rendered.get(key)
        if key.endswith(".env"):
            got = {k: v for k, v in (got or {}).items() if k in value}
        if key.endswith(".other_args"):
            got = [t for t in (got or []) if t in value]
        if key == "server.retry" and got is not None:
            got = {k: v for k, v in got.items() if k in value}
        if got != value:
            out[key] = (value, got)
    return out


@pytest.mark.parametrize(("name", "text"), _cases(), ids=[c[0] for c in _cases()])
def test_example_imports_renders_and_keeps_the_fields_tandem_owns(name: str, text: str) -> None:
    _examples_dir()
    result = import_manifests(text)
    assert result.ok, result.errors
    spec = TopologySpec.from_dict(result.spec)
    objects = render(spec, topology_id=7, revision=1)
    original = owned_fields([d for d in yaml.safe_load_all(text) if d])
    differences = _comparable(original, owned_fields(objects))
    reported = json.dumps(result.report.as_dict()["unsupported"])
    for key, (want, got) in differences.items():
        field = key.rsplit(".", 1)[-1]
        assert field == "kv_connector" and "kvConnector" in reported, (
            f"{name}: {key} was {want!r}, rendered {got!r}, and the import report does not say so"
        )


def test_the_examples_with_pd_roles_are_all_covered() -> None:
    covered = {name for name, _ in _cases()}
    assert {
        "model-serving__gpu-pd-disaggregation",
        "model-serving__prefill-decode-disaggregation",
        "model-serving__sglang-pd-disaggregation",
        "models__deepseek-v4-flash__modelserving",
    } <= covered


# Field-for-field round trip: import → spec → render, compared over the whole objects by the test's own
# walk (not the importer's). Lists are matched the way Kubernetes merges them (by name, volume mounts by
# mount path). Every field the render writes differently must be one the import's report lists as
# changed, and none of what the spec does not model (carried in the pod-template overlay) may differ.
OVERLAY_CARRIED = (
    "initContainers",
    "volumes",
    "volumeMounts",
    "readinessProbe",
    "livenessProbe",
    "startupProbe",
    "securityContext",
    "tolerations",
    "affinity",
    "imagePullPolicy",
    "annotations",
)
# What a render may add to a source that lacks it: Tandem's identity labels, its own env and named ports,
# the engine command it renders, Kthena defaults it writes out, and the router's P/D selector labels.
ADDITIONS = re.compile(
    r"\.labels\.(tandem\.io/|app\.kubernetes\.io/managed-by)|\.env\[(POD_IP|TANDEM_[A-Z_]+|HCCL_IF_IP|"
    r"[A-Z_]+SOCKET_IFNAME|VLLM_NIXL_SIDE_CHANNEL_HOST)\]$|\.ports(\[[a-z]+\])?$|\.command$|"
    r"\.(schedulerName|rolloutStrategy|recoveryPolicy|workerReplicas|restartGracePeriodSeconds)$|"
    r"\.pdGroup\.(prefill|decode)Labels\.tandem\.io/serving-role$|\.trafficPolicy\.retry$|"
    r"\.workloadPort\.protocol$|\.volumes\[shm\]$|\.volumeMounts\[shm\]$|\.metadata\.labels$|"
    r"\.entryTemplate\.metadata$|\.resources\.requests$"
)


def _walk(a: Any, b: Any, path: str, out: list[tuple[str, Any, Any]]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in [*a, *(k for k in b if k not in a)]:
            _walk(a.get(k, _ABSENT), b.get(k, _ABSENT), f"{path}.{k}", out)
        return
    if isinstance(a, list) and isinstance(b, list) and all(isinstance(i, dict) for i in a + b):
        key = next((k for k in ("name", "mountPath") if all(k in i for i in a + b)), None)
        if key:
            left, right = {i[key]: i for i in a}, {i[key]: i for i in b}
            for k in [*left, *(k for k in right if k not in left)]:
                _walk(left.get(k, _ABSENT), right.get(k, _ABSENT), f"{path}[{k}]", out)
            return
    empty: tuple[Any, ...] = (_ABSENT, [], {}, {"spec": {"containers": []}})  # a workerTemplate of nothing
    if a in empty and b in empty:
        return
    structured = isinstance(a, (dict, list)) or isinstance(b, (dict, list))
    if (a != b) if structured else (a is _ABSENT or b is _ABSENT or str(a) != str(b)):
        out.append((path, a, b))


_ABSENT: Any = object()


def _api_defaults(value: Any) -> Any:
    """An object as the API server stores it: a container's imagePullPolicy and a port's protocol
    defaulted (Always for :latest or untagged images, else IfNotPresent; TCP)."""
    if isinstance(value, list):
        return [_api_defaults(v) for v in value]
    if not isinstance(value, dict):
        return value
    out = {k: _api_defaults(v) for k, v in value.items()}
    if "image" in out and "name" in out and "imagePullPolicy" not in out:
        image = str(out["image"])
        latest = image.endswith(":latest") or ":" not in image.rsplit("/", 1)[-1]
        out["imagePullPolicy"] = "Always" if latest else "IfNotPresent"
    if "containerPort" in out:
        out.setdefault("protocol", "TCP")
    return out


def _name(doc: dict[str, Any]) -> str:
    return f"{doc['kind']}/{doc['metadata'].get('namespace', 'default')}/{doc['metadata']['name']}"


@pytest.mark.parametrize(("name", "text"), _cases(), ids=[c[0] for c in _cases()])
def test_example_round_trips_field_for_field_except_what_the_report_names(name: str, text: str) -> None:
    _examples_dir()
    source = [_api_defaults(d) for d in yaml.safe_load_all(text) if d]
    result = import_manifests(text)
    assert result.ok, result.errors
    objects = _api_defaults(render(TopologySpec.from_dict(result.spec), topology_id=7, revision=1))
    differences: list[tuple[str, Any, Any]] = []
    for doc in (d for d in source if d["kind"] in ("ModelServing", "ModelServer", "ModelRoute")):
        rendered = next(o for o in objects if o["kind"] == doc["kind"])
        for part in ("metadata", "spec"):
            _walk(doc.get(part, _ABSENT), rendered.get(part, _ABSENT), f"{_name(doc)}.{part}", differences)
    changed = {n.source for n in result.report.of("changed")}
    silent = [
        f"{path}: {want!r:.80} → {got!r:.80}"
        for path, want, got in differences
        if path not in changed and not (want is _ABSENT and ADDITIONS.search(path))
    ]
    assert not silent, (
        f"{name}: the render differs from the source without the report saying so:\n" + "\n".join(silent)
    )
    carried = [path for path, _, _ in differences if any(f".{k}" in path for k in OVERLAY_CARRIED)]
    carried = [p for p in carried if not ADDITIONS.search(p)]
    assert not carried, f"{name}: fields the overlay carries differ after the round trip: {carried}"
    verdict = result.report.verdict()
    assert verdict["changed"] == len(changed)
    assert verdict["lossless"] == (not changed and not result.report.of("unsupported"))


def test_the_ascend_example_keeps_its_meaning() -> None:
    """Kthena's Ascend example: data-parallel size 2 (its kv_connector_extra_config), no invented SLO
    targets or rebalancing bounds, and the weights volume, downloader, runtime sidecar and probes kept."""
    text = next(t for n, t in _cases() if n == "model-serving__prefill-decode-disaggregation")
    result = import_manifests(text)
    spec = TopologySpec.from_dict(result.spec)
    assert (spec.prefill.data_parallel_size, spec.decode.data_parallel_size) == (2, 2)
    assert (spec.slo.ttft_ms, spec.slo.tbt_ms, spec.rebalancing.prefill, spec.rebalancing.decode) == (
        None,
        None,
        None,
        None,
    )
    assert {n.target for n in result.report.of("questions")} == {
        "slo.ttft_ms",
        "slo.tbt_ms",
        "rebalancing.prefill",
        "rebalancing.decode",
    }
    pod = render(spec, topology_id=7, revision=1)[0]["spec"]["template"]["roles"][0]["entryTemplate"]["spec"]
    assert [c["name"] for c in pod["initContainers"]] == ["downloader"]
    assert sorted(c["name"] for c in pod["containers"]) == ["runtime", "vllm"]
    assert {v["name"] for v in pod["volumes"]} == {"models", "hccn-config", "shared-memory-volume"}
    engine = next(c for c in pod["containers"] if c["name"] == "vllm")
    assert engine["livenessProbe"]["initialDelaySeconds"] == 900
    assert "--data-parallel-size" in engine["args"]
    assert result.report.verdict()["lossless"] is False


@pytest.mark.parametrize(
    "golden", sorted((Path(__file__).parent / "golden").glob("*.yaml")), ids=lambda p: p.stem
)
def test_tandems_own_manifests_reimport_losslessly_with_the_smallest_overlay(golden: Path) -> None:
    """An export of Tandem's (the golden renders) imports back to a spec that renders the same objects,
    template hashes included, and whose overlays hold only what Tandem would not render anyway."""
    result = import_manifests(golden.read_text())
    assert result.ok, result.errors
    assert result.report.verdict() == {"lossless": True, "changed": 0, "dropped": 0, "questions": 4}
    overlays = {role: result.spec["roles"][role]["pod_overlay"] for role in ("prefill", "decode")}
    if "deployments" in golden.stem:  # the plain backend's own grace period sits on the Deployment
        assert overlays == {r: {"spec": {"terminationGracePeriodSeconds": 60}} for r in overlays}
    else:
        assert overlays == {"prefill": {}, "decode": {}}
