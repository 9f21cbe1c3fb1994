"""Object semantics shared by the HTTP layer and the in-process controllers.

uid, one global resourceVersion, generation (bumped when anything outside metadata and status
changes), creationTimestamp, namespace checks, status-subresource separation, optimistic
concurrency, managedFields, graceful pod deletion, finalizers, and owner-reference garbage
collection. The checks every write makes first are in `write_checks`, a PATCH body's application in
`patch`.
"""

from __future__ import annotations

import copy
import secrets
import uuid
from collections.abc import Callable
from typing import Any

import yaml

from sandbox.apiserver import collector, ssa
from sandbox.apiserver import patch as patching
from sandbox.apiserver.crd_schema import prepare_custom
from sandbox.apiserver.defaults import carry_allocated
from sandbox.apiserver.errors import already_exists, bad_request, conflict, not_found
from sandbox.apiserver.meta import (
    comparable,
    decode_json,
    get_by_path,
    now_iso,
    qos_class,
    set_by_path,
    spec_part,
)
from sandbox.apiserver.resources import Registry, ResourceType
from sandbox.apiserver.selectors import (
    fields_match,
    labels_match,
    parse_field_selector,
    parse_label_selector,
)
from sandbox.apiserver.storage import Store
from sandbox.apiserver.validation import validate, validate_update
from sandbox.apiserver.write_checks import check_identity, check_namespace, check_rv, decode

__all__ = ["Api", "get_by_path", "now_iso", "set_by_path"]

NO_GENERATION = {"events", "configmaps", "secrets", "endpoints", "namespaces", "nodes", "serviceaccounts"}
# Fields a write can never change, whatever the body says.
IMMUTABLE_META = ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation")
# Kinds whose registry answers a DELETE with the deleted object rather than a Status.
RETURN_DELETED_OBJECT = {"pods", "services", "serviceaccounts"}
KEEP_STATUS_ON_CREATE = {"namespaces", "nodes", "services", "customresourcedefinitions"}
_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


class Api:
    def __init__(self, registry: Registry, store: Store) -> None:
        self.registry = registry
        self.store = store
        # Admission checks run on every create and update after validation (e.g. RBAC escalation).
        self.admission: list[Callable[[ResourceType, dict[str, Any]], None]] = []

    # -- reads --------------------------------------------------------------------------------
    def get(self, rt: ResourceType, namespace: str, name: str) -> dict[str, Any]:
        obj = self.store.get(rt.group, rt.plural, namespace if rt.namespaced else "", name)
        if obj is None:
            raise not_found(rt.plural, rt.group, name)
        return obj

    def find(self, rt: ResourceType, namespace: str, name: str) -> dict[str, Any] | None:
        return self.store.get(rt.group, rt.plural, namespace if rt.namespaced else "", name)

    def select(
        self,
        rt: ResourceType,
        namespace: str | None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> list[dict[str, Any]]:
        labels = parse_label_selector(label_selector)
        fields = parse_field_selector(field_selector, rt.plural)
        return [
            copy.deepcopy(obj)
            for obj in self.store.iter(rt.group, rt.plural, namespace if rt.namespaced else None)
            if labels_match(labels, obj["metadata"].get("labels")) and fields_match(fields, obj)
        ]

    # -- create -------------------------------------------------------------------------------
    def create(
        self,
        rt: ResourceType,
        namespace: str,
        body: dict[str, Any],
        *,
        manager: str,
        apply_manager: str | None = None,
        dry_run: bool = False,
        strict: bool = False,
    ) -> dict[str, Any]:
        body = copy.deepcopy(body)
        check_identity(rt, body, namespace)
        check_namespace(self.store, rt, namespace, creating=True)
        meta = body["metadata"]
        if not meta.get("name") and meta.get("generateName"):
            suffix = "".join(secrets.choice(_SUFFIX_ALPHABET) for _ in range(5))
            meta["name"] = f"{meta['generateName']}{suffix}"
        for key in (*IMMUTABLE_META, "resourceVersion", "selfLink"):
            meta.pop(key, None)
        if rt.status and rt.plural not in KEEP_STATUS_ON_CREATE:
            body.pop("status", None)
        body = decode(rt, body, strict)
        validate(rt, body)
        for admit in self.admission:
            admit(rt, body)
        if self.find(rt, namespace, meta["name"]) is not None:
            raise already_exists(rt.plural, rt.group, meta["name"])
        if rt.plural == "pods":
            body["status"] = {"phase": "Pending", "qosClass": qos_class(body)}
        meta = body["metadata"]
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now_iso()
        if rt.plural not in NO_GENERATION:
            meta["generation"] = 1
        if apply_manager is None:
            meta.pop("managedFields", None)
            ssa.record_update(None, body, manager, rt.api_version)
        if dry_run:
            return body
        meta["resourceVersion"] = str(self.store.next_rv())
        self.store.put(rt.group, rt.plural, body, created=True)
        return copy.deepcopy(body)

    # -- update -------------------------------------------------------------------------------
    def commit_update(
        self,
        rt: ResourceType,
        old: dict[str, Any],
        new: dict[str, Any],
        *,
        manager: str | None,
        subresource: str = "",
        dry_run: bool = False,
        strict: bool = False,
    ) -> dict[str, Any]:
        old_meta = old["metadata"]
        meta = new.setdefault("metadata", {})
        for key in ("name", "namespace", *IMMUTABLE_META):
            if key in old_meta:
                meta[key] = old_meta[key]
            else:
                meta.pop(key, None)
        new["kind"] = rt.kind
        new["apiVersion"] = rt.api_version
        if subresource == "status":
            status = new.get("status")
            new = copy.deepcopy(old)
            if status is None:
                new.pop("status", None)
            else:
                new["status"] = status
        elif rt.status and "status" in old and rt.plural not in ("namespaces",):
            new["status"] = copy.deepcopy(old["status"])
        elif rt.status and rt.plural not in ("namespaces",):
            new.pop("status", None)
        if subresource != "status":
            new = decode(rt, new, strict)
            carry_allocated(rt.plural, old, new)
            validate(rt, new)
            for admit in self.admission:
                admit(rt, new)
            validate_update(rt, old, new)
        if "generation" in old_meta and spec_part(old) != spec_part(new):
            new["metadata"]["generation"] = old_meta["generation"] + 1
        if manager is not None:
            new["metadata"]["managedFields"] = copy.deepcopy(old_meta.get("managedFields") or [])
            ssa.record_update(old, new, manager, rt.api_version, subresource)
        if comparable(old) == comparable(new):
            return old
        if dry_run:
            return new
        new["metadata"]["resourceVersion"] = str(self.store.next_rv())
        finalized = new["metadata"].get("deletionTimestamp") and not new["metadata"].get("finalizers")
        if finalized and rt.plural not in ("pods", "namespaces"):
            self._remove(rt, new)
            return new
        self.store.put(rt.group, rt.plural, new, created=False)
        return copy.deepcopy(new)

    def replace(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        body: dict[str, Any],
        *,
        manager: str,
        subresource: str = "",
        dry_run: bool = False,
        strict: bool = False,
    ) -> dict[str, Any]:
        body = copy.deepcopy(body)
        check_identity(rt, body, namespace)
        if body["metadata"].get("name") != name:
            given = body["metadata"].get("name")
            raise bad_request(f"the name of the object ({given}) does not match the name on the URL ({name})")
        old = self.get(rt, namespace, name)
        check_rv(rt, old, body)
        return self.commit_update(
            rt, old, body, manager=manager, subresource=subresource, dry_run=dry_run, strict=strict
        )

    def patch(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        content_type: str,
        raw: bytes,
        *,
        manager: str | None,
        force: bool = False,
        subresource: str = "",
        dry_run: bool = False,
        strict: bool = False,
    ) -> tuple[int, dict[str, Any]]:
        """Returns (HTTP code, object): 201 when a server-side apply created the object."""
        content_type = content_type.split(";")[0].strip()
        try:
            body = yaml.safe_load(raw) if content_type == "application/apply-patch+yaml" else decode_json(raw)
        except yaml.YAMLError as exc:
            raise bad_request(f"error decoding YAML: {exc}") from exc
        if content_type == "application/apply-patch+yaml":
            if not manager:
                raise bad_request("PATCH requests with apply-patch content type require fieldManager")
            return self._apply(
                rt, namespace, name, body, manager=manager, force=force, dry_run=dry_run, strict=strict
            )
        old = self.get(rt, namespace, name)
        new = patching.patched(rt, old, content_type, body)
        check_rv(rt, old, new)
        result = self.commit_update(
            rt,
            old,
            new,
            manager=manager or "unknown",
            subresource=subresource,
            dry_run=dry_run,
            strict=strict,
        )
        return 200, result

    def _apply(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        config: Any,
        *,
        manager: str,
        force: bool,
        dry_run: bool,
        strict: bool = False,
    ) -> tuple[int, dict[str, Any]]:
        if not isinstance(config, dict):
            raise bad_request("the applied configuration must be an object")
        config = copy.deepcopy(config)
        check_identity(rt, config, namespace)
        meta = config["metadata"]
        if meta.get("name") and meta["name"] != name:
            raise bad_request(
                f"the name of the object ({meta['name']}) does not match the name on the URL ({name})"
            )
        meta["name"] = name
        if not config.get("kind") or not config.get("apiVersion"):
            raise bad_request("apply configurations must set apiVersion and kind")
        if rt.custom:
            config = prepare_custom(rt, config, strict=strict)
        old = self.find(rt, namespace, name)
        if old is None:
            created_body = ssa.apply(None, config, manager, rt.api_version, force=force)
            return 201, self.create(
                rt, namespace, created_body, manager=manager, apply_manager=manager, dry_run=dry_run
            )
        check_rv(rt, old, config)
        new = ssa.apply(old, config, manager, rt.api_version, force=force)
        return 200, self.commit_update(rt, old, new, manager=None, dry_run=dry_run)

    # -- delete -------------------------------------------------------------------------------
    def delete(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        *,
        grace_seconds: int | None = None,
        propagation: str | None = None,
        precondition_rv: str | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        obj = self.get(rt, namespace, name)
        meta = obj["metadata"]
        if precondition_rv and precondition_rv != meta["resourceVersion"]:
            raise conflict(rt.plural, rt.group, name)
        if dry_run:
            return obj
        if propagation == "Orphan":
            collector.orphan(self, meta["uid"])
        if rt.plural == "pods":
            grace = (
                grace_seconds
                if grace_seconds is not None
                else obj["spec"].get("terminationGracePeriodSeconds", 30)
            )
            if (
                grace > 0
                and obj["spec"].get("nodeName")
                and obj.get("status", {}).get("phase") not in ("Succeeded", "Failed")
            ):
                if meta.get("deletionTimestamp"):
                    return obj
                meta["deletionTimestamp"] = now_iso(grace)
                meta["deletionGracePeriodSeconds"] = grace
                meta["resourceVersion"] = str(self.store.next_rv())
                self.store.put(rt.group, rt.plural, obj, created=False)
                return obj
        if rt.plural == "namespaces" or meta.get("finalizers"):
            if not meta.get("deletionTimestamp"):
                meta["deletionTimestamp"] = now_iso()
                if rt.plural == "namespaces":
                    obj.setdefault("status", {})["phase"] = "Terminating"
                meta["resourceVersion"] = str(self.store.next_rv())
                self.store.put(rt.group, rt.plural, obj, created=False)
            return obj
        self._remove(rt, obj)
        if rt.plural in RETURN_DELETED_OBJECT:
            return obj
        details: dict[str, Any] = {"name": name}
        if rt.group:
            details["group"] = rt.group
        details.update({"kind": rt.plural, "uid": meta["uid"]})
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}

    def remove_now(self, rt: ResourceType, namespace: str, name: str) -> None:
        """Finish a deletion (kubelet after termination, namespace controller when empty)."""
        obj = self.find(rt, namespace, name)
        if obj is not None:
            self._remove(rt, obj)

    def _remove(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        self.store.remove(rt.group, rt.plural, meta.get("namespace", ""), meta["name"], self.store.next_rv())
        collector.collect_dependents(self, meta["uid"])

    # -- helpers for controllers --------------------------------------------------------------
    def write_status(
        self, rt: ResourceType, obj: dict[str, Any], status: dict[str, Any], manager: str
    ) -> dict[str, Any]:
        """Set an object's status (no-op, and no copy, when unchanged)."""
        namespace = obj["metadata"].get("namespace", "") if rt.namespaced else ""
        stored = self.store.peek(rt.group, rt.plural, namespace, obj["metadata"]["name"])
        if stored is None or stored.get("status") == status:
            return obj
        # _commit_update copies `stored` before changing anything.
        return self.commit_update(
            rt, stored, {"metadata": {}, "status": status}, manager=manager, subresource="status"
        )

    def write(self, rt: ResourceType, obj: dict[str, Any], manager: str) -> dict[str, Any]:
        """Controller update of metadata/spec against the stored object (no rv precondition)."""
        current = self.get(rt, obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
        return self.commit_update(rt, current, copy.deepcopy(obj), manager=manager)
