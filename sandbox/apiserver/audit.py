"""An audit log like kube-apiserver's `--audit-log-path` at level Metadata: one `audit.k8s.io/v1`
Event per request (JSON lines) with the user, verb, object reference and response code."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from sandbox.apiserver.authn import User
from sandbox.apiserver.rbac import Attributes


def _micro(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class AuditLog:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file: IO[str] = path.open("a", buffering=1)

    def record(
        self, *, user: User | None, attrs: Attributes, uri: str, code: int, received: datetime
    ) -> None:
        event: dict[str, Any] = {
            "kind": "Event",
            "apiVersion": "audit.k8s.io/v1",
            "level": "Metadata",
            "auditID": str(uuid.uuid4()),
            "stage": "ResponseComplete",
            "requestURI": uri,
            "verb": attrs.verb,
            "user": user.as_dict() if user is not None else {},
            "responseStatus": {"metadata": {}, "code": code},
            "requestReceivedTimestamp": _micro(received),
            "stageTimestamp": _micro(datetime.now(UTC)),
        }
        if attrs.resource_request:
            ref = {"resource": attrs.resource, "apiGroup": attrs.api_group, "apiVersion": attrs.api_version}
            for key, value in (
                ("namespace", attrs.namespace),
                ("name", attrs.name),
                ("subresource", attrs.subresource),
            ):
                if value:
                    ref[key] = value
            event["objectRef"] = ref
        self._file.write(json.dumps(event, separators=(",", ":")) + "\n")

    def close(self) -> None:
        self._file.close()
