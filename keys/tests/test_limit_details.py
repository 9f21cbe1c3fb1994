"""Over-limit answers of the REST API say which limit, its value and when it resets, for programs too."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime, timedelta

from keys import hotpath, limits, tokens


def _limit(response) -> dict:
    assert response.status_code == 429, response.content
    error = response.json()["error"]
    assert set(error) == {"code", "message", "fields", "limit"}
    limit = error["limit"]
    assert set(limit) == {"name", "value", "used", "resets_at", "retry_after"}
    assert limit["resets_at"].endswith("Z")
    resets = datetime.fromisoformat(limit["resets_at"].replace("Z", "+00:00"))
    assert resets.tzinfo is not None and resets.utcoffset() == timedelta(0)
    assert limit["retry_after"] == int(response["Retry-After"])
    wait = (resets - datetime.now(UTC)).total_seconds()
    assert limit["retry_after"] - 2 <= wait <= limit["retry_after"]
    return limit


def test_an_exhausted_quota_names_it_its_value_and_its_reset(operator, issue, key_client):
    issued = issue(operator, scopes=["topologies:read"], limits_given={"requests_per_day": 2})
    client = key_client(issued.secret)
    assert [client.get("/api/v1/topologies/").status_code for _ in range(2)] == [200, 200]
    started = datetime.now(UTC)
    limit = _limit(client.get("/api/v1/topologies/"))
    midnight = datetime.combine(started.date() + timedelta(days=1), datetime.min.time(), UTC)
    assert limit == {
        "name": "requests_per_day",
        "value": 2,
        "used": 2,
        "resets_at": midnight.isoformat().replace("+00:00", "Z"),
        "retry_after": limit["retry_after"],
    }


def test_a_rate_limit_names_it_and_resets_within_the_minute(operator, issue, key_client):
    issued = issue(operator, scopes=["topologies:read"], limits_given={"requests_per_minute": 2})
    client = key_client(issued.secret)
    answers = [client.get("/api/v1/topologies/") for _ in range(4)]
    refused = [a for a in answers if a.status_code == 429]
    assert refused, [a.status_code for a in answers]  # a minute boundary lets at most two more through
    limit = _limit(refused[-1])
    assert limit["name"] == "requests_per_minute" and limit["value"] == 2 and limit["used"] >= 2
    assert 1 <= limit["retry_after"] <= 60
    assert datetime.fromisoformat(limit["resets_at"].replace("Z", "+00:00")).second == 0


def test_a_concurrency_limit_names_it(operator, issue, key_client):
    issued = issue(operator, scopes=["topologies:read"], limits_given={"max_concurrent": 1})
    held = hotpath.authenticate(issued.secret, kind="management", source_ip="192.0.2.1")  # one in flight
    try:
        limit = _limit(key_client(issued.secret).get("/api/v1/topologies/"))
    finally:
        held.settle()
    assert limit["name"] == "max_concurrent" and limit["value"] == 1 and limit["used"] == 1
    assert key_client(issued.secret).get("/api/v1/topologies/").status_code == 200


def test_too_many_failures_from_an_address_names_that_limit(db, key_client, settings):
    settings.API_KEY_FAILURE_LIMIT = 2
    address = f"2001:db8::{secrets.token_hex(2)}:{secrets.token_hex(2)}"
    for _ in range(2):
        refused = key_client(tokens.generate("management")).get("/api/v1/me/", REMOTE_ADDR=address)
        assert refused.status_code == 401
    response = key_client(tokens.generate("management")).get("/api/v1/me/", REMOTE_ADDR=address)
    limit = _limit(response)
    assert response.json()["error"]["code"] == "too_many_failures"
    assert limit["name"] == "failed_authentications_per_minute" and limit["value"] == 2 and limit["used"] >= 2
    assert 1 <= limit["retry_after"] <= 60


def test_limit_details_are_the_same_numbers_as_the_header():
    resets = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=30)
    details = limits.OverLimit(limit="tokens_per_minute", used=120, allowed=100, resets_at=resets).details()
    assert details["name"] == "tokens_per_minute" and details["value"] == 100 and details["used"] == 120
    assert details["resets_at"] == resets.isoformat().replace("+00:00", "Z")
    assert 29 <= int(str(details["retry_after"])) <= 30
