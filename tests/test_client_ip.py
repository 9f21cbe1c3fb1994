from __future__ import annotations

from controlplane.client_ip import resolve_client_ip


def test_without_trusted_proxies_the_peer_address_is_the_client():
    assert resolve_client_ip("10.0.0.9", "203.0.113.5", []) == "10.0.0.9"


def test_forwarded_for_from_an_untrusted_peer_is_ignored():
    assert resolve_client_ip("198.51.100.7", "203.0.113.5", ["10.0.0.0/8"]) == "198.51.100.7"


def test_the_first_untrusted_hop_from_the_right_is_the_client():
    # client -> attacker-supplied header value -> edge proxy -> ingress -> Tandem
    header = "1.2.3.4, 203.0.113.5, 10.0.0.2"
    assert resolve_client_ip("10.0.0.1", header, ["10.0.0.0/8"]) == "203.0.113.5"


def test_ports_ipv6_and_garbage_are_handled():
    assert resolve_client_ip("10.0.0.1", "[2001:db8::1]:4711", ["10.0.0.1"]) == "2001:db8::1"
    assert resolve_client_ip("10.0.0.1", "203.0.113.5:51000", ["10.0.0.1"]) == "203.0.113.5"
    assert resolve_client_ip("10.0.0.1", "not-an-ip", ["10.0.0.1"]) == "10.0.0.1"
    assert resolve_client_ip(None, "203.0.113.5", ["10.0.0.1"]) is None
