"""Simultaneous deploy requests: the database lets exactly one through; the rest get 409 naming it."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from deployments.models import Deployment

pytestmark = pytest.mark.django_db(transaction=True)


def test_concurrent_deploy_requests_get_one_202_and_409s(make_topology, operator):
    from rest_framework.test import APIClient

    topology = make_topology()
    barrier = threading.Barrier(8)
    results: list[tuple[int, dict]] = []
    lock = threading.Lock()

    def request() -> None:
        client = APIClient()
        client.force_authenticate(operator)
        barrier.wait()
        try:
            response = client.post(f"/api/v1/topologies/{topology.pk}/deploy/")
            with lock:
                results.append((response.status_code, response.json()))
        finally:
            connection.close()

    threads = [threading.Thread(target=request) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    codes = sorted(code for code, _ in results)
    assert codes == [202] + [409] * 7, results
    winner = next(body for code, body in results if code == 202)
    for code, body in results:
        if code == 409:
            assert winner["id"] and body["error"]["message"].startswith("the deploy of revision 1 is ")
    assert Deployment.objects.filter(topology=topology).count() == 1
