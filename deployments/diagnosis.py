"""Why a deployment did not become Ready, in plain words with the fix.

A pure function over what the cluster reports (pods, events, log tails, what the nodes offer), so each
failure mode is tested with realistic data and no cluster.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypedDict

from deployments.diagnosis_kubelet import config_cause, rejected_arguments


class PodLike(Protocol):
    """What diagnosis reads of a pod (kube.PodInfo satisfies it)."""

    @property
    def name(self) -> str: ...
    @property
    def phase(self) -> str: ...
    @property
    def ready(self) -> bool: ...
    @property
    def reason(self) -> str: ...
    @property
    def restarts(self) -> int: ...
    @property
    def labels(self) -> dict[str, str]: ...


class EventLike(Protocol):
    """What diagnosis reads of an event (kube.EventInfo satisfies it)."""

    @property
    def type(self) -> str: ...
    @property
    def reason(self) -> str: ...
    @property
    def message(self) -> str: ...
    @property
    def involved_name(self) -> str: ...


class Diagnosis(TypedDict):
    code: str
    message: str
    fix: str
    pods: list[str]


@dataclass
class _Found:
    """One cause; `message` may name `{roles}` and `{restarts}`, filled in from every pod it covers."""

    code: str
    message: str
    fix: str
    pods: list[str] = field(default_factory=list)
    roles: list[str] = field(default_factory=list)
    restarts: int = 0

    def as_dict(self) -> Diagnosis:
        order = {"prefill": 0, "decode": 1}
        roles = sorted(set(self.roles), key=lambda r: (order.get(r, 2), r))
        message = self.message.replace("{roles}", " and ".join(roles) or "pod")
        message = message.replace("{restarts}", str(self.restarts))
        fix = self.fix.replace("{roles}", " and ".join(roles) or "pod")
        return {"code": self.code, "message": message, "fix": fix, "pods": sorted(set(self.pods))}


PULL_REASONS = {"ImagePullBackOff", "ErrImagePull", "InvalidImageName"}
CONFIG_REASONS = {"CreateContainerConfigError"}
CRASH_REASONS = {"CrashLoopBackOff", "Error", "RunContainerError"}
_IMAGE_RE = re.compile(r'image "([^"]+)"')
_MOUNT_RE = re.compile(r'(configmap|secret)s? "([^"]+)" not found', re.IGNORECASE)
_VOLUME_RE = re.compile(r'for volume "([^"]+)"')
_CLAIM_RE = re.compile(r'persistentvolumeclaim "([^"]+)" not found')
_INSUFFICIENT_RE = re.compile(r"Insufficient ([A-Za-z0-9.\-/_]+)")
_ERROR_LINE_RE = re.compile(r"error|exception|traceback|invalid|unrecognized|failed|fatal|refused", re.I)
_MOONCAKE_RE = re.compile(r"mooncake", re.I)
_MASTER_RE = re.compile(r"master", re.I)
_MASTER_ADDR_RE = re.compile(r"([A-Za-z0-9.\-]+:\d{2,5})")
_STANDARD_RESOURCES = {"cpu", "memory", "pods", "ephemeral-storage"}


_EXCEPTION_RE = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?[A-Za-z_]\w*(?:Error|Exception|Exit)\b.*:")
_NOT_THE_ERROR = ("For further information visit",)  # pydantic's pointer to its docs


def names_an_exception(log: str) -> bool:
    """Whether the log ends a program with an exception (a traceback's last line) or an argument error."""
    return any(_EXCEPTION_RE.match(line) or ": error: " in line for line in log.splitlines() if line.strip())


def last_error_line(log: str) -> str:
    """The line of a log that says what went wrong: the last exception of a Python traceback with the
    detail the exception prints under it (pydantic: ``ValidationError: 1 validation error for
    ModelConfig`` then ``Value error, User-specified max_model_len ...``), else the last line that
    reads like an error, else the last non-empty line."""
    lines = [line.rstrip() for line in log.splitlines() if line.strip()]
    lines = [line for line in lines if not line.strip().startswith(_NOT_THE_ERROR)]
    for index in range(len(lines) - 1, -1, -1):
        if _EXCEPTION_RE.match(lines[index]):
            detail = [line.strip() for line in lines[index + 1 :] if line.startswith((" ", "\t"))]
            return " ".join([lines[index].strip(), *detail[:1]])[:400]
    for line in reversed(lines):
        if _ERROR_LINE_RE.search(line):
            return line.strip()[:400]
    return lines[-1].strip()[:400] if lines else ""


def _role(pod: PodLike) -> str:
    labels = pod.labels or {}
    return labels.get("tandem.io/role") or labels.get("modelserving.volcano.sh/role") or "pod"


def _events_for(events: Iterable[EventLike], pods: set[str]) -> list[EventLike]:
    return [event for event in events if event.involved_name in pods]


_COUNTS_RE = re.compile(r"^\d+/\d+ nodes are available: ")


def _without_counts(message: str) -> str:
    """The scheduler's reason without its node counts, which differ per attempt and per pod."""
    return _COUNTS_RE.sub("", message)


def _scheduling(
    message: str,
    pod_names: list[str],
    node_resources: Mapping[str, int],
    requested: Mapping[str, int],
    namespace: str = "",
) -> _Found:
    claim = _CLAIM_RE.search(message)
    if claim:
        where = f" in namespace `{namespace}`" if namespace else ""
        return _Found(
            "volume_claim_missing",
            f"The {{roles}} pods cannot be scheduled: PersistentVolumeClaim `{claim.group(1)}` not found"
            f"{where}.",
            f"Create the PersistentVolumeClaim `{claim.group(1)}`{where}, or fix the claim name of the "
            "volume that references it, then deploy again.",
            pod_names,
        )
    missing = sorted({name.rstrip(".,;") for name in _INSUFFICIENT_RE.findall(message)})
    offered = {name: free for name, free in node_resources.items() if name not in _STANDARD_RESOURCES}
    unknown = [name for name in missing if name not in _STANDARD_RESOURCES and name not in offered]
    if unknown:
        offered_text = (
            ", ".join(f"`{name}` ({free} free)" for name, free in sorted(offered.items()))
            or "no accelerator resources"
        )
        return _Found(
            "resource_name_wrong",
            f"The {{roles}} pods cannot be scheduled: no node offers `{unknown[0]}`. "
            f"The nodes offer {offered_text}.",
            f"Set the {{roles}} accelerator resource name to one the nodes offer"
            f"{' (e.g. `' + next(iter(sorted(offered))) + '`)' if offered else ''} and deploy again.",
            pod_names,
        )
    if missing:
        name = missing[0]
        want = requested.get(name)
        free = node_resources.get(name)
        detail = ""
        if want is not None and free is not None:
            detail = f" The topology asks for {want} `{name}` in total; {free} are free."
        return _Found(
            "insufficient_capacity",
            f"The {{roles}} pods cannot be scheduled: not enough free `{name}` on any node.{detail}",
            "Lower the replicas or the accelerators per pod of a role, free capacity by removing other "
            "workloads, or add nodes.",
            pod_names,
        )
    return _Found(
        "unschedulable",
        f"The {{roles}} pods cannot be scheduled: {_without_counts(message.strip())}",
        "Check the {roles} node selector and the nodes' taints and capacity.",
        pod_names,
    )


def diagnose(
    *,
    pods: Sequence[PodLike],
    events: Sequence[EventLike],
    logs: Mapping[str, str] | None = None,
    node_resources: Mapping[str, int] | None = None,
    requested: Mapping[str, int] | None = None,
    timed_out: bool = False,
    namespace: str = "",
) -> list[Diagnosis]:
    """Explain why `pods` are not Ready.

    `logs` maps pod name → log tail; `node_resources` maps resource name → free amount across nodes
    (to tell a wrong resource name from insufficient capacity); `requested` maps resource name → the
    total the topology asks for; `namespace` the pods' namespace (named in what to create).
    """
    logs = logs or {}
    node_resources = node_resources or {}
    requested = requested or {}
    found: dict[tuple[str, str], _Found] = {}

    def add(item: _Found) -> None:
        # One cause is one finding: the same text with other counts (nodes, restarts) is the same cause.
        key = (item.code, re.sub(r"\d+", "#", item.message))
        if key in found:
            found[key].pods.extend(item.pods)
            found[key].roles.extend(item.roles)
            found[key].restarts = max(found[key].restarts, item.restarts)
        else:
            found[key] = item

    not_ready = [pod for pod in pods if not pod.ready]
    names = {pod.name for pod in not_ready}
    pod_events = _events_for(events, names)
    explained: set[str] = set()

    role_of = {pod.name: _role(pod) for pod in pods}

    def add_for(item: _Found, pod_name: str) -> None:
        item.roles = [role_of.get(pod_name, "pod")]
        add(item)

    for event in pod_events:
        if event.reason == "FailedScheduling":
            add_for(
                _scheduling(event.message, [event.involved_name], node_resources, requested, namespace),
                event.involved_name,
            )
            explained.add(event.involved_name)
        elif event.reason == "FailedMount":
            match = _MOUNT_RE.search(event.message)
            if match:
                kind = "ConfigMap" if match.group(1).lower() == "configmap" else "Secret"
                volume = _VOLUME_RE.search(event.message)
                as_volume = f" (volume `{volume.group(1)}`)" if volume else ""
                where = f"namespace `{namespace}`" if namespace else "the topology's namespace"
                add_for(
                    _Found(
                        "mount_missing",
                        f"The {{roles}} pods are stuck in ContainerCreating (FailedMount): the {kind} "
                        f"`{match.group(2)}` they mount{as_volume} does not exist in {where}.",
                        f"Create the {kind} `{match.group(2)}` in {where}, or fix or remove the volume "
                        "that references it, then deploy again.",
                        [event.involved_name],
                    ),
                    event.involved_name,
                )
            else:
                add_for(
                    _Found(
                        "mount_failed",
                        f"A volume of the {{roles}} pods cannot be mounted: {event.message.strip()}",
                        "Check the volumes the pod template references.",
                        [event.involved_name],
                    ),
                    event.involved_name,
                )
            explained.add(event.involved_name)

    for pod in not_ready:
        if pod.name in explained:
            continue
        reason = pod.reason or ""
        if reason in PULL_REASONS:
            image = ""
            for event in reversed(pod_events):  # newest first: the pod's name may have run other images
                if event.involved_name == pod.name and event.type == "Warning":
                    match = _IMAGE_RE.search(event.message)
                    if match:
                        image = match.group(1)
                        break
            tag = image.rpartition(":")[2] if ":" in image.split("/")[-1] else ""
            what = f"`{image}`" if image else "the container image"
            tag_text = f" (tag `{tag}`)" if tag else ""
            add(
                _Found(
                    "image_pull",
                    "The {roles} image " + what + tag_text + " cannot be pulled.",
                    "Check that the tag exists in the registry and that the cluster has pull credentials "
                    "for it (imagePullSecrets), then set a valid image and deploy again.",
                    [pod.name],
                    [_role(pod)],
                )
            )
        elif reason in CONFIG_REASONS:
            said = " ".join(
                [getattr(pod, "message", "") or ""]
                + [e.message for e in pod_events if e.involved_name == pod.name and e.reason == "Failed"]
            )
            add(
                _Found(
                    *config_cause(said, getattr(pod, "message", "") or "", namespace),
                    [pod.name],
                    [_role(pod)],
                )
            )
        elif reason in CRASH_REASONS or pod.restarts > 0:
            line = last_error_line(logs.get(pod.name, ""))
            rejected = rejected_arguments(line)
            if rejected is not None:
                add(_Found(*rejected, [pod.name], [_role(pod)], pod.restarts))
            elif _MOONCAKE_RE.search(line) and _MASTER_RE.search(line):
                addr = _MASTER_ADDR_RE.search(line)
                where = f" at `{addr.group(1)}`" if addr else ""
                add(
                    _Found(
                        "connector_backend_missing",
                        "The KV connector cannot reach its Mooncake master" + where + ", so the {roles} "
                        "engines crash on start.",
                        "Deploy the Mooncake master (and its Service) in the cluster, or correct the "
                        "Mooncake master address in the topology's connector settings.",
                        [pod.name],
                        [_role(pod)],
                    )
                )
            else:
                said = f' Last error: "{line}"' if line else ""
                add(
                    _Found(
                        "crash_loop",
                        "The {roles} engine keeps crashing (CrashLoopBackOff, {restarts} restarts)." + said,
                        "Fix the engine arguments or environment named in the error (the role's extra "
                        "args / env in the topology), then deploy again.",
                        [pod.name],
                        [_role(pod)],
                        pod.restarts,
                    )
                )
        elif timed_out:
            add(
                _Found(
                    "not_ready",
                    "The {roles} pods did not become Ready in time (phase " + (pod.phase or "unknown") + ").",
                    "Check the engine logs; if the model loads slowly, raise the topology's ready timeout.",
                    [pod.name],
                    [_role(pod)],
                )
            )
    if timed_out and not pods:
        add(
            _Found(
                "no_pods",
                "No pods appeared for the topology before the timeout.",
                "Check that the workload controller (Kthena for the kthena backend) runs in the cluster.",
                [],
            )
        )
    return [item.as_dict() for item in found.values()]
