"""Real requests through the gateway, then the topology page and the key page chart them."""

from __future__ import annotations

import itertools
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
VERIFICATION_RGB = (109, 75, 209)  # the verification probes' requests/s
TTFT_RGBS = [(47, 91, 211), (15, 123, 138)]  # TTFT p50, p95
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


# Per chart: the x-axis labels as drawn, each with its left and right edge (canvas pixels, measured in
# the axis font): neighbours must not overlap.
LABELS_JS = """(section) => {
  const root = document.querySelector(`#${section} [data-gateway-charts]`);
  const ctx = document.createElement('canvas').getContext('2d');
  return root.tandemCharts.plots().map((u) => {
    const axis = u.axes[0];
    ctx.font = axis.font[0];
    return (axis._splits || []).map((v, i) => {
      const x = u.valToPos(v, 'x', true);
      const w = ctx.measureText(axis._values[i]).width;
      return [axis._values[i], x - w / 2, x + w / 2];
    }).filter((l) => l[0]);
  });
}"""

# How many pixels of the TTFT lines' colours one chart holds in a strip around each given time.
STRIPS_JS = """([section, stamps, colours]) => {
  const root = document.querySelector(`#${section} [data-gateway-charts]`);
  const u = root.tandemCharts.plots()[2];
  const data = u.ctx.getImageData(0, 0, u.ctx.canvas.width, u.ctx.canvas.height).data;
  const width = u.ctx.canvas.width;
  return stamps.map((ts) => {
    const x = Math.round(u.valToPos(ts, 'x', true));
    let n = 0;
    for (let y = Math.round(u.bbox.top); y < u.bbox.top + u.bbox.height; y++) {
      for (let dx = -3; dx <= 3; dx++) {
        const i = (y * width + x + dx) * 4;
        const near = colours.some((c) => [0, 1, 2].every((j) => Math.abs(data[i + j] - c[j]) < 12));
        if (near && data[i + 3] > 200) { n += 1; }
      }
    }
    return n;
  });
}"""


def _labels_apart(page, section: str) -> int:
    """Asserts no two x-axis labels of any chart overlap; returns how many labels the charts drew."""
    charts = page.evaluate(LABELS_JS, section)
    assert len(charts) == 4
    for labels in charts:
        assert len(labels) >= 2, labels
        labels.sort(key=lambda label: label[1])
        for left, right in itertools.pairwise(labels):
            assert left[2] <= right[1], (left, right)
    return sum(len(labels) for labels in charts)


def _verification_with_a_quiet_interval(topology) -> tuple[float, float, float]:
    """Streamed probe requests in two runs, each a request per bucket over four buckets of the window
    the test shows (5 min: 5-s buckets), four empty buckets between them. Returns a time inside the first run,
    inside the quiet interval and inside the second run, each a bucket away from the run's ends."""
    from datetime import UTC, datetime

    from gateway.models import GatewayRequest
    from gateway.series import auto_step

    step = auto_step(300)
    now = time.time()
    first = now - 12 * step
    second = first + 8 * step
    GatewayRequest.objects.bulk_create(
        [
            GatewayRequest(
                created=datetime.fromtimestamp(run + k * step, tz=UTC),
                model=MODEL,
                topology=topology,
                endpoint="chat/completions",
                backend="cluster",
                status=200,
                stream=True,
                ttft_ms=40.0 + 10 * k,
                latency_ms=90.0,
                probe=True,
            )
            for run in (first, second)
            for k in range(4)
        ]
    )
    return first + 1.5 * step, first + 5.5 * step, second + 1.5 * step


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
    before, quiet, after = _verification_with_a_quiet_interval(gateway.topology)

    login(page, gateway.base, admin_user)
    page.set_viewport_size({"width": 1440, "height": 1000})
    page.goto(f"{gateway.base}/topologies/{gateway.topology.pk}/#gateway")
    _charted(page, "gateway", len(served) + 8)
    summary = page.locator("#gateway [data-gw-summary]").inner_text()
    assert f"{len(served) + 8} requests incl. 8 verification" in summary and "by the fallback" in summary
    cluster, fallback, opened, probes = page.evaluate(
        PIXELS_JS, ["gateway", [CLUSTER_RGB, FALLBACK_RGB, OPEN_RGB, VERIFICATION_RGB]]
    )
    assert cluster > 50 and fallback > 50 and opened > 20 and probes > 20, (cluster, fallback, opened, probes)
    # TTFT is drawn where streamed requests were answered and broken where none were (no line across).
    drawn_before, drawn_quiet, drawn_after = page.evaluate(
        STRIPS_JS, ["gateway", [before, quiet, after], TTFT_RGBS]
    )
    assert drawn_before > 0 and drawn_after > 0 and drawn_quiet == 0, (drawn_before, drawn_quiet, drawn_after)
    wide = _labels_apart(page, "gateway")
    page.locator("#gateway .gateway-charts").screenshot(path="var/screenshots/gateway-charts-topology.png")
    page.screenshot(path="var/screenshots/gateway-charts-topology-page.png", full_page=True)
    page.set_viewport_size({"width": 390, "height": 844})
    page.wait_for_timeout(300)  # the charts take the new width on the resize event
    assert _labels_apart(page, "gateway") < wide  # fewer ticks, still apart
    page.locator("#gateway .gateway-charts").screenshot(
        path="var/screenshots/gateway-charts-topology-390.png"
    )
    page.set_viewport_size({"width": 1440, "height": 1000})

    page.goto(f"{gateway.base}/keys/{gateway.key.pk}/")
    _charted(page, "gateway-traffic", len(served))
    cluster, fallback = page.evaluate(PIXELS_JS, ["gateway-traffic", [CLUSTER_RGB, FALLBACK_RGB]])
    assert cluster > 50 and fallback > 50, (cluster, fallback)
    # No verification line nor its legend: the probes never use a person's key.
    assert "verification" not in page.locator("#gateway-traffic").inner_text().lower()
    page.locator("#gateway-traffic").screenshot(path="var/screenshots/gateway-charts-key.png")
