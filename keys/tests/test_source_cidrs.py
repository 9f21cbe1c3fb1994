from __future__ import annotations


def test_a_key_limited_to_networks_refuses_other_addresses(operator, issue, key_client):
    issued = issue(operator, scopes=["topologies:read"], allowed_cidrs=["10.1.0.0/16"])
    response = key_client(issued.secret).get("/api/v1/topologies/", REMOTE_ADDR="192.0.2.9")
    assert response.status_code == 403
    error = response.json()["error"]
    assert error["code"] == "source_not_allowed" and "192.0.2.9" in error["message"]
    assert key_client(issued.secret).get("/api/v1/topologies/", REMOTE_ADDR="10.1.3.4").status_code == 200


def test_forwarded_for_from_an_untrusted_peer_does_not_open_the_network(operator, issue, key_client):
    issued = issue(operator, scopes=["topologies:read"], allowed_cidrs=["10.1.0.0/16"])
    response = key_client(issued.secret).get(
        "/api/v1/topologies/", REMOTE_ADDR="192.0.2.9", HTTP_X_FORWARDED_FOR="10.1.3.4"
    )
    assert response.status_code == 403


def test_bad_networks_are_refused_with_the_field(operator, issue):
    import pytest

    from controlplane.api.errors import DomainError

    with pytest.raises(DomainError) as caught:
        issue(operator, scopes=["topologies:read"], allowed_cidrs=["10.0.0.0/33"])
    assert "allowed_cidrs" in caught.value.fields
