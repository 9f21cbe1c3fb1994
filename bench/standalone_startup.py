"""How long `make demo` takes to a usable login page, to the demo topology Ready and to the first
live metrics; what the running demo costs (CPU, memory); and how long Ctrl-C takes to stop it.

    python bench/standalone_startup.py            # warm: reuses this checkout's .venv
    python bench/standalone_startup.py --fresh    # from a fresh clone (installs a venv: minutes)
    python bench/standalone_startup.py --cpu-seconds 0   # skip the CPU measurement

Prints one line per figure. Uses a free loopback port and a throwaway state directory. Times are
from starting `make demo`; the runner's own figures (from its start) are printed too.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MILESTONES = {
    "demo topology Ready": re.compile(r"tandem: demo: demo topology \S+ (deployed|re-applied)"),
    "first live metrics": re.compile(r"tandem: demo: live metrics:"),
    "demo ready": re.compile(r"Tandem (demo )?is ready:"),
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def login_page_answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/accounts/login/", timeout=2) as response:  # noqa: S310
            return bool(response.status == 200)
    except OSError:
        return False


class Console:
    """`make demo`'s output, each line with the time it appeared (seconds from `begin`)."""

    def __init__(self, proc: subprocess.Popen[str], begin: float, log_path: Path) -> None:
        self.lines: list[tuple[float, str]] = []
        self.begin = begin
        self.log_path = log_path
        threading.Thread(target=self._read, args=(proc,), daemon=True).start()

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        with open(self.log_path, "w") as log:
            for line in proc.stdout:
                self.lines.append((time.monotonic() - self.begin, line.rstrip("\n")))
                log.write(line)
                log.flush()

    def first(self, pattern: re.Pattern[str]) -> float | None:
        return next((at for at, line in self.lines if pattern.search(line)), None)

    def text(self) -> str:
        return "\n".join(line for _, line in self.lines)


def _descendants(root_pid: int) -> list[int]:
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
                parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    found, frontier = [], [root_pid]
    while frontier:
        pid = frontier.pop()
        found.append(pid)
        frontier += [child for child, parent in parents.items() if parent == pid]
    return found


def _cpu_and_rss(pid: int) -> tuple[float, int, str]:
    """(CPU seconds used so far, resident bytes, short command line) of one process."""
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = int(stat[11]) + int(stat[12])
    rss = int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    words = [part.decode(errors="replace") for part in argv if part]
    if len(words) > 2 and words[1] == "-m":  # python -m <module> ...: the module and its first arguments
        name = " ".join(word for word in words[2:6] if word not in ("-A", "controlplane"))
    else:
        name = " ".join(Path(words[0]).name.split()[:1]) if words else "?"
    return ticks / os.sysconf("SC_CLK_TCK"), rss, name


def measure_cpu(root_pid: int, seconds: float) -> None:
    def sample() -> dict[int, tuple[float, int, str]]:
        out = {}
        for pid in _descendants(root_pid):
            try:
                out[pid] = _cpu_and_rss(pid)
            except (OSError, ValueError, IndexError):
                continue
        return out

    before = sample()
    time.sleep(seconds)
    after = sample()
    total_cpu = 0.0
    total_rss = 0
    rows = []
    for pid, (cpu, rss, name) in after.items():
        used = cpu - before.get(pid, (cpu, 0, name))[0]
        total_cpu += used
        total_rss += rss
        if used > 0.05 or rss > 20 * 2**20:
            rows.append((used, rss, name))
    for used, rss, name in sorted(rows, reverse=True):
        print(f"  {name[:60]:<60} {100 * used / seconds:5.1f} % CPU  {rss / 2**20:6.0f} MiB")
    print(
        f"demo under traffic, {seconds:.0f} s: {100 * total_cpu / seconds:.1f} % of one core "
        f"({100 * total_cpu / seconds / (os.cpu_count() or 1):.1f} % of the machine), "
        f"{total_rss / 2**20:.0f} MiB resident"
    )


def run(checkout: Path, state_dir: Path, cpu_seconds: float) -> None:
    port = free_port()
    env = {
        **os.environ,
        "TANDEM_PORT": str(port),
        "TANDEM_STATE_DIR": str(state_dir),
        "PYTHONUNBUFFERED": "1",
    }
    log_path = state_dir.parent / "demo.log"
    begin = time.monotonic()
    make = subprocess.Popen(
        ["make", "demo"], cwd=checkout, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    console = Console(make, begin, log_path)
    url = f"http://127.0.0.1:{port}"
    while not login_page_answers(url):
        if make.poll() is not None:
            raise SystemExit(f"make demo exited with {make.returncode}; see {log_path}")
        time.sleep(0.2)
    print(f"make demo -> login page answers: {time.monotonic() - begin:.1f} s")
    deadline = time.monotonic() + 300
    while console.first(MILESTONES["demo ready"]) is None:
        if make.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"the demo did not get ready; see {log_path}")
        time.sleep(0.2)
    for name in ("demo topology Ready", "first live metrics"):
        at = console.first(MILESTONES[name])
        print(f"make demo -> {name}: {'not reached' if at is None else f'{at:.1f} s'}")
    own = re.search(r"since start: (.*)", console.text())
    if own:
        print(f"python -m standalone's own figures (from its start): {own.group(1)}")
    runner = next((pid for pid in _descendants(make.pid) if _is_runner(pid)), None)
    if runner is None:
        raise SystemExit("standalone runner not found")
    if cpu_seconds > 0:
        measure_cpu(runner, cpu_seconds)
    stop_begin = time.monotonic()
    os.kill(runner, signal.SIGTERM)
    make.wait(timeout=60)
    print(f"SIGTERM -> everything stopped: {time.monotonic() - stop_begin:.1f} s")


def _is_runner(pid: int) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"-m" in cmdline and b"standalone" in cmdline


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fresh", action="store_true", help="clone this repository first (installs a venv)")
    parser.add_argument(
        "--cpu-seconds", type=float, default=60, help="measure the demo's CPU this long (0: skip)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tandem-bench-") as tmp:
        checkout = ROOT
        if args.fresh:
            checkout = Path(tmp) / "clone"
            subprocess.run(["git", "clone", "-q", str(ROOT), str(checkout)], check=True)
        run(checkout, Path(tmp) / "var", args.cpu_seconds)


if __name__ == "__main__":
    main()
