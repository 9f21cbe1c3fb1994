"""Reads of what-if runs."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from whatif.models import ACTIVE_STATES, WhatIfRun


def whatif_run_list(*, topology: Any) -> QuerySet[WhatIfRun]:
    return WhatIfRun.objects.filter(topology=topology).select_related("topology")


def whatif_run_all() -> QuerySet[WhatIfRun]:
    return WhatIfRun.objects.select_related("topology")


def whatif_run_active(*, topology: Any) -> WhatIfRun | None:
    return whatif_run_list(topology=topology).filter(state__in=ACTIVE_STATES).first()
