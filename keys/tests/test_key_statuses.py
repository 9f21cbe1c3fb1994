"""Every status path of a key on the REST API, with the error the caller gets."""

from __future__ import annotations

import ipaddress
from datetime import timedelta

from django.utils import timezone

from keys import services
from keys.models import ApiKey


def test_active_key_authenticates_as_its_owner(operator, issue, key_client):
    issued = issue(operator, scopes=["topologies:read"])
    response = key_client(issued.secret).get("/api/v1/me/")
    assert response.status_code == 200, response.content
    assert response.json()["username"] == operator.username


def test_expired_key_says_when(operator, issue, key_client):
    issued = issue(operator, scopes=["topologies:read"])
    ApiKey.objects.filter(pk=issued.key.pk).update(expires_at=timezone.now() - timedelta(minutes=1))
    services._invalidate([str(issued.key.pk)])
    response = key_client(issued.secret).get("/api/v1/topologies/")
    assert response.status_code == 401
    error = response.json()["error"]
    assert error["code"] == "key_expired"
    assert "expired at" in error["message"]
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_expiry_takes_effect_without_any_change_being_published(operator, issue, key_client):
    issued = issue(operator, scopes=["topologies:read"])
    client = key_client(issued.secret)
    assert client.get("/api/v1/topologies/").status_code == 200  # now cached in this process
    ApiKey.objects.filter(pk=issued.key.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    # the cached record carries the expiry: no change needs publishing for the key to stop at its time
    import dataclasses

    from keys import hotpath, tokens

    digest = tokens.digest(issued.secret, hotpath.pepper())
    found, record = hotpath.cache.get(digest)
    assert found and record is not None
    hotpath.cache.put(digest, dataclasses.replace(record, expires_at=timezone.now() - timedelta(seconds=1)))
    assert client.get("/api/v1/topologies/").json()["error"]["code"] == "key_expired"


def test_revoked_key_is_refused_at_once_even_when_cached(operator, issue, key_client):
    issued = issue(operator, scopes=["topologies:read"])
    client = key_client(issued.secret)
    assert client.get("/api/v1/topologies/").status_code == 200
    services.key_revoke(key=issued.key, actor=operator, reason="leaked in a log")
    response = client.get("/api/v1/topologies/")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "key_revoked"


def test_exhausted_key_names_the_quota_and_when_it_resets(operator, issue, key_client):
    issued = issue(operator, scopes=["topologies:read"], limits_given={"requests_per_day": 2})
    client = key_client(issued.secret)
    assert [client.get("/api/v1/topologies/").status_code for _ in range(2)] == [200, 200]
    response = client.get("/api/v1/topologies/")
    assert response.status_code == 429
    error = response.json()["error"]
    assert error["code"] == "limit_exceeded"
    assert "requests per day" in error["message"] and "resets at" in error["message"]
    assert int(response["Retry-After"]) >= 1
    from rest_framework.test import APIClient  # the owner sees it as exhausted through a session

    session = APIClient()
    session.force_authenticate(operator)
    listed = session.get(f"/api/v1/keys/{issued.key.pk}/").json()
    assert listed["status"] == "exhausted"
    assert listed["exhausted"][0]["quota"] == "requests_per_day"


def test_rate_limit_per_minute_gives_retry_after(operator, issue, key_client):
    issued = issue(operator, scopes=["topologies:read"], limits_given={"requests_per_minute": 3})
    client = key_client(issued.secret)
    codes = [client.get("/api/v1/topologies/").status_code for _ in range(5)]
    # a minute boundary in the middle would reset the window; then at most one extra success
    assert codes.count(429) >= 1 and codes[:3] == [200, 200, 200]
    refused = client.get("/api/v1/topologies/")
    if refused.status_code == 429:
        assert 1 <= int(refused["Retry-After"]) <= 60
        assert "requests per minute" in refused.json()["error"]["message"]


def test_rotated_secret_works_within_grace_and_the_new_one_works(operator, issue, key_client):
    issued = issue(operator, scopes=["topologies:read"])
    old = key_client(issued.secret)
    assert old.get("/api/v1/topologies/").status_code == 200
    rotated = services.key_rotate(key=issued.key, actor=operator, grace_seconds=3600)
    assert rotated.key.pk == issued.key.pk and rotated.secret != issued.secret
    assert old.get("/api/v1/topologies/").status_code == 200
    assert key_client(rotated.secret).get("/api/v1/topologies/").status_code == 200


def test_rotated_secret_stops_after_grace(operator, issue, key_client):
    issued = issue(operator, scopes=["topologies:read"])
    services.key_rotate(key=issued.key, actor=operator, grace_seconds=0)
    response = key_client(issued.secret).get("/api/v1/topologies/")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "secret_rotated"


def test_rotated_secret_stops_when_its_grace_runs_out(operator, issue, key_client):
    issued = issue(operator, scopes=["topologies:read"])
    services.key_rotate(key=issued.key, actor=operator, grace_seconds=3600)
    issued.key.secrets.filter(retires_at__isnull=False).update(
        retires_at=timezone.now() - timedelta(seconds=1)
    )
    services._invalidate([str(issued.key.pk)])
    assert key_client(issued.secret).get("/api/v1/topologies/").json()["error"]["code"] == "secret_rotated"


def test_unknown_key_does_not_say_whether_it_exists(db, key_client):
    from keys import tokens

    response = key_client(tokens.generate("management")).get("/api/v1/topologies/")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "key_unknown"
    assert "not valid" in response.json()["error"]["message"]


def test_owner_deactivated_key_stops(operator, issue, key_client):
    issued = issue(operator, scopes=["topologies:read"])
    client = key_client(issued.secret)
    assert client.get("/api/v1/topologies/").status_code == 200
    operator.is_active = False
    operator.save()
    assert client.get("/api/v1/topologies/").json()["error"]["code"] == "owner_inactive"


def test_inference_key_on_the_rest_api_says_which_key_to_use(operator, issue, key_client):
    issued = issue(operator, purpose="production")
    response = key_client(issued.secret).get("/api/v1/topologies/")
    assert response.status_code == 401
    error = response.json()["error"]
    assert error["code"] == "wrong_kind"
    assert "management key" in error["message"]


def test_common_header_mistakes_get_their_own_hint(operator, issue, key_client):
    secret = issue(operator, scopes=["topologies:read"]).secret
    cases = {
        secret: "bearer_missing",
        f"Bearer Bearer {secret}": "bearer_doubled",
        f"Token {secret}": "wrong_scheme",
        f"Bearer  {secret}": "token_whitespace",
        f"Bearer {secret[:-1]}": "token_malformed",
        "Bearer ": "token_missing",
    }
    for header, code in cases.items():
        response = key_client("", raw_header=header).get("/api/v1/topologies/")
        assert response.status_code == 401, header
        assert response.json()["error"]["code"] == code, (header, response.json())
    assert key_client("", raw_header=f"bearer {secret}").get("/api/v1/topologies/").status_code == 200


def test_checksum_broken_token_is_refused_without_a_database_query(db, django_assert_num_queries):
    from keys import hotpath, tokens

    token = tokens.generate("management")
    broken = token[:-1] + ("A" if token[-1] != "A" else "B")
    with django_assert_num_queries(0):
        try:
            hotpath.authenticate(broken, kind="management", source_ip="127.0.0.1")
        except hotpath.KeyRefused as refused:
            assert refused.code == "token_checksum"
        else:
            raise AssertionError("a broken checksum was accepted")


def test_failed_authentications_are_audited_without_the_secret(operator, issue, key_client):
    from audit.models import AuditEvent

    issued = issue(operator, scopes=["topologies:read"])
    services.key_revoke(key=issued.key, actor=operator)
    import secrets

    address = str(ipaddress.ip_address(f"2001:db8::{secrets.token_hex(2)}:{secrets.token_hex(2)}"))
    key_client(issued.secret).get("/api/v1/topologies/", REMOTE_ADDR=address)
    event = AuditEvent.objects.filter(action="key.auth_failed").latest("created")
    assert event.detail["reason"] == "key_revoked"
    assert event.target_id == str(issued.key.pk)
    assert event.source_ip == address
    assert issued.secret not in str(event.detail) and issued.secret[10:] not in str(event.detail)


def test_an_address_with_many_failures_is_refused_before_any_lookup(db, key_client, settings):
    import secrets

    from keys import tokens

    settings.API_KEY_FAILURE_LIMIT = 3
    address = f"2001:db8::{secrets.token_hex(2)}:{secrets.token_hex(2)}"  # fresh for every run
    codes = [
        key_client(tokens.generate("management")).get("/api/v1/me/", REMOTE_ADDR=address).status_code
        for _ in range(4)
    ]
    assert codes == [401, 401, 401, 429]


def test_an_expired_key_given_a_later_expiry_works_again_at_once(operator, issue, key_client):
    issued = issue(operator, scopes=["topologies:read"])
    client = key_client(issued.secret)
    assert client.get("/api/v1/topologies/").status_code == 200
    ApiKey.objects.filter(pk=issued.key.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    services._invalidate([str(issued.key.pk)])
    assert client.get("/api/v1/topologies/").json()["error"]["code"] == "key_expired"  # cached as expired
    services.key_update(
        key=issued.key, actor=operator, changes={"expires_at": timezone.now() + timedelta(days=3)}
    )
    assert client.get("/api/v1/topologies/").status_code == 200
