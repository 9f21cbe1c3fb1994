"""Real coding-assistant clients against the real gateway in front of the scripted upstream.

Each client is run non-interactively with exactly the snippet Tandem shows for a coding-assistant key
(``keys.snippets``), quiet and local (no telemetry, no update checks, ``NO_PROXY`` for loopback, a HOME
of the test's own), every call under ``timeout``. The clients are installed once per machine by
``assistants.install`` (``make assistant-clients``).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from assistants import install
from gateway.tests.conftest import (  # noqa: F401 - fixtures used by name
    inference_key,
    make_topology,
    pytest_runtest_makereport,
    scripted_gateway,
)
from keys.snippets import client_snippets

QUIET = {
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DO_NOT_TRACK": "1",
    "NO_PROXY": "127.0.0.1,localhost",
    "no_proxy": "127.0.0.1,localhost",
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_SHARE": "1",
    "CODEX_DISABLE_UPDATE_CHECK": "1",
    "NO_UPDATE_NOTIFIER": "1",
    "CI": "1",
}
TIMEOUT_SECONDS = 180


@pytest.fixture(scope="session")
def clients() -> Path:
    try:
        return install.install()
    except RuntimeError as error:
        pytest.fail(str(error))


def exports(text: str) -> dict[str, str]:
    """The `export NAME=value` lines of a snippet, as a shell reads them."""
    found = {}
    for line in text.splitlines():
        if line.startswith("export "):
            name, _, value = line.removeprefix("export ").partition("=")
            found[name] = shlex.split(value)[0] if value else ""
    return found


def files(text: str) -> dict[str, str]:
    """A snippet of files, each under a `# ~/path` line, as {path under HOME: content}."""
    out: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if line.startswith("# ~/"):
            current = line.removeprefix("# ~/").strip()
            out[current] = []
        elif current is not None:
            out[current].append(line)
    return {path: "\n".join(lines).strip() + "\n" for path, lines in out.items()}


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    def __str__(self) -> str:
        said = f"stdout:\n{self.stdout[-3000:]}\nstderr:\n{self.stderr[-3000:]}"
        return f"exit {self.returncode} after {self.seconds:.1f} s\n{said}"


@dataclass
class Assistant:
    """One client's world: its HOME, its working folder, the gateway and the snippets for its key."""

    home: Path
    work: Path
    gateway: Any
    snippets: dict[str, str]

    def env(self, **extra: str) -> dict[str, str]:
        keep = {name: os.environ[name] for name in ("PATH", "LANG", "TERM") if name in os.environ}
        return {**keep, "HOME": str(self.home), "TMPDIR": str(self.home / "tmp"), **QUIET, **extra}

    def run(self, argv: list[str], env: dict[str, str], timeout: int = TIMEOUT_SECONDS) -> Run:
        import time

        started = time.monotonic()
        done = subprocess.run(
            ["timeout", "-k", "5", str(timeout), *argv],
            cwd=self.work,
            env=env,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
        )
        return Run(done.returncode, done.stdout, done.stderr, time.monotonic() - started)

    def snippets_for(self, secret: str) -> dict[str, str]:
        model = self.snippets["__model__"]
        aliases = tuple(self.gateway.aliases)
        found = client_snippets(
            base_url=self.gateway.base,
            secret=secret,
            kind="inference",
            model=model,
            purpose="coding-assistant",
            aliases=aliases,
        )
        return {s["id"]: s["text"] for s in found}


@pytest.fixture
def assistant(scripted_gateway, clients, tmp_path) -> Iterator[Assistant]:  # noqa: F811 - imported fixture
    from gateway.tests.conftest import MODEL

    home = tmp_path / "home"
    work = tmp_path / "work"
    for folder in (home, work, home / "tmp"):
        folder.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    scripted_gateway.aliases = ["gpt-5-codex", "claude-sonnet-4-5"]
    world = Assistant(home=home, work=work, gateway=scripted_gateway, snippets={"__model__": MODEL})
    world.snippets = {**world.snippets_for(scripted_gateway.secret), "__model__": MODEL}
    yield world
    _end_left_behind(home)


def _end_left_behind(home: Path) -> None:
    """End what a client left running after its command returned (the Cline CLI starts a hub daemon that
    detaches and outlives it): every process whose HOME is this test's."""
    import signal

    mark = f"HOME={home}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue  # gone, or not ours to read
        if mark in environ.split(b"\0"):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(int(entry.name), signal.SIGKILL)


def records(gateway: Any, count: int) -> list[Any]:
    """The gateway's records of this topology, once at least `count` are written."""
    import time

    from gateway.models import GatewayRequest

    deadline = time.monotonic() + 10
    rows: list[Any] = []
    while time.monotonic() < deadline:
        rows = list(GatewayRequest.objects.filter(topology=gateway.topology).order_by("id"))
        if len(rows) >= count:
            return rows
        time.sleep(0.2)
    return rows


def binary(name: str) -> str:
    return str(install.binary(name))


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    """Every test here runs real clients: marked `assistant`, so `make unit` leaves them to
    `make assistants`."""
    here = Path(__file__).parent
    for item in items:
        if Path(str(item.fspath)).is_relative_to(here) and item.get_closest_marker("real_engine") is None:
            item.add_marker(pytest.mark.assistant)  # those against a real vLLM run in `make real`
