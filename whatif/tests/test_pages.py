"""The what-if page's forms: a refused start says which field and how to fix it; operators start and cancel
from the page; viewers read it without buttons."""

from __future__ import annotations

from django.test import Client

from whatif.models import WhatIfRun, WhatIfState


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_operators_start_and_cancel_from_the_page_and_refusals_name_the_fix(make_topology, operator, viewer):
    topology = make_topology(budget=4)
    client = _client(operator)
    page = client.get(f"/what-if/topology/{topology.pk}/").content.decode()
    assert 'value="1x3" checked' in page and 'value="3x1" checked' in page
    refused = client.post(
        f"/what-if/topology/{topology.pk}/start/", {"window_seconds": "900", "split": "4x4"}, follow=True
    ).content.decode()
    assert "What-if not started" in refused and "4P/4D not within the budget and bounds" in refused
    started = client.post(
        f"/what-if/topology/{topology.pk}/start/",
        {"window_seconds": "900", "split": ["2x2", "3x1"]},
        follow=True,
    ).content.decode()
    run = WhatIfRun.objects.get(topology=topology)
    assert (
        run.splits == [[2, 2], [3, 1]] and f"What-if #{run.pk} queued" in started and "data-cancel" in started
    )
    assert f'What-if <a href="?run={run.pk}">#{run.pk}</a> is queued' in started  # the start button waits
    assert "data-cancel" not in _client(viewer).get(f"/what-if/topology/{topology.pk}/").content.decode()
    cancelled = client.post(f"/what-if/run/{run.pk}/cancel/", follow=True).content.decode()
    run.refresh_from_db()
    assert run.state == WhatIfState.CANCELLED and "cancelled by operator" in cancelled


def test_an_uncalibrated_result_shows_the_table_marked_and_says_what_to_run(make_topology, record, operator):
    from whatif import services

    topology = make_topology(budget=2)
    record(topology)
    run = services.whatif_run_create(topology=topology, user=operator, window_seconds=300, splits=[(1, 1)])
    services.whatif_run_execute(run_id=run.pk)
    page = _client(operator).get(f"/what-if/topology/{topology.pk}/?run={run.pk}").content.decode()
    assert "data-uncalibrated" in page and "No split is recommended" in page
    assert "run the verification probes&#x27; concurrency load for 2 minutes" in page
    assert "Uncalibrated: simulated on nominal rates, for comparison only" in page
    assert "data-recommended" not in page and page.count("data-apply") == 1  # the row, still appliable
    assert 'data-verdict="not enough data"' in page and "— (uncalibrated)" in page


def test_operators_start_a_what_if_on_an_uploaded_trace_and_a_bad_file_is_refused(make_topology, operator):
    from django.core.files.uploadedfile import SimpleUploadedFile

    topology = make_topology(budget=2)
    client = _client(operator)
    assert 'name="trace"' in client.get(f"/what-if/topology/{topology.pk}/").content.decode()
    url = f"/what-if/topology/{topology.pk}/start/"
    bad = SimpleUploadedFile("t.csv", b"TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.1,x,5\n")
    refused = client.post(url, {"window_seconds": "900", "trace": bad}, follow=True).content.decode()
    assert "What-if not started" in refused and "line 2, ContextTokens: must be a whole number" in refused
    assert not WhatIfRun.objects.exists()
    good = SimpleUploadedFile(
        "azure.csv",
        b"TIMESTAMP,ContextTokens,GeneratedTokens\n"
        + b"".join(f"2023-11-16 18:17:{i:02d}.5,{400 + i},{20 + i}\n".encode() for i in range(30)),
    )
    client.post(url, {"window_seconds": "900", "trace": good}, follow=True)
    run = WhatIfRun.objects.get(topology=topology)
    assert {k: run.trace[k] for k in ("file_format", "name", "total")} == {
        "file_format": "azure",
        "name": "azure.csv",
        "total": 30,
    }
    assert run.trace["requests"][1] == [1000, 401, 21, ""]
