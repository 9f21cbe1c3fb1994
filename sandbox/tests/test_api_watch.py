"""Watch: event types, resuming from a resourceVersion, timeoutSeconds, bookmarks, 410 Gone."""

from __future__ import annotations

import json
import threading
import time

import pytest
import requests
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from sandbox.testing import SandboxCluster


def test_watch_streams_added_modified_deleted_in_order(sandbox_cluster, namespace):
    core = client.CoreV1Api(sandbox_cluster.api_client())
    start_rv = core.list_namespaced_config_map(namespace).metadata.resource_version

    def writer():
        time.sleep(0.2)
        core.create_namespaced_config_map(namespace, {"metadata": {"name": "w"}, "data": {"a": "1"}})
        core.patch_namespaced_config_map("w", namespace, {"data": {"a": "2"}})
        core.delete_namespaced_config_map("w", namespace)

    threading.Thread(target=writer).start()
    seen = []
    stream = watch.Watch()
    for event in stream.stream(
        core.list_namespaced_config_map, namespace, resource_version=start_rv, timeout_seconds=5
    ):
        seen.append((event["type"], event["object"].metadata.name, event["object"].data))
        if event["type"] == "DELETED":
            stream.stop()
    assert seen == [("ADDED", "w", {"a": "1"}), ("MODIFIED", "w", {"a": "2"}), ("DELETED", "w", {"a": "2"})]


def test_watch_from_resource_version_replays_what_happened_after_it(sandbox_cluster, namespace):
    core = client.CoreV1Api(sandbox_cluster.api_client())
    rv = core.create_namespaced_config_map(
        namespace, {"metadata": {"name": "before"}}
    ).metadata.resource_version
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "after"}})
    events = list(
        watch.Watch().stream(
            core.list_namespaced_config_map, namespace, resource_version=rv, timeout_seconds=1
        )
    )
    assert [(e["type"], e["object"].metadata.name) for e in events] == [("ADDED", "after")]


def test_watch_without_resource_version_starts_with_current_objects(sandbox_cluster, namespace):
    core = client.CoreV1Api(sandbox_cluster.api_client())
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "existing"}})
    events = list(watch.Watch().stream(core.list_namespaced_config_map, namespace, timeout_seconds=1))
    assert [(e["type"], e["object"].metadata.name) for e in events] == [("ADDED", "existing")]


def test_watch_honours_timeout_seconds(sandbox_cluster, namespace):
    started = time.monotonic()
    response = requests.get(
        f"{sandbox_cluster.server}/api/v1/namespaces/{namespace}/configmaps",
        params={"watch": "1", "timeoutSeconds": "1", "resourceVersion": "0"},
        headers={"Authorization": f"Bearer {sandbox_cluster.token}"},
        timeout=10,
    )
    elapsed = time.monotonic() - started
    assert response.status_code == 200
    assert 0.9 <= elapsed < 3


def test_watch_label_selector_turns_unmatching_updates_into_deleted(sandbox_cluster, namespace):
    core = client.CoreV1Api(sandbox_cluster.api_client())
    rv = core.create_namespaced_config_map(
        namespace, {"metadata": {"name": "m", "labels": {"keep": "yes"}}}
    ).metadata.resource_version
    core.patch_namespaced_config_map("m", namespace, {"metadata": {"labels": {"keep": "no"}}})
    events = list(
        watch.Watch().stream(
            core.list_namespaced_config_map,
            namespace,
            label_selector="keep=yes",
            resource_version=rv,
            timeout_seconds=1,
        )
    )
    assert [(e["type"], e["object"].metadata.labels["keep"]) for e in events] == [("DELETED", "no")]


def test_watch_sends_bookmarks_when_asked(sandbox_cluster, namespace):
    response = requests.get(
        f"{sandbox_cluster.server}/api/v1/namespaces/{namespace}/configmaps",
        params={
            "watch": "true",
            "timeoutSeconds": "1",
            "allowWatchBookmarks": "true",
            "resourceVersion": "0",
        },
        headers={"Authorization": f"Bearer {sandbox_cluster.token}"},
        timeout=10,
    )
    lines = [json.loads(line) for line in response.text.splitlines() if line]
    assert lines[-1]["type"] == "BOOKMARK"
    assert int(lines[-1]["object"]["metadata"]["resourceVersion"]) > 0


def test_watch_from_a_resource_version_older_than_the_window_is_410_gone():
    with SandboxCluster(nodes=1, kthena=False, extra_args=["--watch-window", "20"]) as cluster:
        core = client.CoreV1Api(cluster.api_client())
        old_rv = core.list_namespaced_config_map("default").metadata.resource_version
        for index in range(30):
            core.create_namespaced_config_map("default", {"metadata": {"name": f"fill-{index}"}})
        raw = requests.get(
            f"{cluster.server}/api/v1/namespaces/default/configmaps",
            params={"watch": "1", "resourceVersion": old_rv, "timeoutSeconds": "2"},
            headers={"Authorization": f"Bearer {cluster.token}"},
            timeout=10,
        )
        event = json.loads(raw.text.splitlines()[0])
        assert event["type"] == "ERROR"
        assert event["object"]["code"] == 410
        assert event["object"]["reason"] == "Expired"
        assert event["object"]["message"].startswith(f"too old resource version: {old_rv} (")
        with pytest.raises(ApiException) as exc:
            for _ in watch.Watch().stream(
                core.list_namespaced_config_map, "default", resource_version=old_rv, timeout_seconds=2
            ):
                pass
        assert exc.value.status == 410
