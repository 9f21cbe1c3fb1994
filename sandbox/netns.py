"""The pod network: flat (pods on the host's loopback) or isolated (a network namespace of its own).

*Flat* (the default, quick demo): pod, router and service addresses are 127.<net>.x.y on the host's
loopback, so anything on the machine reaches a pod directly.

*Isolated* (``--pod-network isolated``): the sandbox creates a network namespace
``tandem-sbx-<pid>`` (only its own ``lo``, no route to or from the host) and moves its main thread
into it before the controllers start, so every engine, router and kubelet probe socket lives there.
Pod addresses keep their 127.<net>.x.y form, but inside the namespace they are the namespace's own
loopback: from the host, ``http://<pod IP>:<port>`` reaches nothing, as with a remote cluster's pod
network. Only sockets created through ``host_listener`` live on the host: the API server's listeners
and the load-balancer forwarders (``LoadBalancer`` Services' external addresses). No veth and no
host route are needed, so nothing on the host changes and no address of the machine's network is
ever used. The namespace is removed on exit; one left behind by a killed sandbox (its pid is gone)
is removed by the next sandbox that starts.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import re
import socket
import subprocess
from pathlib import Path

CLONE_NEWNET = 0x40000000
PREFIX = "tandem-sbx-"
_NAME = re.compile(rf"^{PREFIX}(\d+)$")
NETNS_DIR = Path("/var/run/netns")
MODES = ("flat", "isolated")


class PodNetworkError(RuntimeError):
    pass


def _setns(fd: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"setns: {os.strerror(code)}")


def _ip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=False, timeout=10)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def leftover_namespaces() -> list[str]:
    """Namespaces named by a sandbox whose process is gone."""
    found = _ip("netns", "list")
    names = [line.split()[0] for line in found.stdout.splitlines() if line.strip()]
    stale = []
    for name in names:
        match = _NAME.match(name)
        if match and not _alive(int(match.group(1))):
            stale.append(name)
    return stale


def remove_leftovers() -> list[str]:
    removed = []
    for name in leftover_namespaces():
        if _ip("netns", "del", name).returncode == 0:
            removed.append(name)
    return removed


class PodNetwork:
    """Flat: a no-op. Isolated: the namespace, entering it, and host-side listeners."""

    def __init__(self, mode: str = "flat") -> None:
        if mode not in MODES:
            raise PodNetworkError(f"pod network must be one of {', '.join(MODES)}, not {mode!r}")
        self.mode = mode
        self.name = f"{PREFIX}{os.getpid()}" if mode == "isolated" else ""
        self._host_fd: int | None = None
        self._ns_fd: int | None = None

    @property
    def isolated(self) -> bool:
        return self.mode == "isolated"

    def create(self) -> None:
        """Create the namespace (removing leftovers of dead sandboxes first) and move this thread into it."""
        if not self.isolated:
            return
        if os.geteuid() != 0:
            raise PodNetworkError("--pod-network isolated needs root (ip netns add)")
        remove_leftovers()
        _ip("netns", "del", self.name)  # a namespace of an earlier process with our (reused) pid
        made = _ip("netns", "add", self.name)
        if made.returncode != 0:
            raise PodNetworkError(f"ip netns add {self.name}: {made.stderr.strip()}")
        up = _ip("-n", self.name, "link", "set", "lo", "up")
        if up.returncode != 0:
            self.remove()
            raise PodNetworkError(f"ip -n {self.name} link set lo up: {up.stderr.strip()}")
        self._host_fd = os.open("/proc/self/ns/net", os.O_RDONLY)
        self._ns_fd = os.open(str(NETNS_DIR / self.name), os.O_RDONLY)
        _setns(self._ns_fd)

    def host_listener(self, host: str, port: int, *, backlog: int = 1024) -> socket.socket:
        """A listening TCP socket on the host's network (the namespace's when flat: the same thing)."""
        if self.isolated and self._host_fd is not None and self._ns_fd is not None:
            _setns(self._host_fd)
            try:
                return _listen(host, port, backlog)
            finally:
                _setns(self._ns_fd)
        return _listen(host, port, backlog)

    def remove(self) -> None:
        if not self.isolated:
            return
        if self._host_fd is not None:
            with contextlib.suppress(OSError):
                _setns(self._host_fd)
        for fd in (self._host_fd, self._ns_fd):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._host_fd = self._ns_fd = None
        _ip("netns", "del", self.name)


def _listen(host: str, port: int, backlog: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(backlog)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise OSError(exc.errno, f"address {host}:{port} is already in use") from exc
        raise
    return sock
