from __future__ import annotations

from django.apps import AppConfig


class WhatIfConfig(AppConfig):
    name = "whatif"
    verbose_name = "What-if runs"
