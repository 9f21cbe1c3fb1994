"""On the sandbox, which fails like a kubelet: a role's extra arg the engine does not know and an env
var from a Secret that does not exist stop the deploy, and the diagnosis names each with its fix."""

from __future__ import annotations

import copy

import pytest

from deployments.models import State
from deployments.tests.sandbox_helpers import deploy_now

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fast_deploys")]


def test_an_unknown_engine_flag_and_a_missing_secret_are_named_with_their_fixes(new_topology, operator):
    from topologies.presets import preset_spec

    roles = copy.deepcopy(preset_spec("deepseek-ascend-mooncake")["roles"])
    roles["decode"]["extra_args"] = [*roles["decode"].get("extra_args", []), "--bogus-flag"]
    roles["prefill"]["env"] = {**roles["prefill"].get("env", {}), "HF_TOKEN": "secret:hf-token/token"}
    topology = new_topology(roles=roles)

    deployment = deploy_now(topology, operator)

    assert deployment.state == State.FAILED, (deployment.state, deployment.diagnosis)
    found = {d["code"]: d for d in deployment.diagnosis}
    assert set(found) == {"engine_argument_rejected", "secret_missing"}, deployment.diagnosis
    rejected = found["engine_argument_rejected"]
    assert rejected["message"].startswith("The decode engine rejected argument `--bogus-flag`")
    # The engine's own words (vLLM 0.32.0's argparse), quoted from the pod's log.
    assert '"vllm: error: unrecognized arguments: --bogus-flag"' in rejected["message"]
    assert rejected["fix"].startswith("Remove `--bogus-flag` from the decode role's extra args")
    assert rejected["pods"] and all("decode" in pod for pod in rejected["pods"])
    secret = found["secret_missing"]
    assert secret["message"] == (
        "The prefill pods cannot start (CreateContainerConfigError): Secret `hf-token` not found in "
        f"namespace `{topology.namespace}`."
    )
    assert f"kubectl create secret generic hf-token -n {topology.namespace}" in secret["fix"]
    assert "fix the reference in the prefill env" in secret["fix"]
    # Preflight could not know: Tandem holds no permission on Secrets, and it said so.
    steps = [s.message for s in deployment.steps.all()]
    assert any(
        m.startswith("Preflight passed with") and "cannot verify Secret hf-token" in m for m in steps
    ), steps
