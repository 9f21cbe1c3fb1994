from __future__ import annotations

import os

import pytest


def pytest_configure(config: pytest.Config) -> None:
    # Playwright's sync API keeps an event loop running in the test thread, which Django's ORM
    # guard mistakes for async code. Only the browser run (`pytest -m browser`) relaxes it.
    if config.getoption("markexpr", "") == "browser":
        os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
