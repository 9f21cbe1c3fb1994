"""Real requests through the gateway, then the topology page and the key page chart them."""

from __future__ import annotations

import os
import time

import openai
import pytest

from gateway.tests.conftest import FALLBACK_MODEL, MODEL
from telemetry.tests.test_browser_live import browser_type_launch_args, login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
__all__ = ["browser_type_launch_args"]

CLUSTER_RGB = (47, 91, 211)  # gateway-charts.js: cluster series
FALLBACK_RGB = (162, 59, 114)  # fallback series and the "fallback begins" marker
OPEN_RGB = (198, 40, 40)  # "circuit opened" marker (no red series on the requests/s chart)

# How many pixels of each colour the chart's canvas holds: the lines and markers it drew.
PIXELS_JS = """([chart, colours]) => {
  const canvas = document.querySelector(`#${chart} [data-chart="gw-rps"] canvas`);
  const ctx = canvas.getContext('2d');
  const data = ctx.getImageData(0, 0, canvas.width, canvas.height).data;
  const counts = colours.map(() => 0);
  for (let i = 0; i < data.length; i += 4) {
    colours.forEach((c, k) => {
      const near = [0, 1, 2].every((j) => Math.abs(data[i + j] - c[j]) < 12);
      if (near && data[i + 3] > 200) { counts[k] += 1; }
    });
  }
  return counts;
}"""


def _send(client: openai.OpenAI, seconds: float) -> list[str]:
    backends = []
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        raw = client.chat.completions.with_raw_response.create(
            model=MODEL, messages=[{"role": "user", "content": "chart me"}], max_tokens=4
        )
        backends.append(raw.headers["x-tandem-backend"])
        time.sleep(0.2)
    return backends


def _wait_recorded(topology, count: int) -> None:
    from gateway.models import GatewayRequest

    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and GatewayRequest.objects.filter(topology=topology).count() < count:
        time.sleep(0.2)
    assert GatewayRequest.objects.filter(topology=topology).count() >= count


def _charted(page, section: str, requests: int) -> None:
    page.locator(f"#{section} [data-gateway-charts]").scroll_into_view_if_needed()
    page.locator(f"#{section} [data-window='300']").click()
    page.wait_for_function(
        "([s, n]) => +(document.querySelector(`#${s} [data-gateway-charts]`).dataset.requests || 0) >= n",
        arg=[section, requests],
        timeout=20_000,
    )
    page.wait_for_timeout(300)  # one animation frame for uPlot to draw


def test_the_charts_draw_the_requests_the_gateway_recorded(
    page, gateway, admin_user, fallback_stack, cluster_stack
):
    from tests.support import closed_port

    client = openai.OpenAI(base_url=f"{gateway.base}/v1", api_key=gateway.secret, max_retries=0, timeout=30)
    served = _send(client, 12)
    gateway.route(
        endpoint_url=f"http://127.0.0.1:{closed_port()}",
        fallback_base_url=f"{fallback_stack.url}/v1",
        fallback_model=FALLBACK_MODEL,
        breaker_failures=3,
        breaker_open_seconds=30,
    )
    served += _send(client, 10)
    gateway.route(endpoint_url=cluster_stack.url)
    assert set(served) == {"cluster", "fallback"}
    _wait_recorded(gateway.topology, len(served))

    login(page, gateway.base, admin_user)
    page.set_viewport_size({"width": 1400, "height": 1000})
    page.goto(f"{gateway.base}/topologies/{gateway.topology.pk}/#gateway")
    _charted(page, "gateway", len(served))
    summary = page.locator("#gateway [data-gw-summary]").inner_text()
    assert f"{len(served)} requests" in summary and "by the fallback" in summary
    cluster, fallback, opened = page.evaluate(PIXELS_JS, ["gateway", [CLUSTER_RGB, FALLBACK_RGB, OPEN_RGB]])
    assert cluster > 50 and fallback > 50 and opened > 20, (cluster, fallback, opened)
    page.locator("#gateway .gateway-charts").screenshot(path="var/screenshots/gateway-charts-topology.png")
    page.screenshot(path="var/screenshots/gateway-charts-topology-page.png", full_page=True)

    page.goto(f"{gateway.base}/keys/{gateway.key.pk}/")
    _charted(page, "gateway-traffic", len(served))
    cluster, fallback = page.evaluate(PIXELS_JS, ["gateway-traffic", [CLUSTER_RGB, FALLBACK_RGB]])
    assert cluster > 50 and fallback > 50, (cluster, fallback)
    page.locator("#gateway-traffic").screenshot(path="var/screenshots/gateway-charts-key.png")
