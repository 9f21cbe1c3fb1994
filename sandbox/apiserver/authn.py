"""Authentication: the admin's static token and signed ServiceAccount tokens (the TokenRequest API).

ServiceAccount tokens are JWTs signed with an ECDSA P-256 key generated when the sandbox starts
(ES256, like a cluster's `--service-account-key-file`), carrying the claims a real API server
puts in a bound token: `iss`, `sub` (`system:serviceaccount:NS:NAME`), `aud`, `exp`, `iat`,
`nbf` and `kubernetes.io` (namespace, service account name and uid). A token is accepted while
it is unexpired, carries the API server's audience, and names a ServiceAccount that still exists
with the same uid; anything else is a 401, as on a real server.
"""

from __future__ import annotations

import base64
import hmac
import json
import secrets
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature, encode_dss_signature

from sandbox.apiserver.errors import ApiError
from sandbox.apiserver.storage import Store

ISSUER = "https://kubernetes.default.svc.cluster.local"
AUDIENCE = ISSUER
DEFAULT_EXPIRATION = 3600
MIN_EXPIRATION = 600
MAX_EXPIRATION = 2**32
ADMIN_NAME = "kubernetes-admin"
ANONYMOUS = "system:anonymous"


@dataclass(frozen=True)
class User:
    name: str
    groups: tuple[str, ...] = ()
    uid: str = ""
    extra: dict[str, list[str]] = field(default_factory=dict, compare=False, hash=False)

    @property
    def privileged(self) -> bool:
        """Members of system:masters pass every authorization check (as on a real API server)."""
        return "system:masters" in self.groups

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"username": self.name, "groups": list(self.groups)}
        if self.uid:
            out["uid"] = self.uid
        if self.extra:
            out["extra"] = self.extra
        return out


ADMIN = User(ADMIN_NAME, ("kubeadm:cluster-admins", "system:masters", "system:authenticated"))
ANONYMOUS_USER = User(ANONYMOUS, ("system:unauthenticated",))


def service_account_user(namespace: str, name: str, uid: str) -> User:
    return User(
        f"system:serviceaccount:{namespace}:{name}",
        ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"),
        uid,
    )


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class TokenIssuer:
    """Signs and verifies ServiceAccount JWTs (ES256)."""

    def __init__(self) -> None:
        self._key = ec.generate_private_key(ec.SECP256R1())
        self.key_id = secrets.token_hex(8)

    def issue(
        self,
        *,
        namespace: str,
        name: str,
        uid: str,
        audiences: list[str],
        expiration_seconds: int,
        now: float | None = None,
    ) -> tuple[str, int]:
        """(token, expiry as unix seconds)."""
        issued = int(now if now is not None else time.time())
        expires = issued + expiration_seconds
        header = {"alg": "ES256", "kid": self.key_id}
        claims = {
            "aud": audiences,
            "exp": expires,
            "iat": issued,
            "iss": ISSUER,
            "jti": str(uuid.uuid4()),
            "kubernetes.io": {"namespace": namespace, "serviceaccount": {"name": name, "uid": uid}},
            "nbf": issued,
            "sub": f"system:serviceaccount:{namespace}:{name}",
        }
        signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}"
        der = self._key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256()))
        r, s = decode_dss_signature(der)
        signature = r.to_bytes(32, "big") + s.to_bytes(32, "big")
        return f"{signing_input}.{_b64(signature)}", expires

    def verify(self, token: str, *, now: float | None = None) -> dict[str, Any] | None:
        """The claims of a well-signed, current token for this API server's audience; None otherwise."""
        parts = token.split(".")
        if len(parts) != 3:
            return None
        try:
            header = json.loads(_unb64(parts[0]))
            claims = json.loads(_unb64(parts[1]))
            signature = _unb64(parts[2])
        except (ValueError, UnicodeDecodeError):
            return None
        if not isinstance(header, dict) or header.get("alg") != "ES256" or len(signature) != 64:
            return None
        der = encode_dss_signature(
            int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big")
        )
        try:
            self._key.public_key().verify(der, f"{parts[0]}.{parts[1]}".encode(), ec.ECDSA(hashes.SHA256()))
        except InvalidSignature:
            return None
        if not isinstance(claims, dict) or claims.get("iss") != ISSUER:
            return None
        current = now if now is not None else time.time()
        try:
            if float(claims["exp"]) <= current or float(claims.get("nbf", 0)) > current + 60:
                return None
        except (KeyError, TypeError, ValueError):
            return None
        audiences = claims.get("aud")
        if isinstance(audiences, str):
            audiences = [audiences]
        if not isinstance(audiences, list) or AUDIENCE not in audiences:
            return None
        return claims


class Authenticator:
    """Who sent a request: the admin (static token), a ServiceAccount (signed token), or nobody."""

    def __init__(self, admin_token: str, store: Store, issuer: TokenIssuer) -> None:
        self.admin_token = admin_token
        self.store = store
        self.issuer = issuer

    def authenticate(self, token: str) -> User | None:
        if hmac.compare_digest(token.encode(), self.admin_token.encode()):
            return ADMIN
        claims = self.issuer.verify(token)
        if claims is None:
            return None
        info = claims.get("kubernetes.io") or {}
        namespace = str(info.get("namespace") or "")
        account = info.get("serviceaccount") or {}
        name, uid = str(account.get("name") or ""), str(account.get("uid") or "")
        live = self.store.peek("", "serviceaccounts", namespace, name)
        if live is None or live["metadata"].get("uid") != uid:
            return None  # the ServiceAccount was deleted (or re-created): its tokens are void
        return service_account_user(namespace, name, uid)


def token_request(
    issuer: TokenIssuer, service_account: dict[str, Any], body: dict[str, Any]
) -> dict[str, Any]:
    """Answer a TokenRequest (`POST .../serviceaccounts/NAME/token`) for a stored ServiceAccount."""
    meta = service_account["metadata"]
    spec = body.get("spec") if isinstance(body.get("spec"), dict) else {}
    assert isinstance(spec, dict)
    audiences = spec.get("audiences") or [AUDIENCE]
    raw_seconds = spec.get("expirationSeconds")
    seconds = DEFAULT_EXPIRATION if raw_seconds in (None, 0) else raw_seconds
    causes = []
    if not isinstance(audiences, list) or not all(isinstance(a, str) and a for a in audiences):
        causes.append({"reason": "FieldValueInvalid", "field": "spec.audiences", "message": "Invalid value"})
    if not isinstance(seconds, int) or isinstance(seconds, bool):
        causes.append(
            {
                "reason": "FieldValueInvalid",
                "field": "spec.expirationSeconds",
                "message": f"Invalid value: {seconds!r}: must be an integer",
            }
        )
    elif seconds < MIN_EXPIRATION:
        causes.append(
            {
                "reason": "FieldValueInvalid",
                "field": "spec.expirationSeconds",
                "message": f"Invalid value: {seconds}: may not specify a duration less than 10 minutes",
            }
        )
    elif seconds > MAX_EXPIRATION:
        causes.append(
            {
                "reason": "FieldValueInvalid",
                "field": "spec.expirationSeconds",
                "message": f"Invalid value: {seconds}: may not specify a duration larger than 2^32 seconds",
            }
        )
    if causes:
        summary = ", ".join(f"{c['field']}: {c['message']}" for c in causes)
        raise ApiError(
            422,
            "Invalid",
            f'TokenRequest.authentication.k8s.io "{meta["name"]}" is invalid: {summary}',
            details={
                "name": meta["name"],
                "group": "authentication.k8s.io",
                "kind": "TokenRequest",
                "causes": causes,
            },
        )
    assert isinstance(seconds, int)
    token, expires = issuer.issue(
        namespace=meta["namespace"],
        name=meta["name"],
        uid=meta["uid"],
        audiences=list(audiences),
        expiration_seconds=seconds,
    )
    return {
        "kind": "TokenRequest",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"name": meta["name"], "namespace": meta["namespace"], "creationTimestamp": None},
        "spec": {"audiences": list(audiences), "expirationSeconds": seconds, "boundObjectRef": None},
        "status": {
            "token": token,
            "expirationTimestamp": datetime.fromtimestamp(expires, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        },
    }
