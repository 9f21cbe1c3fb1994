"""Who owns a deployment job is decided by the database: a conditional UPDATE claims it, a stale heartbeat
lets another worker take over, and the reaper resumes (or gives up on) jobs whose workers died."""

from __future__ import annotations

from datetime import timedelta

import pytest
import redis
from django.utils import timezone

from deployments.job import claim
from deployments.models import Deployment, State
from deployments.services import deployment_start
from deployments.tasks import reap_deployments


@pytest.fixture
def queued(topology, operator):
    return deployment_start(topology=topology, actor=operator, source_ip=None)


def test_first_claim_wins_and_a_live_owner_makes_others_wait(queued):
    assert claim(queued.pk, "worker-a") == "claimed"
    assert claim(queued.pk, "worker-b") == "busy"
    queued.refresh_from_db()
    assert queued.claimed_by == "worker-a" and queued.attempts == 1 and queued.started is not None


def test_a_stale_heartbeat_lets_another_worker_resume(queued, settings):
    settings.DEPLOY_HEARTBEAT_STALE_SECONDS = 30
    assert claim(queued.pk, "worker-a") == "claimed"
    Deployment.objects.filter(pk=queued.pk).update(
        state=State.WAITING, heartbeat=timezone.now() - timedelta(seconds=31)
    )
    assert claim(queued.pk, "worker-b") == "claimed"
    queued.refresh_from_db()
    assert queued.claimed_by == "worker-b" and queued.attempts == 2 and queued.state == State.WAITING


def test_finished_and_missing_jobs_are_not_claimed(queued):
    Deployment.objects.filter(pk=queued.pk).update(state=State.SUCCEEDED)
    assert claim(queued.pk, "worker-a") == "done"
    assert claim(999_999, "worker-a") == "missing"


def test_reaper_requeues_orphans_and_fails_hopeless_ones(
    queued, make_topology, operator, settings, django_capture_on_commit_callbacks
):
    settings.DEPLOY_HEARTBEAT_STALE_SECONDS = 30
    settings.DEPLOY_MAX_ATTEMPTS = 3
    broker = redis.Redis.from_url(settings.REDIS_URL)
    before = broker.llen("deploy")
    stale = timezone.now() - timedelta(minutes=5)
    Deployment.objects.filter(pk=queued.pk).update(
        state=State.APPLYING, claimed_by="gone", heartbeat=stale, attempts=1
    )
    hopeless = deployment_start(topology=make_topology(name="other"), actor=operator, source_ip=None)
    Deployment.objects.filter(pk=hopeless.pk).update(
        state=State.WAITING, claimed_by="gone", heartbeat=stale, attempts=3
    )
    fresh = deployment_start(topology=make_topology(name="fresh"), actor=operator, source_ip=None)
    Deployment.objects.filter(pk=fresh.pk).update(
        state=State.WAITING, claimed_by="alive", heartbeat=timezone.now()
    )

    with django_capture_on_commit_callbacks(execute=True):  # the task runs in autocommit: enqueues at once
        assert reap_deployments() == 2
    assert broker.llen("deploy") == before + 1  # the resumable one went back on the deploy queue
    hopeless.refresh_from_db()
    assert hopeless.state == State.FAILED and "lost 3 times" in hopeless.error
    assert Deployment.objects.get(pk=fresh.pk).state == State.WAITING
