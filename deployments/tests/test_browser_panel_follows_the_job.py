"""The Deployments panel in a browser, driven by the topology socket's messages: the Cancel button goes the
moment the job's final state arrives, and the panel (pod rows included) is read again whenever the ready
count changes, so the state line, the pods and the buttons agree."""

from __future__ import annotations

import os

import pytest

from deployments.models import Deployment, State
from deployments.services import deployment_start

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

# Keeps the handlers the page's scripts give Tandem.live for the topology's socket, so the test can deliver
# its messages itself (the test server serves no websockets).
CAPTURE = """
(() => {
  let tandem;
  Object.defineProperty(window, "Tandem", {
    configurable: true,
    get() { return tandem; },
    set(value) {
      tandem = value;
      if (value && value.live && !value.live.captured) {
        const real = value.live;
        const live = function (path, handlers) {
          if (path.indexOf("/ws/topologies/") === 0) { (window.__topologyHandlers ||= []).push(handlers); }
          return real.apply(this, arguments);
        };
        live.captured = true;
        value.live = live;
      }
    },
  });
})();
"""


SEND = "m => window.__topologyHandlers.forEach(h => h.onMessage && h.onMessage(m))"


def _message(
    deployment: Deployment, state: str, label: str, ready: int, message: str = ""
) -> dict[str, object]:
    return {
        "kind": "deployment",
        "id": deployment.pk,
        "state": state,
        "state_label": label,
        "percent": 50 * ready,
        "ready": ready,
        "total": 2,
        "message": message,
    }


def test_cancel_goes_with_the_final_state_and_the_panel_follows_the_count(
    page, live_server, client, operator, topology
):
    deployment = deployment_start(topology=topology, actor=operator, source_ip="127.0.0.1")
    Deployment.objects.filter(pk=deployment.pk).update(state=State.WAITING, pods_ready=0, pods_total=2)
    client.force_login(operator)
    page.context.add_cookies(
        [{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": live_server.url}]
    )
    page.add_init_script(CAPTURE)
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(f"{live_server.url}/topologies/{topology.pk}/")
    page.wait_for_function("window.__topologyHandlers !== undefined")
    cancel = page.locator("#deployments form[action$='/cancel/']")
    assert cancel.count() == 1
    panel_url = f"/deployments/topology/{topology.pk}/panel/"

    # One more pod Ready: the panel is read again (its pod rows with it).
    with page.expect_request(lambda r: r.url.endswith(panel_url), timeout=5_000):
        said = page.evaluate(
            """m => { window.__topologyHandlers.forEach(h => h.onMessage && h.onMessage(m));
                      return document.querySelector("#deployments [data-role=message]").innerHTML; }""",
            _message(deployment, "waiting", "Waiting", 1, "pulling `vllm:v1` on node-a"),
        )
    assert said == "pulling <code>vllm:v1</code> on node-a"  # as the server writes it, no backticks

    Deployment.objects.filter(pk=deployment.pk).update(state=State.SUCCEEDED, pods_ready=2)
    # The final state: Cancel is gone at once, before the fresh panel arrives.
    left = page.evaluate(
        """m => { window.__topologyHandlers.forEach(h => h.onMessage && h.onMessage(m));
                  return document.querySelectorAll("#deployments form[action$='/cancel/']").length; }""",
        _message(deployment, "succeeded", "Succeeded", 2),
    )
    assert left == 0
    # The read asked for by the count change may answer after the final message: the panel never goes
    # back to the running job (its state, its count, its Cancel button).
    for _ in range(20):
        seen = page.evaluate(
            """() => [document.querySelector('#deployments [data-role=state]').textContent.trim(),
                      document.querySelector('#deployments [data-role=count]').textContent.trim(),
                      document.querySelectorAll("#deployments form[action$='/cancel/']").length]"""
        )
        assert seen == ["Succeeded", "2/2 pods ready", 0], seen
        page.wait_for_timeout(50)
