"""Capture what a running engine really answers, as test data: ``/metrics`` between fixed steps of
traffic, the answers' bodies and streams, and its error bodies.

    python -m realengine.capture --out DIR            # starts a real vLLM of its own
    python -m realengine.capture --out DIR --base http://127.0.0.1:8000 --model NAME

Steps (a ``/metrics`` text is saved before the first and after each): ``served`` (chat, streamed chat,
completions), ``client-errors`` (only requests the engine refuses as the client's: ``max_tokens`` over
the context, an unknown model), ``other-apis`` (Anthropic Messages and the Responses API, streamed and
not), ``other-api-errors`` (those two APIs asked for an unknown model). With its own
engine it also keeps that engine's log (``engine.log``) and the connectors' failure lines that vLLM's own
code writes (``connector-lines.log``, see ``realengine.connector_lines``), and what an engine prints
when it refuses its arguments and exits (``crash-max-model-len.log``). Tests read the files; they are
never written by hand.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any


def call(base: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, str]:
    data = json.dumps(body).encode() if body is not None else None
    if not base.startswith(("http://", "https://")):
        raise ValueError(f"--base must be an http(s) URL, got {base!r}")
    headers = {"content-type": "application/json"} if data else {}
    request = urllib.request.Request(base + path, data=data, headers=headers)  # noqa: S310 - checked above
    try:
        with urllib.request.urlopen(request, timeout=120) as response:  # noqa: S310 - checked above
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def steps(model: str, context: int) -> dict[str, list[tuple[str, str, dict[str, Any]]]]:
    chat = {"model": model, "messages": [{"role": "user", "content": "Say something short."}]}
    return {
        "served": [
            ("chat", "/v1/chat/completions", {**chat, "max_tokens": 12}),
            (
                "chat-stream",
                "/v1/chat/completions",
                {**chat, "max_tokens": 6, "stream": True, "stream_options": {"include_usage": True}},
            ),
            ("completion", "/v1/completions", {"model": model, "prompt": "Once upon", "max_tokens": 6}),
        ],
        "client-errors": [
            ("error-max-tokens", "/v1/chat/completions", {**chat, "max_tokens": context + 1}),
            ("error-unknown-model", "/v1/chat/completions", {**chat, "model": "no-such-model"}),
            (
                "error-prompt-too-long",
                "/v1/completions",
                {"model": model, "prompt": "word " * (context + 8), "max_tokens": 1},
            ),
        ],
        "other-apis": [
            ("messages", "/v1/messages", {**chat, "max_tokens": 8}),
            (
                "messages-stream",
                "/v1/messages",
                {**chat, "max_tokens": 4, "stream": True},
            ),
            ("responses", "/v1/responses", {"model": model, "input": "Say hi.", "max_output_tokens": 8}),
            (
                "responses-stream",
                "/v1/responses",
                {"model": model, "input": "Say hi.", "max_output_tokens": 4, "stream": True},
            ),
        ],
        "other-api-errors": [
            (
                "messages-error-unknown-model",
                "/v1/messages",
                {**chat, "model": "no-such-model", "max_tokens": 4},
            ),
            ("responses-error-unknown-model", "/v1/responses", {"model": "no-such-model", "input": "Hi."}),
        ],
    }


def capture(base: str, model: str, context: int, out: Path) -> list[str]:
    out.mkdir(parents=True, exist_ok=True)
    written = []

    def save(name: str, text: str) -> None:
        (out / name).write_text(text)
        written.append(name)

    save("metrics-0-rest.txt", call(base, "/metrics")[1])
    for index, (step, requests) in enumerate(steps(model, context).items(), start=1):
        for name, path, body in requests:
            status, text = call(base, path, body)
            save(f"{name}.{status}.{'sse' if body.get('stream') else 'json'}", text)
        save(f"metrics-{index}-{step}.txt", call(base, "/metrics")[1])
    return written


def with_own_engine(out: Path, port: int) -> list[str]:
    from realengine import engine, install

    out.mkdir(parents=True, exist_ok=True)
    log = out / "engine.log"
    log.unlink(missing_ok=True)
    running = engine.Engine(host="127.0.0.1", port=port, log=log).start()
    try:
        running.wait_ready()
        written = capture(running.base, engine.MODEL_NAME, engine.CONTEXT, out)
    finally:
        running.stop()
    lines = subprocess.run(
        [str(install.python()), "-m", "realengine.connector_lines"],
        cwd=Path(__file__).resolve().parent.parent, capture_output=True, text=True, check=True,
    )  # fmt: skip
    (out / "connector-lines.log").write_text(lines.stdout + lines.stderr)
    return [*written, "engine.log", "connector-lines.log", crash_log(out, port)]


def crash_log(out: Path, port: int) -> str:
    """What the engine prints when it refuses its arguments and exits (a pod's crash loop): a
    ``--max-model-len`` above the model's own context."""
    from realengine import engine

    log = out / "crash-max-model-len.log"
    log.unlink(missing_ok=True)
    refused = engine.Engine(
        host="127.0.0.1", port=port, log=log, args=["--max-model-len", str(2 * engine.CONTEXT)]
    ).start()
    try:
        refused.wait_ready(timeout=120)
    except RuntimeError:
        return log.name  # it exited, as it should
    finally:
        refused.stop()
    raise RuntimeError(f"vLLM served with --max-model-len {2 * engine.CONTEXT}: {log} shows what it did")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", help="a running engine; without it one is started")
    parser.add_argument("--model")
    parser.add_argument("--context", type=int, default=32768)
    parser.add_argument("--port", type=int, default=18090)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.base:
        written = capture(args.base.rstrip("/"), args.model, args.context, args.out)
    else:
        written = with_own_engine(args.out, args.port)
    for name in written:
        print(args.out / name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
