"""Calibration recovers an engine's rates from Tandem's own telemetry: a P/D topology in the sandbox whose
engines were set to rates far from the nominal model (``SANDBOX_*`` in the spec's env), under load at a few
concurrencies and prompt lengths, collected every interval as beat does; the fit, from the stored series
alone, finds the configured rates (not the nominal ones) within the tolerances below."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from django.conf import settings

from perfmodel.calibration import NOMINAL
from perfmodel.selectors import topology_calibration
from telemetry import services as telemetry_services
from telemetry.testing import deploy_ready, undeploy
from telemetry.tests.test_collect_sandbox import router_url
from topologies.presets import preset_spec

# The engines' configured rates, each well away from the nominal model's.
RATES = {
    "SANDBOX_PREFILL_MS_PER_TOKEN": 0.2,  # nominal 0.08
    "SANDBOX_DECODE_STEP_MS": 20.0,  # nominal 12
    "SANDBOX_DECODE_MS_PER_SEQ": 1.0,  # nominal 0.25
}
# Tolerances: the fit reads p50s from histogram buckets and rates from counters over 2 s intervals.
PREFILL_TOLERANCE = 0.25
STEP_TOLERANCE = 0.25
PER_SEQ_TOLERANCE = 0.5
# (requests/s, prompt tokens, output tokens, seconds), Poisson arrivals: prefill-heavy below half the
# prefill's capacity (several requests in every 2 s interval), then decode batches of a few and of many.
PHASES = ((4.0, 500, 8, 8.0), (2.0, 1000, 8, 8.0), (2.0, 300, 120, 8.0), (6.0, 300, 120, 8.0))


@pytest.fixture
def deployed(sandbox_cluster, db, operator):  # type: ignore[no-untyped-def]
    spec = preset_spec("deepseek-ascend-mooncake")
    for role in ("prefill", "decode"):
        # one engine per pod, so the configured rates are the pod's (TP divides the prefill's time)
        spec["roles"][role].update(tensor_parallel_size=1, data_parallel_size=1, accelerator_count=1)
        spec["roles"][role]["env"] = {
            **(spec["roles"][role].get("env") or {}),
            **{k: str(v) for k, v in RATES.items()},
        }
    ready = deploy_ready(sandbox_cluster, operator, prefix="cal", spec=spec)
    yield ready.topology, router_url(ready.conn, ready.namespace)
    undeploy(sandbox_cluster, ready.namespace)


def _load(url: str, model: str) -> None:
    from sandbox.load.runner import run_load

    for rate, prompt, output, seconds in PHASES:
        report = asyncio.run(
            run_load(
                url,
                model,
                rate=rate,
                duration=seconds,
                pattern="poisson",
                prompt_tokens=prompt,
                max_tokens=output,
                chat=False,
                seed=int(rate * 10),
            )
        )
        assert report.failed == 0, report


def _near(value: float | None, want: float, tolerance: float) -> bool:
    return value is not None and abs(value - want) <= tolerance * want


def test_calibration_finds_the_rates_the_engines_were_set_to(deployed) -> None:  # type: ignore[no-untyped-def]
    topology, url = deployed
    started = time.time()
    telemetry_services.telemetry_collect(topology_id=topology.pk)  # the first sample: no increments yet
    load = threading.Thread(target=_load, args=(url, topology.model_name))
    load.start()
    while load.is_alive():
        time.sleep(float(settings.TELEMETRY_INTERVAL_SECONDS))
        telemetry_services.telemetry_collect(topology_id=topology.pk)
    load.join()
    calibration = topology_calibration(topology_id=topology.pk, window_s=int(time.time() - started) + 5)
    fits = {name: fit.value for name, fit in calibration.fits.items()}
    print("calibration:", calibration.verdict, calibration.reasons, fits, calibration.errors)
    assert calibration.verdict == "ok", calibration.reasons
    assert _near(fits["prefill_ms_per_token"], RATES["SANDBOX_PREFILL_MS_PER_TOKEN"], PREFILL_TOLERANCE)
    assert _near(fits["decode_step_ms"], RATES["SANDBOX_DECODE_STEP_MS"], STEP_TOLERANCE)
    assert _near(fits["decode_ms_per_seq"], RATES["SANDBOX_DECODE_MS_PER_SEQ"], PER_SEQ_TOLERANCE)
    # and not the nominal model's
    assert not _near(fits["prefill_ms_per_token"], NOMINAL["prefill_ms_per_token"], PREFILL_TOLERANCE)
    assert calibration.perf["prefill_ms_per_token"] == pytest.approx(fits["prefill_ms_per_token"], rel=1e-3)
