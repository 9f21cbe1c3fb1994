"""The OpenAPI document's POST /v1/responses holds what the gateway really serves: the requests the SDK
sends, the answers, every streamed event and the errors, on both paths (passed through, translated)."""

from __future__ import annotations

import json

import jsonschema
import requests

from gateway import openapi, openapi_v1
from gateway.app import KNOWN
from gateway.tests.conftest import MODEL
from gateway.tests.test_responses_sdk import SHELL
from traces import receiver


def check(instance, name):
    schema = {"$ref": f"{openapi.REF}{name}", "components": {"schemas": openapi.COMPONENTS}}
    jsonschema.Draft202012Validator(schema).validate(instance)


def post(gw, body, stream=False, valid=True):
    headers = {"Authorization": f"Bearer {gw.secret}"}
    if valid:
        check(body, "ResponsesRequest")
    return requests.post(f"{gw.base}/v1/responses", json=body, headers=headers, timeout=30, stream=stream)


def events(answer):
    out = []
    for block in answer.text.split("\n\n"):
        data = [line[6:] for line in block.splitlines() if line.startswith("data: ")]
        kind = [line[7:] for line in block.splitlines() if line.startswith("event: ")]
        if data:
            event = json.loads("".join(data))
            assert kind == [event["type"]]
            out.append(event)
    return out


def served_exactly(gw):
    whole = post(gw, {"model": MODEL, "input": "run echo", "tools": [SHELL], "max_output_tokens": 16})
    assert whole.status_code == 200
    check(whole.json(), "ResponsesResponse")
    streamed = post(gw, {"model": MODEL, "input": "run echo", "tools": [SHELL], "stream": True})
    assert streamed.headers["content-type"].startswith("text/event-stream")
    seen = events(streamed)
    for event in seen:
        check(event, "ResponsesStreamEvent")
    assert [e["sequence_number"] for e in seen] == list(range(len(seen)))
    bad = post(gw, {"model": MODEL, "input": "x", "store": False, "max_output_tokens": 0}, valid=False)
    assert bad.status_code == 400
    check(bad.json(), "GatewayError")


def test_translated_answers_match_the_document(scripted_gateway):
    served_exactly(scripted_gateway)


def test_passed_through_answers_match_the_document(gateway, cluster_stack):
    gateway.route(endpoint_url=cluster_stack.stack.url("decode-0-0"))
    served_exactly(gateway)


def test_the_document_lists_every_gateway_endpoint_in_openapi_3_0(client, admin_user):
    import yaml
    from openapi_spec_validator import validate

    client.force_login(admin_user)
    document = yaml.safe_load(client.get("/api/v1/schema/").content)
    validate(document)
    operation = document["paths"]["/v1/responses"]["post"]
    assert set(operation["responses"]) == {"200", *openapi.ERRORS}
    assert document["components"]["schemas"]["ResponsesRequest"] == openapi.openapi30(openapi.REQUEST)
    # and every other endpoint the gateway serves (gateway/openapi_v1.py, test_v1_schema.py)
    served = {path for path in document["paths"] if path.startswith("/v1/")}
    assert served == {*KNOWN, receiver.PATH}  # and the OTLP traces receiver, served beside it
    assert document["components"]["schemas"]["MessagesResponse"] == openapi.openapi30(openapi_v1.MESSAGE)


def test_hostile_bodies_get_a_400_in_the_gateways_error_shape(scripted_gateway):
    """JSON nested 1,000 deep and a body that is not JSON: a 4xx that says what is wrong, never a 500 or
    an HTML page."""
    headers = {"Authorization": f"Bearer {scripted_gateway.secret}", "Content-Type": "application/json"}
    bodies = [
        "[" * 1000 + "]" * 1000,
        '{"model": "' + MODEL + '", "input": ' + '{"a":' * 1000 + "1" + "}" * 1000 + "}",
        "not json",
    ]
    for body in bodies:
        answer = requests.post(
            f"{scripted_gateway.base}/v1/responses", data=body.encode(), headers=headers, timeout=30
        )
        assert 400 <= answer.status_code < 500, (body[:40], answer.status_code, answer.text[:200])
        error = answer.json()["error"]
        assert error["message"] and error["type"], error
