"""A logged-in HTTP client for a Tandem server running in a subprocess (session cookie + CSRF pair)."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

CSRF = "f" * 32  # an unmasked CSRF secret: Django accepts it when the cookie and the header agree


@dataclass
class Answer:
    status: int
    body: str
    seconds: float

    def json(self) -> Any:
        return json.loads(self.body)


class Browser:
    def __init__(self, base: str, session_key: str | None = None) -> None:
        self.base = base
        self.session_key = session_key

    @classmethod
    def logged_in(cls, base: str, user: Any) -> Browser:
        from django.test import Client

        client = Client()
        client.force_login(user)
        return cls(base, client.cookies["sessionid"].value)

    def _cookie(self) -> str:
        parts = [f"csrftoken={CSRF}"]
        if self.session_key:
            parts.append(f"sessionid={self.session_key}")
        return "; ".join(parts)

    def call(
        self, method: str, path: str, body: Any = None, *, form: bool = False, timeout: float = 20
    ) -> Answer:
        headers = {"Cookie": self._cookie(), "X-CSRFToken": CSRF, "Accept": "application/json, text/html"}
        data = None
        if body is not None and form:
            data = urllib.parse.urlencode({**body, "csrfmiddlewaretoken": CSRF}).encode()
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        elif body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(  # noqa: S310 - http to loopback only
            self.base + path, data=data, headers=headers, method=method
        )
        started = time.monotonic()
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - loopback only
                return Answer(response.status, response.read().decode(), time.monotonic() - started)
        except urllib.error.HTTPError as error:
            return Answer(error.code, error.read().decode(), time.monotonic() - started)

    def get(self, path: str, **kwargs: Any) -> Answer:
        return self.call("GET", path, **kwargs)

    def post(self, path: str, body: Any = None, **kwargs: Any) -> Answer:
        return self.call("POST", path, body if body is not None else {}, **kwargs)
