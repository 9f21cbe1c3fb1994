"""The Celery app. Tasks live in each app's tasks.py and are found by autodiscovery."""

from __future__ import annotations

import os
import sys
from typing import Any

from celery import Celery
from celery.signals import setup_logging

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")

app = Celery("controlplane")


@app.on_configure.connect
def _load_settings_or_exit(sender: Celery, **kwargs: Any) -> None:
    """Read the settings before Celery does, so bad configuration stops the worker or beat with
    one line naming the variable instead of a traceback from inside Celery's option parsing."""
    from django.conf import settings

    from controlplane.env import ConfigError

    try:
        settings.INSTALLED_APPS  # noqa: B018 - evaluating the lazy settings is the point
    except ConfigError as error:
        sys.stderr.write(f"tandem: configuration error: {error}\n")
        sys.stderr.flush()
        os._exit(2)


@setup_logging.connect
def _keep_the_project_logging(loglevel: int | str | None = None, **kwargs: Any) -> None:
    """Worker and beat log through the project's handlers (which redact secrets) in its format.

    Without a receiver for this signal Celery replaces the root handlers with its own, which redact
    nothing. ``--loglevel`` still sets the root level, as it does with Celery's handlers."""
    import logging
    import logging.config

    from django.conf import settings

    logging.config.dictConfig(settings.LOGGING)
    if loglevel:
        logging.getLogger().setLevel(loglevel)


app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
app.autodiscover_tasks(["controlplane"])
