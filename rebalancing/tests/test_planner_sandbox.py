"""The planner in auto mode against the sandbox, on the telemetry Tandem collects: under a prompt-heavy phase
from the workload generator it moves capacity toward prefill, under the generation-heavy phase back toward
decode, within the budget and bounds throughout.

Decode steps here cost 2 ms per running sequence (``SANDBOX_DECODE_MS_PER_SEQ``), so the decode batch's
size shows in ITL the way a larger model's does: in the generation-heavy phase (3 req/s of 256-token
answers) two decode instances run well above the 60 ms ITL target; in the prompt-heavy phase one prefill
instance computes 6000-token prompts at about 2 req/s, so 3 req/s queue up while decode has room."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest
from django.db import connection

from deployments import runner
from deployments.models import ACTIVE_STATES, Deployment, State
from deployments.tests.sandbox_helpers import deploy_now
from rebalancing.models import Decision, Outcome, PlannerMode, Rebalance
from rebalancing.services import planner_config_set, planner_tick_all

pytestmark = [pytest.mark.usefixtures("fast_deploys"), pytest.mark.django_db(transaction=True)]

# The engines run at twice the speed (the sandbox's time scale), and the load, the SLO targets and the
# planner's intervals are scaled with them: the same story in half the wall time.
SCALE = 0.5


def _router_url(sandbox, namespace: str) -> str:
    out = sandbox.kubectl("get", "modelroutes", "-n", namespace, "-o", "json")
    return str(json.loads(out.stdout)["items"][0]["metadata"]["annotations"]["sandbox.tandem.io/router-url"])


class DeployWorker(threading.Thread):
    """Runs queued deployments of one topology, as a deploy worker would."""

    def __init__(self, topology_id: int) -> None:
        super().__init__(daemon=True)
        self.topology_id = topology_id
        self.halt = threading.Event()

    def run(self) -> None:
        try:
            while not self.halt.wait(0.3):
                for deployment in Deployment.objects.filter(
                    topology_id=self.topology_id, state__in=ACTIVE_STATES
                ):
                    runner.run(deployment.pk, worker="test-deploy-worker")
        finally:
            connection.close()


def test_auto_planner_follows_prompt_then_generation_heavy_load(sandbox_topology, operator, gpu_sandbox, lab):
    from clusters.selectors import cluster_connection
    from rebalancing.tests.test_rebalance_sandbox import roles
    from sandbox.load.runner import run_load
    from telemetry.services import telemetry_collect

    topology = sandbox_topology(
        budget=4,
        replicas=(1, 3),
        env={"SANDBOX_DECODE_MS_PER_SEQ": "2", "SANDBOX_TIME_SCALE": str(SCALE)},
        slo=(round(1500 * SCALE), round(60 * SCALE)),
    )
    assert deploy_now(topology, operator).state == State.SUCCEEDED
    planner_config_set(
        topology=topology,
        mode=PlannerMode.AUTO,
        params={
            "interval_seconds": 1,
            "breach_intervals": 2,
            "cooldown_seconds": 2,
            "flap_window_seconds": 5,
        },
        min_ratio=None,
        max_ratio=None,
        actor=operator,
        source_ip=None,
    )
    url = _router_url(gpu_sandbox, topology.namespace)
    reports = []
    load = threading.Thread(
        target=lambda: reports.append(
            asyncio.run(
                run_load(
                    url,
                    topology.model_name,
                    rate=3 / SCALE,
                    duration=110 * SCALE,
                    pattern="phase",
                    phase_seconds=55 * SCALE,
                    prompt_tokens=1500,
                    max_tokens=64,
                    request_timeout=120,
                )
            )
        ),
        daemon=True,
    )
    worker = DeployWorker(topology.pk)
    worker.start()
    load.start()
    conn = cluster_connection(lab)
    seen: list[tuple[float, int, int]] = []
    started = time.monotonic()
    try:
        while load.is_alive() and time.monotonic() - started < 150 * SCALE:
            telemetry_collect(topology_id=topology.pk)
            planner_tick_all()
            current = roles(conn, topology)
            seen.append(
                (time.monotonic() - started, len(current.get("prefill", [])), len(current.get("decode", [])))
            )
            time.sleep(2 * SCALE)
    finally:
        worker.halt.set()
        worker.join(30)
    load.join(30)
    decisions = list(Decision.objects.filter(topology=topology).order_by("created"))
    moves = [d for d in decisions if d.outcome in (Outcome.STARTED, Outcome.SUCCEEDED)]
    story = [
        (round(d.created.timestamp() - decisions[0].created.timestamp()), d.rule, d.action, d.explanation)
        for d in decisions
    ]
    assert moves, story
    assert moves[0].action == "move_to_prefill", story
    assert any(d.action == "move_to_decode" for d in moves[1:]), story
    for d in decisions:
        assert d.to_prefill + d.to_decode <= 4 and 1 <= d.to_prefill <= 3 and 1 <= d.to_decode <= 3
    assert all(p + d <= 4 for _, p, d in seen), seen
    assert {r.state for r in Rebalance.objects.filter(topology=topology)} <= {"succeeded", "running"}
    [report] = reports
    assert report.failed == 0, report.errors


def test_auto_mode_is_the_one_owner_of_the_replicas(sandbox_topology, operator, gpu_sandbox):
    """An HPA on the ModelServing refuses auto mode with what to do; once it is gone auto starts, and a
    `kubectl scale` while it runs pauses it, naming kubectl and the change (the sandbox keeps managedFields
    as a real API server does: the manager from kubectl's User-Agent, the scale subresource)."""
    from audit.models import AuditEvent
    from controlplane.api.errors import Conflict
    from rebalancing.api.serializers import PlannerSerializer
    from rebalancing.services import planner_handoff, planner_tick

    topology = sandbox_topology(budget=4, replicas=(1, 1))
    assert deploy_now(topology, operator).state == State.SUCCEEDED
    ns, name = topology.namespace, topology.spec["name"]
    hpa = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": f"{name}-hpa", "namespace": ns},
        "spec": {
            "scaleTargetRef": {
                "apiVersion": "workload.serving.volcano.sh/v1alpha1",
                "kind": "ModelServing",
                "name": name,
            },
            "minReplicas": 1,
            "maxReplicas": 3,
        },
    }
    created = gpu_sandbox.kubectl("create", "-f", "-", input=json.dumps(hpa))
    assert created.returncode == 0, created.stderr

    def auto():
        return planner_config_set(
            topology=topology,
            mode=PlannerMode.AUTO,
            params={},
            min_ratio=None,
            max_ratio=None,
            actor=operator,
            source_ip=None,
        )

    with pytest.raises(Conflict) as refused:
        auto()
    assert refused.value.message == (
        f"auto mode not started: HPA {ns}/{name}-hpa scales the prefill and decode replicas (ModelServing "
        f"{ns}/{name}, 1–3): remove it (kubectl delete hpa -n {ns} {name}-hpa) or switch Tandem to advisory"
    )
    assert AuditEvent.objects.filter(action="topology.planner_refused", target_id=str(topology.pk)).exists()

    assert gpu_sandbox.kubectl("delete", "hpa", "-n", ns, f"{name}-hpa").returncode == 0
    config = auto()
    assert config.mode == PlannerMode.AUTO and not config.paused_reason
    planner_tick(config=config)  # Tandem's own state of the replicas: nothing to say
    config.refresh_from_db()
    assert not config.paused_reason

    scaled = gpu_sandbox.kubectl("scale", f"modelserving/{name}", "-n", ns, "--replicas=2")
    assert scaled.returncode == 0, scaled.stderr
    planner_tick(config=config)
    config.refresh_from_db()
    assert config.paused_reason.startswith(
        f"kubectl changed ModelServing {ns}/{name} spec.replicas 1 → 2 (prefill 1 → 2; decode 1 → 2; "
        "Update via /scale at "
    ), config.paused_reason
    pause = Decision.objects.get(topology=topology, rule="other_owner")
    assert pause.outcome == Outcome.PAUSED and pause.explanation == f"auto paused: {config.paused_reason}"
    assert AuditEvent.objects.filter(action="topology.planner_paused", target_id=str(topology.pk)).exists()
    shown = PlannerSerializer(config).data
    assert shown["paused_reason"] == config.paused_reason
    assert shown["other_owners"][0]["name"] == "kubectl"
    assert shown["other_owners"][0]["change"] == {"prefill": [1, 2], "decode": [1, 2]}
    # paused, the planner acts as advisory: another tick adds no second pause and starts nothing
    planner_tick(config=config)
    assert Decision.objects.filter(topology=topology, rule="other_owner").count() == 1
    assert not Rebalance.objects.filter(topology=topology).exists()

    # A Kthena AutoscalingPolicy scaling both roles: resuming is refused, and the bounds can be handed to it
    policy = {
        "apiVersion": "workload.serving.volcano.sh/v1alpha1",
        "kind": "AutoscalingPolicy",
        "metadata": {"name": f"{name}-pd", "namespace": ns},
        "spec": {
            "metrics": [{"name": "rps", "targetValue": "1"}],
            "disaggregatedTarget": {
                "targetRef": {"kind": "ModelServing", "name": name},
                "roles": {
                    "prefill": {"minReplicas": 1, "maxReplicas": 2},
                    "decode": {"minReplicas": 1, "maxReplicas": 3},
                },
            },
        },
    }
    created = gpu_sandbox.kubectl("create", "-f", "-", input=json.dumps(policy))
    assert created.returncode == 0, created.stderr
    with pytest.raises(Conflict) as refused:
        auto()
    assert (
        f"Kthena AutoscalingPolicy {ns}/{name}-pd scales the prefill and decode replicas"
        in refused.value.message
    )
    config.refresh_from_db()
    assert [o["handoff"] for o in config.other_owners] == [f"{name}-pd"]
    planner_config_set(
        topology=topology,
        mode=PlannerMode.ADVISORY,
        params={},
        min_ratio=0.5,
        max_ratio=2,
        actor=operator,
        source_ip=None,
    )
    handed = planner_handoff(topology=topology, policy=f"{name}-pd", actor=operator, source_ip=None)
    assert handed.mode == PlannerMode.ADVISORY
    live = json.loads(
        gpu_sandbox.kubectl("get", "autoscalingpolicy", f"{name}-pd", "-n", ns, "-o", "json").stdout
    )
    assert live["spec"]["disaggregatedTarget"]["ratioConstraint"] == {
        "numeratorRole": "prefill",
        "denominatorRole": "decode",
        "minRatio": "0.5",
        "maxRatio": "2",
    }
    assert AuditEvent.objects.filter(action="topology.planner_handoff", target_id=str(topology.pk)).exists()
