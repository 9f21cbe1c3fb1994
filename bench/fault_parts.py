"""What bench/gateway_faults.py drives and reads: a controllable upstream and a load generator that
sorts every answer into served (by the cluster or the fallback), refused, or failed by Tandem.

- The controllable upstream is bench/gateway_peers.py's constant-time echo upstream with a mode, set
  by ``POST /_bench/mode/<mode>`` on its own port: ``ok`` (answers), ``5xx`` (503 in vLLM's error
  shape), ``429`` (429 with ``Retry-After``), ``hang`` (reads the request, never answers) and
  ``stall`` (a streamed request gets its 200 and event-stream headers, then nothing; whole answers
  are served).
- The load generator is bench/loadgen.py's raw-asyncio connection and pool, with each answer's head
  and body kept so its ``x-tandem-backend`` and error ``code`` can be read.

    .venv/bin/python bench/fault_parts.py upstream   # prints its URL, serves until stdin closes
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.request import Request, urlopen

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gateway_peers import EchoServer, _response, _until_stdin_closes
from loadgen import Connection, Pool, Target

ROOT = Path(__file__).resolve().parent.parent
MODES = ("ok", "5xx", "429", "hang", "stall")
ENGINE_503 = json.dumps(
    {"object": "error", "message": "The engine is overloaded", "type": "ServiceUnavailable", "code": 503}
).encode()
ENGINE_429 = json.dumps(
    {"object": "error", "message": "Too many requests", "type": "TooManyRequests", "code": 429}
).encode()


# ---------------------------------------------------------------- the controllable upstream


class ControlledUpstream(EchoServer):
    mode = "ok"

    def answer(self, request_line: list[bytes], body: bytes) -> list[bytes]:
        method, path = request_line
        if path.startswith(b"/_bench/mode/"):
            wanted = path.rsplit(b"/", 1)[1].decode()
            if wanted not in MODES:
                return [
                    _response(b"application/json", b'{"error": "unknown mode"}', status=b"400 Bad Request")
                ]
            ControlledUpstream.mode = wanted
            return [_response(b"application/json", json.dumps({"mode": wanted}).encode())]
        mode = ControlledUpstream.mode
        if method != b"post" or mode == "ok":
            return super().answer(request_line, body)
        if mode == "5xx":
            return [_response(b"application/json", ENGINE_503, status=b"503 Service Unavailable")]
        if mode == "429":
            head = b"HTTP/1.1 429 Too Many Requests\r\ncontent-type: application/json\r\nretry-after: 1\r\n"
            return [head + b"content-length: %d\r\n\r\n%s" % (len(ENGINE_429), ENGINE_429)]
        if mode == "hang":
            return []
        if json.loads(body).get("stream") is True:  # stall: headers, then not one byte of the stream
            return [
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
            ]
        return super().answer(request_line, body)


async def serve_upstream() -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(ControlledUpstream, "127.0.0.1", 0, backlog=4096)
    print(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", flush=True)
    await _until_stdin_closes()
    server.close()


def set_mode(url: str, mode: str) -> None:
    with urlopen(Request(f"{url}/_bench/mode/{mode}", data=b"", method="POST"), timeout=5) as answer:  # noqa: S310
        assert answer.status == 200, answer.status


# ---------------------------------------------------------------- the load generator


class Tapped(Connection):
    """loadgen's connection, keeping the last answer's (status, head, body)."""

    def __init__(self, expect: bytes) -> None:
        super().__init__(expect)
        self.last: tuple[int, bytes, bytes] = (0, b"", b"")

    def _reset(self) -> None:
        super()._reset()
        self.head = b""

    def data_received(self, data: bytes) -> None:
        if not self.head_done:
            joined = bytes(self.buffer) + data
            end = joined.find(b"\r\n\r\n")
            if end >= 0:
                self.head = joined[:end].lower()
        super().data_received(data)

    def _done(self) -> None:
        self.last = (self.status, self.head, bytes(self.body))
        super()._done()


class TappedPool(Pool):
    """loadgen's pool of Tapped connections that drops a connection idle for IDLE_SECONDS, as a client
    must under the server's keep-alive timeout (uvicorn's: 5 s), so it never races the server's close."""

    IDLE_SECONDS = 3.0

    def put(self, conn: Connection) -> None:
        conn.idle_since = time.monotonic()  # type: ignore[attr-defined]
        super().put(conn)

    async def get(self) -> Connection:
        now = time.monotonic()
        while self.idle:
            conn = self.idle.pop()
            if conn.closed:
                continue
            if now - getattr(conn, "idle_since", now) > self.IDLE_SECONDS:
                if conn.transport is not None:
                    conn.transport.close()
                continue
            return conn
        loop = asyncio.get_running_loop()
        _, conn = await loop.create_connection(
            lambda: Tapped(self.target.expect), self.target.host, self.target.port
        )
        self.all.append(conn)
        return conn


@dataclass
class Answer:
    phase: int
    stream: bool
    kind: str  # cluster | fallback | refused | failed
    code: str  # the refusal's or failure's code ("" when served)
    ms: float


BACKEND = re.compile(rb"\r\nx-tandem-backend: *([a-z]+)")


def classify(
    status: int, head: bytes, body: bytes, expect: bytes, documented: frozenset[str]
) -> tuple[str, str]:
    """(kind, code) of one answer (pure)."""
    if status == 200:
        if expect not in body:
            return "failed", "200 truncated"
        found = BACKEND.search(b"\r\n" + head)
        backend = found.group(1).decode() if found else "?"
        return (backend, "") if backend in ("cluster", "fallback") else ("failed", f"200 backend {backend}")
    try:
        error = json.loads(body).get("error") or {}
        code = str(error.get("code") or "") if isinstance(error, dict) else ""
    except (ValueError, AttributeError):
        code = ""
    label = f"{status} {code or 'no code'}"
    if 400 <= status < 500 or (status == 503 and code in documented):
        return "refused", label
    return "failed", label


def documented_codes() -> frozenset[str]:
    """Every `code` the gateway's and the keys' docs name (a backticked snake_case word)."""
    text = "".join((ROOT / "docs" / name).read_text() for name in ("gateway.md", "api-keys.md"))
    return frozenset(re.findall(r"`([a-z]+(?:_[a-z]+)+)`", text))


class Driver:
    """An open loop at `rate` req/s, streamed and whole requests alternating, until stopped; each request
    carries the bytes of the phase it was sent in (`requests[phase][stream]`)."""

    def __init__(
        self,
        port: int,
        requests: list[dict[bool, bytes]],
        phase: Callable[[], int],
        *,
        rate: float,
        timeout: float,
        documented: frozenset[str],
    ) -> None:
        self.requests = requests
        self.phase = phase
        self.rate = rate
        self.timeout = timeout
        self.documented = documented
        self.expect = {False: b'"choices"', True: b"[DONE]"}
        self.pools = {
            s: TappedPool(Target("tandem", "127.0.0.1", port, b"", self.expect[s])) for s in (False, True)
        }
        self.answers: list[Answer] = []
        self.sent = 0
        self.stopped = asyncio.Event()
        self.tasks: set[asyncio.Task[None]] = set()

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        start = time.perf_counter()
        i = 0
        while not self.stopped.is_set():
            delay = start + i / self.rate - time.perf_counter()
            if delay > 0.0005:
                await asyncio.sleep(delay)
            stream = i % 2 == 1
            task = loop.create_task(self._one(self.phase(), stream))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
            i += 1
        if self.tasks:
            await asyncio.wait(list(self.tasks), timeout=self.timeout + 2)
        for pool in self.pools.values():
            pool.close()

    async def _one(self, phase: int, stream: bool) -> None:
        self.sent += 1
        started = time.perf_counter()
        pool = self.pools[stream]

        def done(kind: str, code: str) -> None:
            self.answers.append(Answer(phase, stream, kind, code, (time.perf_counter() - started) * 1000))

        try:
            conn = await pool.get()
        except OSError as error:
            done("failed", f"connect {type(error).__name__}")
            return
        try:
            await asyncio.wait_for(conn.request(self.requests[phase][stream]), self.timeout)
        except TimeoutError:
            if conn.transport is not None:
                conn.transport.close()
            done("failed", f"no answer in {self.timeout:.0f} s")
            return
        except Exception as error:
            where = "mid-answer" if conn.head_done else "before any answer"
            done("failed", f"connection {type(error).__name__} {where}")
            return
        pool.put(conn)
        assert isinstance(conn, Tapped)
        status, head, body = conn.last
        kind, code = classify(status, head, body, self.expect[stream], self.documented)
        done(kind, code)


def main() -> None:
    if sys.argv[1:] != ["upstream"]:
        sys.exit(__doc__)
    import uvloop

    uvloop.run(serve_upstream())


if __name__ == "__main__":
    main()
