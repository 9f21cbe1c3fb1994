from __future__ import annotations

from django.apps import AppConfig


class PerfModelConfig(AppConfig):
    name = "perfmodel"
    verbose_name = "Performance model"
