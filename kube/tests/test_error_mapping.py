from __future__ import annotations

import json

from kube.errors import (
    KubeConflict,
    KubeForbidden,
    KubeInvalid,
    KubeNotFound,
    KubeUnauthorized,
    KubeUnreachable,
    describe_connection_error,
    error_from_response,
)


def _status(code: int, reason: str, message: str, causes=None) -> bytes:
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "code": code,
        "reason": reason,
        "message": message,
    }
    if causes:
        body["details"] = {"causes": causes}
    return json.dumps(body).encode()


def test_422_names_the_cluster_the_object_and_the_field():
    body = _status(
        422,
        "Invalid",
        'ModelServing.workload.serving.volcano.sh "x" is invalid',
        [
            {
                "reason": "FieldValueRequired",
                "field": "spec.template.roles[0].replicas",
                "message": "Required value",
            },
        ],
    )
    err = error_from_response(status=422, body=body, cluster="prod-a", action="apply ModelServing demo/x")
    assert isinstance(err, KubeInvalid)
    assert err.message == (
        "cluster `prod-a` refused apply ModelServing demo/x: spec.template.roles[0].replicas: Required value "
        "(HTTP 422)"
    )
    assert err.causes == [("spec.template.roles[0].replicas", "Required value")]
    assert err.status == 422


def test_status_codes_map_to_their_error_types():
    cases = {
        401: KubeUnauthorized,
        403: KubeForbidden,
        404: KubeNotFound,
        409: KubeConflict,
        503: KubeUnreachable,
        429: KubeUnreachable,
    }
    for code, kind in cases.items():
        err = error_from_response(
            status=code, body=_status(code, "X", "boom"), cluster="c", action="list pods"
        )
        assert isinstance(err, kind), code
        assert "cluster `c`" in err.message
        assert f"HTTP {code}" in err.message


def test_forbidden_says_what_to_grant():
    err = error_from_response(
        status=403,
        body=_status(403, "Forbidden", 'pods is forbidden: User "x" cannot list'),
        cluster="c",
        action="list pods in demo",
    )
    assert "forbids list pods in demo" in err.message
    assert "grant" in err.message


def test_non_json_body_is_kept_as_text():
    err = error_from_response(
        status=500, body=b"<html>bad gateway</html>", cluster="c", action="read the version"
    )
    assert "bad gateway" in err.message


def test_connection_errors_read_as_words():
    server = "https://10.0.0.1:6443"
    refused = ConnectionRefusedError(111, "Connection refused")
    assert (
        describe_connection_error(refused, server) == "cannot reach https://10.0.0.1:6443: connection refused"
    )
    tls = Exception("[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: self-signed certificate")
    assert describe_connection_error(tls, server).startswith("cannot trust https://10.0.0.1:6443")
    assert "no answer before the timeout" in describe_connection_error(TimeoutError("timed out"), server)
