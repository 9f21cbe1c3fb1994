"""Where the proxy subresources send a request (pure): name/port/scheme parsing, pod and service targets."""

from __future__ import annotations

import pytest

from sandbox.apiserver.errors import ApiError
from sandbox.apiserver.proxy import ProxyName, pod_location, service_location, split_name

POD = {
    "spec": {"containers": [{"ports": [{"name": "http", "containerPort": 8000}]}]},
    "status": {"podIP": "127.9.1.2"},
}


@pytest.mark.parametrize(
    ("segment", "expected"),
    [
        ("p", ProxyName("http", "p", "")),
        ("p:8000", ProxyName("http", "p", "8000")),
        ("https:p:8443", ProxyName("https", "p", "8443")),
        ("http:p:http", ProxyName("http", "p", "http")),
    ],
)
def test_scheme_name_and_port_are_split_like_upstream(segment, expected):
    assert split_name(segment) == expected


def test_other_schemes_are_a_bad_request():
    with pytest.raises(ApiError) as caught:
        split_name("ftp:p:21")
    assert caught.value.code == 400


def test_pod_ports_by_number_name_or_the_http_default():
    assert pod_location(POD, split_name("p:9000")) == ("127.9.1.2", 9000)
    assert pod_location(POD, split_name("p:http")) == ("127.9.1.2", 8000)
    assert pod_location(POD, split_name("p")) == ("127.9.1.2", 80)
    with pytest.raises(ApiError) as caught:
        pod_location({"status": {}}, split_name("p:8000"))
    assert caught.value.code == 503


def test_service_goes_to_a_ready_endpoint_of_the_named_port():
    service = {"spec": {"ports": [{"name": "web", "port": 80}, {"name": "metrics", "port": 9100}]}}
    endpoints = {
        "subsets": [
            {
                "addresses": [{"ip": "127.9.1.3"}],
                "notReadyAddresses": [{"ip": "127.9.1.4"}],
                "ports": [{"name": "web", "port": 8000}, {"name": "metrics", "port": 9101}],
            }
        ]
    }
    assert service_location(service, endpoints, split_name("s:metrics")) == ("127.9.1.3", 9101)
    assert service_location(service, endpoints, split_name("s:80")) == ("127.9.1.3", 8000)
    with pytest.raises(ApiError) as several:
        service_location(service, endpoints, split_name("s"))
    assert several.value.code == 400
    with pytest.raises(ApiError) as empty:
        service_location(service, {"subsets": []}, split_name("s:web"))
    assert empty.value.code == 503 and empty.value.message == 'no endpoints available for service "s"'
