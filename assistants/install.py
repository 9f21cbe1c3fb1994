"""Install the coding-assistant clients the conformance suite runs, once per machine, outside the checkout.

    python -m assistants.install          # prints the folder; installs what is missing

The npm clients go into one prefix, aider into a virtualenv of its own (never a Tandem dependency),
both under ``~/.cache/tandem`` (``TANDEM_ASSISTANTS_HOME``), at the versions below; a stamp file
records what was installed, so a change of version installs again. A failed install names the step
and the command that repeats it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

NPM_CLIENTS = {
    "@anthropic-ai/claude-code": "2.1.332",
    "@openai/codex": "0.171.0",
    "opencode-ai": "1.18.33",
    "@qwen-code/qwen-code": "0.24.4",
    "cline": "3.0.65",
}
AIDER_VERSION = "0.86.2"
BINARIES = {"claude": "claude", "codex": "codex", "opencode": "opencode", "qwen": "qwen", "cline": "cline"}


def _label() -> str:
    pins = ",".join(f"{name}@{version}" for name, version in sorted(NPM_CLIENTS.items()))
    return f"{pins},aider-chat=={AIDER_VERSION}"


def home() -> Path:
    root = os.environ.get("TANDEM_ASSISTANTS_HOME") or Path.home() / ".cache" / "tandem"
    return Path(root) / "assistants"


def stamp() -> Path:
    return home() / ".tandem-installed"


def binary(name: str) -> Path:
    if name == "aider":
        return home() / "aider" / "bin" / "aider"
    return home() / "node_modules" / ".bin" / BINARIES[name]


def fix_command() -> str:
    return f"make assistant-clients  (the same as: {sys.executable} -m assistants.install)"


def installed() -> bool:
    return stamp().exists() and stamp().read_text().strip() == _label()


def install() -> Path:
    """The install folder, installing what is missing. Raises ``RuntimeError`` naming the failed step
    and the command that repeats it."""
    if installed():
        return home()
    home().mkdir(parents=True, exist_ok=True)
    print(f"assistants: installing {_label()} into {home()} (about 2 minutes)", flush=True)
    packages = [f"{name}@{version}" for name, version in NPM_CLIENTS.items()]
    aider = home() / "aider"
    steps = [
        ["npm", "install", "--no-audit", "--no-fund", "--loglevel=error", "--prefix", str(home()), *packages],
        [sys.executable, "-m", "venv", str(aider)],
        [str(aider / "bin" / "python"), "-m", "pip", "install", "--quiet", f"aider-chat=={AIDER_VERSION}"],
        *[[str(binary(name)), "--version"] for name in ("claude", "codex", "aider")],
    ]
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True, env={**os.environ, "DO_NOT_TRACK": "1"})
        if done.returncode != 0:
            tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-8:])
            raise RuntimeError(
                f"installing the coding-assistant clients failed at: {' '.join(step)}\n{tail}\n"
                f"Fix the cause, then run: {fix_command()}"
            )
    stamp().write_text(_label() + "\n")
    return home()


def main() -> int:
    try:
        folder = install()
    except RuntimeError as error:
        sys.stderr.write(f"assistants: {error}\n")
        return 1
    print(folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
