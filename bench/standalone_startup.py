"""How long `make demo` takes to a usable login page, and how long Ctrl-C takes to stop it.

    python bench/standalone_startup.py            # warm: reuses this checkout's .venv and var/
    python bench/standalone_startup.py --fresh    # from a fresh clone (installs a venv: minutes)

Prints one line per figure. Uses a free loopback port and a throwaway state directory.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def login_page_answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/accounts/login/", timeout=2) as response:  # noqa: S310
            return response.status == 200
    except OSError:
        return False


def run(checkout: Path, state_dir: Path) -> None:
    port = free_port()
    env = {**os.environ, "TANDEM_PORT": str(port), "TANDEM_STATE_DIR": str(state_dir)}
    log_path = state_dir.parent / "demo.log"
    begin = time.monotonic()
    with open(log_path, "w") as log:
        make = subprocess.Popen(["make", "demo"], cwd=checkout, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    while not login_page_answers(url):
        if make.poll() is not None:
            raise SystemExit(f"make demo exited with {make.returncode}; see {log_path}")
        time.sleep(0.2)
    ready = time.monotonic() - begin
    text = log_path.read_text()
    runner_ready = re.search(r"ready in ([\d.]+) s", text)
    print(f"make demo -> login page answers: {ready:.1f} s")
    if runner_ready:
        print(f"python -m standalone -> URL printed: {runner_ready.group(1)} s")
    time.sleep(5)  # let the demo steps start, as a person would
    runner = next(
        (int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and _is_runner(p, state_dir)), None
    )
    if runner is None:
        raise SystemExit("standalone runner not found")
    begin = time.monotonic()
    os.kill(runner, signal.SIGTERM)
    make.wait(timeout=60)
    print(f"SIGTERM -> everything stopped: {time.monotonic() - begin:.1f} s")


def _is_runner(proc: Path, state_dir: Path) -> bool:
    try:
        cmdline = (proc / "cmdline").read_bytes().split(b"\0")
        environ = (proc / "environ").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"standalone" in cmdline and f"TANDEM_STATE_DIR={state_dir}".encode() in environ


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fresh", action="store_true", help="clone this repository first (installs a venv)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tandem-bench-") as tmp:
        checkout = ROOT
        if args.fresh:
            checkout = Path(tmp) / "clone"
            subprocess.run(["git", "clone", "-q", str(ROOT), str(checkout)], check=True)
        run(checkout, Path(tmp) / "var")


if __name__ == "__main__":
    main()
