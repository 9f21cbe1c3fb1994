"""The one door to Kubernetes. Nothing outside this package imports ``kubernetes``.

Public API (import from ``kube``)::

    ClusterConnection(cluster_id, server, token, ca_data, client_cert, client_key, credential_version,
                      cluster_name="")  # built by clusters.selectors.cluster_connection(cluster)
    api_client(conn) -> kubernetes.client.ApiClient  # cached per id + credential_version; TLS verify on
    forget(cluster_id)  # drop the cached client (credentials changed, cluster removed)

    KubeError(message, status, reason)  # message is readable and names the cluster and the action
      KubeUnreachable   connection/TLS failure, timeout, 5xx/429 after every retry
      KubeUnauthorized  401            KubeForbidden  403            KubeNotFound  404
      KubeConflict      409            KubeInvalid    400/422, .causes = [(field, message)]
      KubeNotInstalled  the cluster does not serve that apiVersion/kind (e.g. Kthena CRDs missing)

    get_version(conn) -> str                                            # "v1.31.2"
    apply_objects(conn, objects, *, force=True) -> list[dict]
        # server-side apply, field manager "tandem", dependency order;
        # conflicts forced only on objects carrying Tandem's managed-by label
    get_object(conn, api_version, kind, namespace, name) -> dict | None
    list_objects(conn, api_version, kind, namespace, label_selector="") -> list[dict]
    delete_object(conn, api_version, kind, namespace, name) -> bool     # False if already gone
    scale(conn, api_version, kind, namespace, name, replicas) -> None   # scale subresource
    update_object(conn, api_version, kind, namespace, name, mutate) -> dict  # 409 → re-read, retry
        # every write names the field manager "tandem" (kube.labels.FIELD_MANAGER): managedFields tell
        # Tandem's replica changes from anyone else's
    replica_owners(conn, namespace, [(api_version, kind, name)]) -> OwnerReadout  # workloads + autoscalers
    ratio_constraint_set(conn, namespace, policy, numerator=, denominator=, min_ratio=, max_ratio=) -> dict
    list_pods(conn, namespace, label_selector) -> list[PodInfo]
    list_events(conn, namespace, involved_names=None) -> list[EventInfo]
    pod_log_tail(conn, namespace, pod, lines=50, previous=False) -> str
    pod_log_lines(conn, namespace, pod, *, tail_lines, since_seconds) -> list[str]   (telemetry's log reads)
    installed_crds(conn) -> set[str]                                    # CRD names
    access_review(conn, [(verb, group, resource, namespace), ...]) -> {AccessCheck: AccessResult}
    rules_review(conn, namespace) -> RulesReview(resource_rules, incomplete)  # SelfSubjectRulesReview
    list_nodes(conn) -> list[NodeInfo]            # accelerator capacity / allocatable / in use per node
    pod_proxy_get(conn, namespace, pod, port, path) -> Response  # GET through the pods proxy (any status)
    pod_proxy_post(conn, namespace, pod, port, path, body) -> Response  # POST JSON likewise, never retried
    patch_pod_labels(conn, namespace, pod, labels) -> None  # merge-patch a running pod's labels
    proxy_transport(conn) -> ProxyTransport       # URLs, auth header and TLS context for async proxy calls
    describe_proxy_failure(status, body) -> str   # "403 from API server, grant get on pods/proxy ..."
    sample_running_pods(conn, namespace=None) -> list[ProxyPod]  # a few Running pods with IP and port
    service_ingress(conn, namespace, name) -> list[str]  # a LoadBalancer Service's external addresses
    service_external_url(conn, namespace, name, deadline=) -> str  # http(s)://<address>:<port>; "" gone
    service_url(service) -> str                   # the same from a Service object (pure): the scheme rules

Every call has a short timeout and goes through ``kube.retry``: 429 honours Retry-After, 5xx and connection
errors back off exponentially with jitter (bounded attempts), 4xx are never retried, 409 on an update
re-reads and retries. ``kube.kubeconfig`` turns an uploaded kubeconfig into credentials (pure), and
``kube.labels`` holds the labels Tandem puts on everything it renders.
"""

from __future__ import annotations

from kube.client import ClusterConnection, api_client, forget, request
from kube.cluster_info import (
    AccessCheck,
    AccessResult,
    NodeInfo,
    RulesReview,
    access_review,
    get_version,
    installed_crds,
    is_accelerator_resource,
    list_nodes,
    rules_review,
)
from kube.errors import (
    KubeConflict,
    KubeError,
    KubeForbidden,
    KubeInvalid,
    KubeNotFound,
    KubeNotInstalled,
    KubeUnauthorized,
    KubeUnreachable,
)
from kube.owners import OwnerReadout, ratio_constraint_set, replica_owners
from kube.proxy import (
    SERVING_SCHEME_ANNOTATION,
    ProxyTransport,
    describe_proxy_failure,
    pod_proxy_get,
    pod_proxy_post,
    proxy_transport,
    sample_running_pods,
    service_external_url,
    service_ingress,
    service_url,
)
from kube.proxy import PodTarget as ProxyPod
from kube.resources import apply_objects, delete_object, get_object, list_objects, scale, update_object
from kube.workloads import (
    EventInfo,
    PodInfo,
    list_events,
    list_pods,
    patch_pod_labels,
    pod_log_lines,
    pod_log_tail,
)

__all__ = [
    "SERVING_SCHEME_ANNOTATION",
    "AccessCheck",
    "AccessResult",
    "ClusterConnection",
    "EventInfo",
    "KubeConflict",
    "KubeError",
    "KubeForbidden",
    "KubeInvalid",
    "KubeNotFound",
    "KubeNotInstalled",
    "KubeUnauthorized",
    "KubeUnreachable",
    "NodeInfo",
    "OwnerReadout",
    "PodInfo",
    "ProxyPod",
    "ProxyTransport",
    "RulesReview",
    "access_review",
    "api_client",
    "apply_objects",
    "delete_object",
    "describe_proxy_failure",
    "forget",
    "get_object",
    "get_version",
    "installed_crds",
    "is_accelerator_resource",
    "list_events",
    "list_nodes",
    "list_objects",
    "list_pods",
    "patch_pod_labels",
    "pod_log_lines",
    "pod_log_tail",
    "pod_proxy_get",
    "pod_proxy_post",
    "proxy_transport",
    "ratio_constraint_set",
    "replica_owners",
    "request",
    "rules_review",
    "sample_running_pods",
    "scale",
    "service_external_url",
    "service_ingress",
    "service_url",
    "update_object",
]
