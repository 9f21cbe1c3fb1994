from __future__ import annotations

from django.apps import AppConfig


class WorkloadConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "workload"
    verbose_name = "Workload: prefix reuse and request traces"
