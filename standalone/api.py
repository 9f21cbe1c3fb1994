"""A small client for Tandem's own REST API (`/api/v1/`), logged in with the admin's session.

The demo steps use it to act and observe exactly as a user's script would: find the demo
topology, re-apply it on a fresh sandbox, and wait for its live metrics.
"""

from __future__ import annotations

import http.cookiejar
import json
import re
import urllib.error
import urllib.parse
import urllib.request
from typing import Any


class ApiError(Exception):
    """The API answered with an error (or not at all); the message carries the status and body."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class TandemApi:
    def __init__(self, base_url: str, *, timeout: float = 10) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must be an http(s) URL, not {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))

    def login(self, username: str, password: str) -> None:
        """Log in through the login page (CSRF token from the form), as a browser does."""
        page = self._open(self._request("/accounts/login/"))
        match = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
        if match is None:
            raise ApiError("the login page carries no CSRF token")
        form = {"username": username, "password": password, "csrfmiddlewaretoken": match.group(1)}
        data = urllib.parse.urlencode(form).encode()
        self._open(self._request("/accounts/login/", data=data, headers={"Referer": self.base_url + "/"}))
        if self._cookie("sessionid") is None:
            raise ApiError(f"logging in as {username} failed: check TANDEM_ADMIN_PASSWORD")

    def get(self, path: str) -> Any:
        return json.loads(self._open(self._request(path)))

    def post(self, path: str, body: dict[str, Any] | None = None, *, method: str = "POST") -> Any:
        headers = {
            "Content-Type": "application/json",
            "X-CSRFToken": self._cookie("csrftoken") or "",
            "Referer": self.base_url + "/",
        }
        request = self._request(path, data=json.dumps(body or {}).encode(), headers=headers)
        request.method = method
        return json.loads(self._open(request) or "null")

    def patch(self, path: str, body: dict[str, Any]) -> Any:
        return self.post(path, body, method="PATCH")

    def _request(
        self, path: str, *, data: bytes | None = None, headers: dict[str, str] | None = None
    ) -> urllib.request.Request:
        # Only ever the http(s) base URL checked in __init__.
        return urllib.request.Request(self.base_url + path, data=data, headers=headers or {})  # noqa: S310

    def _cookie(self, name: str) -> str | None:
        return next((cookie.value for cookie in self.jar if cookie.name == name), None)

    def _open(self, request: urllib.request.Request) -> str:
        try:
            with self.opener.open(request, timeout=self.timeout) as response:  # loopback only
                return str(response.read().decode())
        except urllib.error.HTTPError as error:
            body = error.read().decode(errors="replace")[:500]
            raise ApiError(
                f"{request.get_method()} {request.full_url}: {error.code} {body}", error.code
            ) from None
        except (urllib.error.URLError, OSError) as error:
            raise ApiError(f"{request.get_method()} {request.full_url}: {error}") from None
