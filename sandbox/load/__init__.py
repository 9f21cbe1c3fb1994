"""Open-loop workload generator for OpenAI-compatible routes (`python -m sandbox load`, `run_load`)."""

from __future__ import annotations

from sandbox.load.report import LoadReport, Quantiles, quantile
from sandbox.load.runner import run_load
from sandbox.load.workload import PATTERNS, Workload, plan, schedule

__all__ = ["PATTERNS", "LoadReport", "Quantiles", "Workload", "plan", "quantile", "run_load", "schedule"]
