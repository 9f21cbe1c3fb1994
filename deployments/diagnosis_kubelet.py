"""The causes a kubelet (and the engine it runs) reports that diagnosis names with their fix: env from a
Secret/ConfigMap or key that does not exist (CreateContainerConfigError), and engine options the
engine's argparse refuses. Pure; the words matched are the kubelet's (``kubelet_pods.go``
makeEnvironmentVariables) and argparse's, as the sandbox reproduces them.

Messages may name ``{roles}`` and ``{restarts}``, filled in by ``deployments.diagnosis``.
"""

from __future__ import annotations

import re
from typing import NamedTuple

# The object missing, or a key missing from it.
_CONFIG_OBJECT_RE = re.compile(r'\b(configmap|secret) "([^"]+)" not found', re.IGNORECASE)
_CONFIG_KEY_RE = re.compile(r"couldn't find key (\S+) in (ConfigMap|Secret) ([^/\s]+)/(\S+)", re.IGNORECASE)
# argparse's refusals (vLLM: `vllm: error: unrecognized arguments: --foo`; SGLang `launch_server.py: ...`).
_UNRECOGNIZED_RE = re.compile(r": error: unrecognized arguments: (.+)$")
_AMBIGUOUS_RE = re.compile(r": error: ambiguous option: (\S+) could match (.+)$")


class Cause(NamedTuple):
    code: str
    message: str
    fix: str


def _config_missing(text: str, namespace: str) -> Cause | None:
    """A container that cannot start because its env names a Secret/ConfigMap (or key) that does not
    exist: the kubelet's CreateContainerConfigError."""
    key = _CONFIG_KEY_RE.search(text)
    if key:
        name, kind = key.group(4), "ConfigMap" if key.group(2).lower() == "configmap" else "Secret"
        return Cause(
            f"{kind.lower()}_missing",
            f"The {{roles}} pods cannot start (CreateContainerConfigError): {kind} `{name}` in namespace "
            f"`{key.group(3)}` has no key `{key.group(1)}`.",
            f"Add the key `{key.group(1)}` to the {kind} `{name}`, or fix the key the {{roles}} env "
            "references, then deploy again.",
        )
    found = _CONFIG_OBJECT_RE.search(text)
    if found is None:
        return None
    kind = "ConfigMap" if found.group(1).lower() == "configmap" else "Secret"
    name = found.group(2)
    where = f" in namespace `{namespace}`" if namespace else ""
    create = (
        f"`kubectl create secret generic {name} -n {namespace} --from-literal=KEY=VALUE`"
        if kind == "Secret" and namespace
        else f"the {kind}"
    )
    return Cause(
        f"{kind.lower()}_missing",
        f"The {{roles}} pods cannot start (CreateContainerConfigError): {kind} `{name}` not found{where}.",
        f"Create it ({create}) or fix the reference in the {{roles}} env, then deploy again.",
    )


def config_cause(said: str, message: str, namespace: str) -> Cause:
    """Why a container waits in CreateContainerConfigError: `said` is the pod's waiting message and the
    kubelet's `Failed` events, `message` the waiting message alone (quoted when nothing is matched)."""
    return _config_missing(said, namespace) or Cause(
        "config_error",
        "The {roles} pods cannot start (CreateContainerConfigError): "
        + (message or "the kubelet cannot build the container's config")
        + ".",
        "Check the Secrets and ConfigMaps the {roles} env and envFrom reference, then deploy again.",
    )


def rejected_arguments(line: str) -> Cause | None:
    """The engine refused options it does not know (argparse's `unrecognized arguments`)."""
    ambiguous = _AMBIGUOUS_RE.search(line)
    if ambiguous:
        option, could = ambiguous.group(1).split("=", 1)[0], ambiguous.group(2).split(", ")
        listed = ", ".join(f"`{c}`" for c in could[:4]) + (
            f" and {len(could) - 4} more" if len(could) > 4 else ""
        )
        return Cause(
            "engine_argument_rejected",
            f"The {{roles}} engine rejected argument `{option}` and exits at start (CrashLoopBackOff, "
            f"{{restarts}} restarts): it is ambiguous, it could be {listed}.",
            "Write the option in full in the {roles} role's extra args, then deploy again.",
        )
    match = _UNRECOGNIZED_RE.search(line)
    if match is None:
        return None
    words = match.group(1).split()
    options = [word.split("=", 1)[0] for word in words if word.startswith("-")] or words
    names = ", ".join(f"`{option}`" for option in options)
    plural = "s" if len(options) > 1 else ""
    return Cause(
        "engine_argument_rejected",
        f"The {{roles}} engine rejected argument{plural} {names} and exits at start (CrashLoopBackOff, "
        f'{{restarts}} restarts): "{line.strip()}"',
        f"Remove {names} from the {{roles}} role's extra args (the engine version in the image does not "
        "know " + ("them" if plural else "it") + "), then deploy again.",
    )
