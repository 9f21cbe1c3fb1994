"""What a render of the imported spec changes in the source objects, field by field. Pure.

``differences(source, rendered)`` pairs the source documents with the rendered objects (by kind; plain
Deployments by role) and walks both, matching lists the way Kubernetes merges them (containers,
volumes and env by name, volume mounts by mount path). Each difference has the path of the field, e.g.
``ModelServing/dev/ds.spec.template.roles[prefill].entryTemplate.spec.containers[vllm].args``. Fields
only the render has (Tandem's labels, its POD_IP env, its named ports) are additions, counted apart:
they add to what the source runs without changing what it said.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

MISSING: Any = type("Missing", (), {"__repr__": lambda self: "(absent)"})()
LIST_KEYS = ("name", "mountPath")


@dataclass(frozen=True)
class Difference:
    path: str
    source: Any
    rendered: Any

    @property
    def added(self) -> bool:
        return self.source is MISSING

    def describe(self) -> str:
        if isinstance(self.source, list) and isinstance(self.rendered, list) and self.path.endswith("args"):
            return _args(self.source, self.rendered)

        def short(value: Any) -> str:
            text = "(absent)" if value is MISSING else repr(value)
            return text if len(text) <= 160 else text[:157] + "..."

        return f"{short(self.source)} → {short(self.rendered)}"


def _tokens(args: list[Any]) -> list[str]:
    """Arguments as the program sees them: a ``sh -c`` script's one string split like a shell would."""
    out: list[str] = []
    for arg in (str(a) for a in args):
        if any(c.isspace() for c in arg.strip()):
            try:
                out += shlex.split(arg.replace("\\\n", " "))
                continue
            except ValueError:
                pass
        out.append(arg)
    return out


def _args(source: list[Any], rendered: list[Any]) -> str:
    """A command line's change in words: the arguments the render drops and adds."""
    left, right = _tokens(source), _tokens(rendered)
    dropped = [t for t in left if t not in right]
    added = [t for t in right if t not in left]
    parts = []
    if dropped:
        parts.append("drops " + " ".join(dropped))
    if added:
        parts.append("adds " + " ".join(added))
    return "; ".join(parts) or "the same arguments in another order"


def _key(items: list[Any]) -> str:
    if not items or not all(isinstance(i, dict) for i in items):
        return ""
    return next((k for k in LIST_KEYS if all(k in i for i in items)), "")


def _same(a: Any, b: Any) -> bool:
    if (
        isinstance(a, (dict, list))
        or isinstance(b, (dict, list))
        or isinstance(a, bool)
        or isinstance(b, bool)
    ):
        return bool(a == b)
    return str(a) == str(b)  # "8" and 8: one quantity or port, written two ways


def _empty(value: Any) -> bool:
    """{}, [] and objects of nothing but those (a workerTemplate with no containers) say nothing."""
    if isinstance(value, dict):
        return all(_empty(v) for v in value.values())
    return isinstance(value, list) and not value


def walk(a: Any, b: Any, path: str, out: list[Difference]) -> None:
    if (a is MISSING and _empty(b)) or (b is MISSING and _empty(a)):
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for k in list(a) + [k for k in b if k not in a]:
            walk(a.get(k, MISSING), b.get(k, MISSING), f"{path}.{k}", out)
        return
    if isinstance(a, list) and isinstance(b, list):
        key = _key(a) or _key(b)
        if key and (not a or _key(a) == key) and (not b or _key(b) == key):
            left = {i[key]: i for i in a}
            right = {i[key]: i for i in b}
            for k in list(left) + [k for k in right if k not in left]:
                walk(left.get(k, MISSING), right.get(k, MISSING), f"{path}[{k}]", out)
            return
    if a is MISSING and b is MISSING:
        return
    if a is MISSING or b is MISSING or not _same(a, b):
        out.append(Difference(path, a, b))


def _where(doc: dict[str, Any]) -> str:
    meta = doc.get("metadata") or {}
    return f"{doc.get('kind')}/{meta.get('namespace', 'default')}/{meta.get('name')}"


def _role(doc: dict[str, Any]) -> str:
    from topologies.importing.plain import role_of

    return role_of(doc)


def pairs(source: list[dict[str, Any]], rendered: list[dict[str, Any]]) -> list[tuple[dict[str, Any], Any]]:
    """(source document, its rendered object or MISSING), for the kinds a topology renders."""
    out: list[tuple[dict[str, Any], Any]] = []
    for doc in source:
        kind = doc.get("kind")
        same = [o for o in rendered if o.get("kind") == kind]
        if kind == "Deployment":
            role = _role(doc)
            same = [o for o in same if role and _role(o) == role]
        if kind in ("ModelServing", "ModelServer", "ModelRoute", "Deployment"):
            out.append((doc, same[0] if same else MISSING))
    return out


def identity(source: list[dict[str, Any]]) -> tuple[int, int]:
    """(topology id, revision) a source exported by Tandem carries in its labels, else (0, 0): the render
    compared with it uses them, so Tandem's own objects compare equal, hashes and selectors included."""
    for doc in source:
        found = (doc.get("metadata") or {}).get("labels") or {}
        topology, revision = (
            str(found.get("tandem.io/topology", "")),
            str(found.get("tandem.io/revision", "")),
        )
        if topology.isdigit() and revision.isdigit():
            return int(topology), int(revision)
    return 0, 0


def differences(source: list[dict[str, Any]], rendered: list[dict[str, Any]]) -> list[Difference]:
    out: list[Difference] = []
    for doc, obj in pairs(source, rendered):
        if obj is MISSING:
            out.append(Difference(_where(doc), "(the object)", MISSING))
            continue
        for key in ("metadata", "spec"):
            walk(doc.get(key, MISSING), obj.get(key, MISSING), f"{_where(doc)}.{key}", out)
    return out
