"""The in-place switch reads MindIE's answers in every shape MindIE's own code has (docs/ascend.md).

Each body below is built as the cited source builds it (field names, nesting, values)."""

from __future__ import annotations

from dataclasses import replace

from rebalancing.inplace import (
    Instance,
    busy_count,
    engine_refusal,
    instance_id,
    link_states,
    role_accepted,
    status_problem,
)

PREFILL = Instance(name="demo-prefill-0", ip="10.0.0.5", serving="prefill", template="prefill")
OTHER = replace(PREFILL, name="demo-prefill-1", ip="10.0.0.6")

# MindIE-LLM src/server/endpoint/http_wrapper/http_handler.cpp HandleStatusV1 + SetJsonObj
# (Ascend/MindIE-LLM 8b4871ad31f5): linkStatus.peers[] of {target: instance id, link: status text};
# dmi_role.cpp writes "ok", "failed : <pd_error_code>" and "failed : pull kv failed.".
RESOURCE = {
    "availSlotsNum": 200,
    "availBlockNum": 1024,
    "waitingRequestNum": 0,
    "runningRequestNum": 0,
    "swappedRequestNum": 0,
    "freeNpuBlockNums": 1024,
    "freeCpuBlockNums": 0,
    "totalNpuBlockNums": 1024,
    "totalCpuBlockNums": 0,
}


def server_status(role: str, links: list[tuple[str, str]], role_status: str = "RoleReady") -> dict:
    return {
        "service": {"roleStatus": role_status, "currentRole": role},
        "resource": RESOURCE,
        "linkStatus": {"peers": [{"target": instance_id(name), "link": link} for name, link in links]},
    }


# MindIE-Motor tests/ms/dt/common/mindie_server/MindIEServer.cpp StatusHandler (Ascend/MindIE-Motor
# 5dfb024e45fe): no linkStatus; on a decode a top-level "peers" list of the peers' server_ip.
def mock_status(role: str, peer_ips: list[str] | None) -> dict:
    body: dict = {"service": {"roleStatus": "RoleReady", "currentRole": role}, "resource": RESOURCE}
    if peer_ips is not None:
        body["peers"] = peer_ips
    return body


def test_the_servers_link_status_decides_each_peer_by_instance_id():
    ready = server_status("decode", [(PREFILL.name, "ok"), (OTHER.name, "ok")])
    assert status_problem(ready, "decode", [PREFILL, OTHER]) == ""
    failed = server_status("decode", [(PREFILL.name, "ok"), (OTHER.name, "failed : 9")])
    assert "demo-prefill-1: failed : 9" in status_problem(failed, "decode", [PREFILL, OTHER])
    pulled = server_status("decode", [(PREFILL.name, "failed : pull kv failed.")])
    assert "pull kv failed" in status_problem(pulled, "decode", [PREFILL])
    assert "RoleSwitching" in status_problem(server_status("decode", [], "RoleSwitching"), "decode", [])
    assert link_states(server_status("decode", []), [PREFILL]) == {PREFILL.name: "not linked"}


def test_the_mock_shape_counts_a_listed_server_ip_as_linked():
    assert status_problem(mock_status("decode", [PREFILL.ip, OTHER.ip]), "decode", [PREFILL, OTHER]) == ""
    problem = status_problem(mock_status("decode", [PREFILL.ip]), "decode", [PREFILL, OTHER])
    assert problem == "links not up (demo-prefill-1: not linked)"
    # The mock's prefill lists no peers: a prefill's links are its decodes' to open.
    assert status_problem(mock_status("prefill", None), "prefill", [PREFILL]) == ""
    assert "neither linkStatus" in status_problem(mock_status("decode", None), "decode", [PREFILL])


def test_refusals_in_mindies_error_shape_keep_the_text_and_any_llm_code():
    # dmi_role.cpp HandlePDRoleV1: 422 / 503 with HttpRestResource::WrapperJson (error, error_type).
    unreadable = {
        "error": "Req body converts to json fail. Reset to previous node status.",
        "error_type": "Input validation error",
    }
    assert engine_refusal(422, unreadable) == ("http_422", unreadable["error"])
    update = {
        "error": "Update pd info failed. Reset to previous node status.",
        "error_type": "Service Unavailable",
    }
    assert engine_refusal(503, update) == ("http_503", update["error"])
    coded = {
        "error": "switch_role refused: LLM_EXIST_LINK, links to d-0 are open",
        "error_type": "Service Unavailable",
    }
    assert engine_refusal(503, coded)[0] == "LLM_EXIST_LINK"
    assert engine_refusal(503, {"error": "", "error_type": "Service Unavailable"}) == (
        "http_503",
        "Service Unavailable",
    )
    # An engine without the route answers OpenAI-style.
    assert engine_refusal(404, {"error": {"message": "Not Found: /v1/role/decode"}})[1].startswith(
        "Not Found"
    )


def test_only_result_ok_accepts_a_role_assignment():
    # dmi_role.cpp ProcessPDRoleSwitch answers 200 {"result": "ok"}; MindIE-MS's controller
    # (ServerRequestHandler::LoopPostPDRole) retries any other 200 answer.
    assert role_accepted(200, {"result": "ok"})
    assert not role_accepted(200, {"result": "switching"})
    assert not role_accepted(200, None)
    assert not role_accepted(503, {"result": "ok"})


def test_busy_counts_come_from_v1_status_and_a_v2_answer_says_nothing():
    busy = {**RESOURCE, "runningRequestNum": 2, "waitingRequestNum": 1}
    assert busy_count(server_status("decode", []) | {"resource": busy}) == 3
    assert busy_count(mock_status("decode", [])) == 0
    # HandleStatusV2 (multi-node): slots and blocks only; never read as idle
    v2 = {"totalAvailNpuSlotsNum": 200, "totalAvailNpuBlockNum": 1024, "maxAvailNpuBlockNum": 1024}
    assert (
        busy_count({"service": {"roleStatus": "RoleReady", "currentRole": "decode"}, "resource": v2}) is None
    )
