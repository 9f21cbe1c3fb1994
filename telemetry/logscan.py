"""Engine log lines about KV transfers → findings that name a request or a peer (PURE).

Real engines write these lines (docs/kv-links.md has the table with their sources); Tandem reads the
recent lines of prefill and decode pods through the Kubernetes API (``pods/log``) every interval:

- vLLM NixlConnector, 0.32 and 0.33 (``nixl/base_worker.py`` ``_log_failure``): ``NIXL transfer failure:
  <failure_type>[. <msg>] | Context: {'failure_type': ..., 'request_id': <id>, 'engine_id': ...,
  'remote_engine_id': ..., 'remote_host': <prefill host>, 'remote_port': ..., ...}``; a
  ``handshake_*`` or ``push_*handshake*`` type is the link, the others (``transfer_failed``,
  ``transfer_exception``, ``transfer_setup_failed``, ``notification_failed``, ...) a transfer. Older
  releases: ``NIXL transfer failed for request <id> with state <state>. Marking blocks as invalid.`` and
  ``Handshake with <remote engine id> failed``.
- vLLM MooncakeConnector, 0.32 and 0.33 (decode side, ``mooncake_connector.py``): ``pulling kv_caches for
  ['<id>', ...] failed: <reason>`` (one finding per request) and ``Failed to connect to bootstrap server
  <addr> (<error type>): <error>``; vllm-ascend's Mooncake connector (prefill side): ``Failed to transfer
  KV cache for request <id>: <error>``.
- vllm-ascend LLM-DataDist connector (``llmdatadist_c_mgr_connector.py``, both sides link): ``try link with
  remote, comm id: pd_comm_<prefill device ip>_<decode device ip>``, then ``Successfully build link with
  cluster id <remote cluster id> with cluster name pd_comm_<prefill device ip>_<decode device ip> !`` or
  ``Linking failed, comm id: <int>`` (raised, so logged as ``KV transfer task failed: ...`` or a thread's
  traceback); per pull (decode side) ``remote cluster id is: <cid>`` and, when it fails, ``KV transfer task
  failed: LLMDataDistCMgrConnectorWorker: Timeout during pull_blocks, ...``. The addresses are the NPUs'
  device IPs, not pod IPs: ``own`` (the pod's addresses, its device IPs among them) tells which side of
  ``pd_comm_<p>_<d>`` is the peer, and ``for_pair`` matches a peer against each pod's device IPs (the
  Ascend device plugin's annotation). Its older connector logs ``local_rank <r> link, ret=<code>``.
- SGLang (decode side): ``Losing connection with prefill instance (bootstrap_addr: <ip:port>)``;
  (prefill side) ``Failed to send kv chunk of <room> to <ip>:<port>``.

A finding names the request (NIXL, Mooncake: Tandem's probes send their own ``X-Request-Id``), or the
peer's address (SGLang, LLM-DataDist through its link line), or neither (then it is the pod's).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Literal, TypedDict

FindingKind = Literal["transfer_failed", "link_failed"]


class LogFinding(TypedDict):
    pod: str  # the pod whose log has the line
    kind: FindingKind
    request: str | None  # the request id the line names
    peer_address: str | None  # the other side's IP (or ip:port) when the line names it
    code: str | None  # an LLM-DataDist status code when the line has one
    line: str  # the line, trimmed, for the operator


_NIXL_FAIL = re.compile(r"NIXL transfer failed for request (\S+) with state (\S+?)\.")
_NIXL_FAILURE = re.compile(r"NIXL transfer failure: (\w+)")
_NIXL_REQUEST = re.compile(r"'request_id': '([^']+)'")
_NIXL_HOST = re.compile(r"'remote_host': '([^']+)'")
_MOONCAKE_PULL = re.compile(r"pulling kv_caches for \[([^\]]*)\] failed")
_QUOTED = re.compile(r"'([^']+)'")
_NIXL_HANDSHAKE = re.compile(r"Handshake with (\S+) failed")
_MOONCAKE_FAIL = re.compile(r"Failed to transfer KV cache for request (\S+?):")
_MOONCAKE_BOOTSTRAP = re.compile(r"Failed to connect to bootstrap server (\S+)")
_DATADIST_LINK = re.compile(
    r"build link with cluster id (\d+) with cluster name pd_comm_([\d.:a-fA-F]+?)_([\d.:a-fA-F]+)"
)
_DATADIST_TRY = re.compile(r"try link with remote, comm id: pd_comm_([\d.:a-fA-F]+?)_([\d.:a-fA-F]+)")
_DATADIST_REMOTE = re.compile(r"remote cluster id is: (\d+)")
_DATADIST_TIMEOUT = re.compile(r"Timeout during pull_blocks")
_DATADIST_LINK_FAILED = re.compile(r"Linking failed, comm id: (\S+)")
_DATADIST_RET = re.compile(r"link, ret=(LLM_[A-Z_]+)")
_SGLANG_LOST = re.compile(r"Losing connection with prefill instance \(bootstrap_addr: ([^)\s]+)\)")
_SGLANG_SEND = re.compile(r"Failed to send kv chunk of \S+ to ([\d.]+):(\d+)")
MAX_LINE = 300  # characters of a line kept for the operator
MAX_READ = 4000  # characters of a line matched (NIXL's context names the peer host past MAX_LINE)
PROBE_ID_PREFIX = "tandem-probe-"
ANCHOR = 3  # lines remembered per pod to find where the previous read ended


def fresh_lines(previous_tail: list[str], lines: list[str]) -> list[str]:
    """The lines after the last ``ANCHOR`` lines read before (all of them when that tail is not found:
    the log rolled over, or this is the first read; then nothing is skipped)."""
    if not previous_tail:
        return lines
    size = len(previous_tail)
    for end in range(len(lines), size - 1, -1):
        if lines[end - size : end] == previous_tail:
            return lines[end:]
    return lines


def _host(address: str) -> str:
    """The host of ``ip``, ``ip:port`` or ``scheme://ip:port/path``."""
    address = address.split("://", 1)[-1].split("/", 1)[0]
    return address.rsplit(":", 1)[0] if address.count(":") == 1 else address


def _other(prefill: str, decode: str, own: frozenset[str]) -> str:
    """The peer's side of ``pd_comm_<prefill>_<decode>`` seen from a pod with addresses ``own`` (the
    prefill's when the pod is not known to be the prefill: the decode side pulls and logs the most)."""
    return decode if prefill in own and decode not in own else prefill


def scan(
    pod: str, lines: Iterable[str], clusters: dict[str, str], own: frozenset[str] = frozenset()
) -> list[LogFinding]:
    """Findings in one pod's new lines. ``clusters`` (LLM-DataDist cluster id → the peer's device IP) is
    read and extended: the link line comes once, the pulls that name the cluster id come later. ``own``:
    the pod's addresses (pod IP and NPU device IPs), to tell the peer in a ``pd_comm_`` name."""
    findings: list[LogFinding] = []
    remote_cluster: str | None = None
    linking: str | None = None  # the peer of the last link attempt ("try link with remote")
    for raw in lines:
        whole = raw.strip()[:MAX_READ]
        line = whole[:MAX_LINE]
        if "NIXL" in line and (match := _NIXL_FAILURE.search(line)):
            kind: FindingKind = "link_failed" if "handshake" in match[1] else "transfer_failed"
            request = _NIXL_REQUEST.search(whole)
            host = _NIXL_HOST.search(whole)
            findings.append(
                _finding(
                    pod, kind, line, request=request[1] if request else None, peer=host[1] if host else None
                )
            )
        elif "NIXL" in line and (match := _NIXL_FAIL.search(line)):
            findings.append(_finding(pod, "transfer_failed", line, request=match[1]))
        elif match := _MOONCAKE_PULL.search(whole):
            requests = _QUOTED.findall(match[1]) or [None]
            findings.extend(_finding(pod, "transfer_failed", line, request=r) for r in requests)
        elif match := _NIXL_HANDSHAKE.search(line):
            findings.append(_finding(pod, "link_failed", line))
        elif match := _MOONCAKE_FAIL.search(line):
            findings.append(_finding(pod, "transfer_failed", line, request=match[1]))
        elif match := _MOONCAKE_BOOTSTRAP.search(line):
            findings.append(_finding(pod, "link_failed", line, peer=_host(match[1])))
        elif match := _DATADIST_TRY.search(line):
            linking = _other(match[1], match[2], own)
        elif match := _DATADIST_LINK.search(line):
            clusters[match[1]] = _other(match[2], match[3], own)
            linking = None
        elif match := _DATADIST_REMOTE.search(line):
            remote_cluster = match[1]
        elif _DATADIST_TIMEOUT.search(line):
            peer = clusters.get(remote_cluster or "")
            findings.append(_finding(pod, "transfer_failed", line, peer=peer))  # it prints no status code
        elif match := _DATADIST_LINK_FAILED.search(line):
            findings.append(_finding(pod, "link_failed", line, peer=linking))
            linking = None
        elif (match := _DATADIST_RET.search(line)) and match[1] != "LLM_SUCCESS":
            findings.append(_finding(pod, "link_failed", line, code=match[1]))
        elif match := _SGLANG_LOST.search(line):
            findings.append(_finding(pod, "link_failed", line, peer=_host(match[1])))
        elif match := _SGLANG_SEND.search(line):
            findings.append(_finding(pod, "transfer_failed", line, peer=match[1]))
    return findings


def _finding(
    pod: str, kind: FindingKind, line: str, *, request: str | None = None, peer: str | None = None,
    code: str | None = None,
) -> LogFinding:  # fmt: skip
    return LogFinding(pod=pod, kind=kind, request=request, peer_address=peer, code=code, line=line)


def for_pair(
    findings: Iterable[LogFinding],
    *,
    prefill: str,
    decode: str,
    prefill_ip: str,
    decode_ip: str,
    probe_requests: list[str],
    prefill_devices: Iterable[str] = (),
    decode_devices: Iterable[str] = (),
    known: frozenset[str] | None = None,
) -> tuple[list[LogFinding], list[LogFinding]]:
    """(findings about this pair, findings of either pod that cannot be tied to one pair: a request of
    the clients' traffic, whose pairing only the router knows, or a line that names no peer, or one
    whose peer address is no pod's). A peer is matched by pod IP or by NPU device IP (``*_devices``,
    LLM-DataDist names device IPs); ``known``: every address of the topology's pods, when given."""
    mine: list[LogFinding] = []
    addresses = {
        prefill: {decode_ip, *decode_devices} - {""},
        decode: {prefill_ip, *prefill_devices} - {""},
    }
    unattributed: list[LogFinding] = []
    for finding in findings:
        if finding["pod"] not in (prefill, decode):
            continue
        peer, request = finding["peer_address"], finding["request"]
        if request is not None and any(probe in request for probe in probe_requests):
            mine.append(finding)
        elif request is not None and PROBE_ID_PREFIX in request:
            continue  # another pair's probe is that pair's
        elif peer is not None and known is not None and _host(peer) not in known:
            unattributed.append(finding)  # a peer no pod has (gone, or its devices unknown): the pod's
        elif peer is not None:  # a line naming its peer (NIXL's remote_host) belongs to that pair
            if _host(peer) in addresses[finding["pod"]]:
                mine.append(finding)
        else:
            unattributed.append(finding)
    return mine, unattributed
