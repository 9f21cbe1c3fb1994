"""A lean HTTP/1.1 load generator on raw asyncio (keep-alive, one request in flight per connection).

The generator shares the machine's cores with what it measures, so it avoids an HTTP client
library: each request's bytes are built once, responses are parsed just enough to find their end
(Content-Length or chunked), and a few microseconds of CPU go into each request.

- ``open_loop``: requests scheduled at fixed times (rate/s); latency counts from the scheduled time,
  so a server that falls behind is charged for the queue it builds (no coordinated omission).
- ``closed_loop``: N connections, each sending its next request when the previous one is answered;
  gives maximum requests/s.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Target:
    """One endpoint and the exact request bytes sent to it."""

    label: str
    host: str
    port: int
    request: bytes
    expect: bytes  # a marker a good answer contains (b'"choices"', b"[DONE]")

    @classmethod
    def post(
        cls, label: str, host: str, port: int, path: str, body: bytes, headers: dict[str, str], expect: bytes
    ) -> Target:
        lines = [f"POST {path} HTTP/1.1", f"Host: {host}:{port}", f"Content-Length: {len(body)}"]
        lines += ["Content-Type: application/json", *(f"{k}: {v}" for k, v in headers.items())]
        return cls(label, host, port, ("\r\n".join(lines) + "\r\n\r\n").encode() + body, expect)


class Answer:
    __slots__ = ("first", "ok", "status")

    def __init__(self, status: int, first: float, ok: bool) -> None:
        self.status = status
        self.first = first  # clock when the first body bytes arrived
        self.ok = ok


class Connection(asyncio.Protocol):
    """One keep-alive connection; ``request`` sends and resolves when the whole answer is in."""

    def __init__(self, expect: bytes) -> None:
        self.expect = expect
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.waiter: asyncio.Future[Answer] | None = None
        self.closed = False
        self._reset()

    def _reset(self) -> None:
        self.status = 0
        self.head_done = False
        self.length = -1  # Content-Length, or -1 for chunked
        self.body = bytearray()
        self.first = 0.0
        self.keep_alive = True

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's transports are not subclasses

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(ConnectionResetError("the server closed the connection"))

    def request(self, data: bytes) -> asyncio.Future[Answer]:
        assert self.transport is not None
        self.waiter = asyncio.get_running_loop().create_future()
        self.transport.write(data)
        return self.waiter

    def data_received(self, data: bytes) -> None:
        if not self.first and self.head_done:
            self.first = time.perf_counter()
        self.buffer += data
        if not self.head_done:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(self.buffer[:end]).lower()
            del self.buffer[: end + 4]
            self.status = int(head[9:12])
            self.head_done = True
            self.keep_alive = b"connection: close" not in head
            if b"transfer-encoding: chunked" not in head:
                start = head.find(b"content-length:")
                stop = head.find(b"\r\n", start)
                self.length = int(head[start + 15 : stop if stop >= 0 else len(head)]) if start >= 0 else 0
            if self.buffer:
                self.first = time.perf_counter()
        if self.length >= 0:
            if len(self.buffer) >= self.length:
                self.body = self.buffer[: self.length]
                del self.buffer[: self.length]
                self._done()
            return
        self._chunks()

    def _chunks(self) -> None:
        while True:
            line_end = self.buffer.find(b"\r\n")
            if line_end < 0:
                return
            size = int(bytes(self.buffer[:line_end]).split(b";", 1)[0], 16)
            if size == 0:
                trailer_end = self.buffer.find(b"\r\n\r\n", line_end)
                if trailer_end < 0:
                    return
                del self.buffer[: trailer_end + 4]
                self._done()
                return
            if len(self.buffer) < line_end + 2 + size + 2:
                return
            self.body += self.buffer[line_end + 2 : line_end + 2 + size]
            del self.buffer[: line_end + 2 + size + 2]

    def _done(self) -> None:
        answer = Answer(self.status, self.first or time.perf_counter(), self.expect in self.body)
        keep = self.keep_alive
        self._reset()
        if not keep and self.transport is not None:
            self.transport.close()
            self.closed = True
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(answer)


@dataclass
class Result:
    """Latencies in ms (complete answer, and first body bytes) of the good answers; errors counted."""

    label: str
    latency: list[float] = field(default_factory=list)
    first: list[float] = field(default_factory=list)
    errors: int = 0
    timeouts: int = 0
    sent: int = 0
    warm: int = 0  # requests sent during the warm-up (not in the figures; their server CPU is)
    seconds: float = 0.0

    def merge(self, other: Result) -> None:
        self.latency += other.latency
        self.first += other.first
        self.errors += other.errors
        self.timeouts += other.timeouts
        self.sent += other.sent
        self.warm += other.warm
        self.seconds += other.seconds


class Pool:
    def __init__(self, target: Target) -> None:
        self.target = target
        self.idle: list[Connection] = []
        self.all: list[Connection] = []

    async def get(self) -> Connection:
        while self.idle:
            conn = self.idle.pop()
            if not conn.closed:
                return conn
        loop = asyncio.get_running_loop()
        _, conn = await loop.create_connection(
            lambda: Connection(self.target.expect), self.target.host, self.target.port
        )
        self.all.append(conn)
        return conn

    def put(self, conn: Connection) -> None:
        if not conn.closed:
            self.idle.append(conn)

    async def warm(self, count: int) -> None:
        conns = [await self.get() for _ in range(count)]
        for conn in conns:
            self.put(conn)

    def close(self) -> None:
        for conn in self.all:
            if conn.transport is not None:
                conn.transport.close()


async def _one(pool: Pool, due: float, result: Result, timeout: float) -> None:
    result.sent += 1
    try:
        conn = await pool.get()
        answer = await asyncio.wait_for(conn.request(pool.target.request), timeout)
    except TimeoutError:
        result.timeouts += 1
        return
    except Exception:  # refused, reset, a broken answer: counted, never fatal to the run
        result.errors += 1
        return
    done = time.perf_counter()
    pool.put(conn)
    if answer.status != 200 or not answer.ok:
        result.errors += 1
        return
    result.latency.append((done - due) * 1000)
    result.first.append((answer.first - due) * 1000)


async def open_loop(
    target: Target, *, rate: float, seconds: float, warmup: float = 0.5, timeout: float = 5.0
) -> Result:
    """Requests at fixed times; each latency from its scheduled time. Bounded: stragglers time out."""
    pool = Pool(target)
    await pool.warm(min(64, max(4, int(rate / 20))))
    scratch = Result(target.label)
    result = Result(target.label, seconds=seconds)
    tasks: set[asyncio.Task[None]] = set()
    loop = asyncio.get_running_loop()
    for phase, length, into in ((0, warmup, scratch), (1, seconds, result)):
        start = time.perf_counter()
        count = int(length * rate)
        for i in range(count):
            due = start + i / rate
            delay = due - time.perf_counter()
            if delay > 0.0005:
                await asyncio.sleep(delay)
            task = loop.create_task(_one(pool, due, into, timeout))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        if phase == 0 and tasks:
            await asyncio.wait(list(tasks), timeout=timeout)
    if tasks:
        await asyncio.wait(list(tasks), timeout=timeout + 1)
    pool.close()
    result.warm = scratch.sent
    return result


async def closed_loop(
    target: Target, *, connections: int, seconds: float, warmup: float = 1.0, timeout: float = 10.0
) -> Result:
    """`connections` clients back to back for `seconds` (after `warmup`); result.sent is the count."""
    pool = Pool(target)
    await pool.warm(connections)
    result = Result(target.label, seconds=seconds)
    scratch = Result(target.label)
    start = time.perf_counter()
    measure_from, stop_at = start + warmup, start + warmup + seconds

    async def client() -> None:
        while True:
            now = time.perf_counter()
            if now >= stop_at:
                return
            await _one(pool, now, result if now >= measure_from else scratch, timeout)

    await asyncio.gather(*(client() for _ in range(connections)))
    pool.close()
    result.warm = scratch.sent
    # only requests sent inside the window count; the ones still running at its end finish after it
    return result
