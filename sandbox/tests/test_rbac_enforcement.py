"""RBAC enforced over real HTTP: ServiceAccount tokens, bindings, the 403 bodies, reviews, kubectl."""

from __future__ import annotations

import json
import uuid

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

RBAC = "rbac.authorization.k8s.io"


@pytest.fixture
def rbac_api(sandbox_cluster):
    return client.RbacAuthorizationV1Api(sandbox_cluster.api_client())


@pytest.fixture
def bot(sandbox_cluster, core, namespace):
    """A ServiceAccount `bot` in the test's namespace with no bindings, and a client using its token."""
    core.create_namespaced_service_account(namespace, {"metadata": {"name": "bot"}})
    token = sandbox_cluster.service_account_token(namespace, "bot")
    return token, sandbox_cluster.api_client(token)


def _user(namespace: str) -> str:
    return f"system:serviceaccount:{namespace}:bot"


def _bind(rbac_api, namespace: str, role_kind: str, role: str, *, cluster_wide: bool = False) -> None:
    name = f"bot-{role.replace(':', '-')}-{uuid.uuid4().hex[:4]}"
    body = {
        "metadata": {"name": name},
        "roleRef": {"apiGroup": RBAC, "kind": role_kind, "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": "bot", "namespace": namespace}],
    }
    if cluster_wide:
        rbac_api.create_cluster_role_binding(body)
    else:
        rbac_api.create_namespaced_role_binding(namespace, body)


def _role(rbac_api, namespace: str, name: str, rules: list[dict]) -> None:  # type: ignore[type-arg]
    rbac_api.create_namespaced_role(namespace, {"metadata": {"name": name}, "rules": rules})


def _forbidden(call) -> dict:  # type: ignore[no-untyped-def,type-arg]
    with pytest.raises(ApiException) as exc:
        call()
    assert exc.value.status == 403, exc.value.body
    return json.loads(exc.value.body)


def test_a_token_without_bindings_may_only_discover_and_review(bot, namespace, sandbox_cluster) -> None:
    _, api = bot
    core = client.CoreV1Api(api)
    body = _forbidden(lambda: core.list_namespaced_pod(namespace))
    assert body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f'pods is forbidden: User "{_user(namespace)}" cannot list resource "pods" '
        f'in API group "" in the namespace "{namespace}"',
        "reason": "Forbidden",
        "details": {"kind": "pods"},
        "code": 403,
    }
    nodes = _forbidden(lambda: core.list_node())
    assert nodes["message"].endswith('cannot list resource "nodes" in API group "" at the cluster scope')
    assert client.VersionApi(api).get_code().git_version.startswith("v1.")
    assert client.CoreApi(api).get_api_versions().versions == ["v1"]
    review = client.AuthorizationV1Api(api).create_self_subject_access_review(
        {"spec": {"resourceAttributes": {"verb": "list", "resource": "pods", "namespace": namespace}}}
    )
    assert review.status.allowed is False


def test_missing_or_invalid_tokens_are_unauthorized(sandbox_cluster, bot, core, namespace) -> None:
    token, _ = bot
    for given in ("", "not-a-token", token[:-4] + "AAAA"):
        with pytest.raises(ApiException) as exc:
            client.CoreV1Api(sandbox_cluster.api_client(given or " ")).list_namespaced_pod(namespace)
        assert exc.value.status == 401 and json.loads(exc.value.body)["reason"] == "Unauthorized"
    core.delete_namespaced_service_account("bot", namespace)
    with pytest.raises(ApiException) as exc:
        client.CoreV1Api(sandbox_cluster.api_client(token)).list_namespaced_pod(namespace)
    assert exc.value.status == 401, "a deleted ServiceAccount's token is void"


def test_token_request_validates_its_expiration(sandbox_cluster, core, namespace) -> None:
    core.create_namespaced_service_account(namespace, {"metadata": {"name": "short"}})
    with pytest.raises(ApiException) as exc:
        sandbox_cluster.service_account_token(namespace, "short", expiration_seconds=60)
    assert exc.value.status == 422
    assert "may not specify a duration less than 10 minutes" in json.loads(exc.value.body)["message"]
    with pytest.raises(ApiException) as missing:
        sandbox_cluster.service_account_token(namespace, "nobody")
    assert missing.value.status == 404


def test_view_reads_but_may_not_write(bot, rbac_api, namespace, core) -> None:
    _bind(rbac_api, namespace, "ClusterRole", "view")
    _, api = bot
    bot_core = client.CoreV1Api(api)
    assert bot_core.list_namespaced_pod(namespace).items == []
    assert bot_core.read_namespace(namespace).metadata.name == namespace, "a namespace is read in itself"
    body = _forbidden(
        lambda: bot_core.create_namespaced_config_map(
            namespace, {"metadata": {"name": "c"}, "data": {"k": "v"}}
        )
    )
    assert body["message"] == (
        f'configmaps is forbidden: User "{_user(namespace)}" cannot create resource "configmaps" '
        f'in API group "" in the namespace "{namespace}"'
    )
    secret = _forbidden(lambda: bot_core.read_namespaced_secret("s", namespace))
    assert secret["details"] == {"name": "s", "kind": "secrets"}
    other = _forbidden(lambda: bot_core.list_namespaced_pod("default"))
    assert other["message"].endswith('in the namespace "default"'), (
        "a RoleBinding grants in its namespace only"
    )


def test_verbs_subresources_and_resource_names_are_checked_one_by_one(
    bot, rbac_api, namespace, core, sandbox_cluster
) -> None:
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "allowed"}, "data": {"k": "v"}})
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "other"}, "data": {"k": "v"}})
    _role(
        rbac_api,
        namespace,
        "narrow",
        [
            {
                "apiGroups": [""],
                "resources": ["configmaps"],
                "verbs": ["get", "patch"],
                "resourceNames": ["allowed"],
            },
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]},
            {
                "apiGroups": ["workload.serving.volcano.sh"],
                "resources": ["modelservings"],
                "verbs": ["get", "patch"],
            },
        ],
    )
    _bind(rbac_api, namespace, "Role", "narrow")
    token, api = bot
    bot_core = client.CoreV1Api(api)
    assert bot_core.read_namespaced_config_map("allowed", namespace).data == {"k": "v"}
    bot_core.patch_namespaced_config_map("allowed", namespace, {"data": {"k": "w"}})
    assert (
        _forbidden(lambda: bot_core.read_namespaced_config_map("other", namespace))["details"]["name"]
        == "other"
    )
    assert (
        "cannot list resource"
        in _forbidden(lambda: bot_core.list_namespaced_config_map(namespace))["message"]
    )
    watch = _forbidden(lambda: bot_core.list_namespaced_pod(namespace, watch=True, timeout_seconds=1))
    assert f'cannot watch resource "pods" in API group "" in the namespace "{namespace}"' in watch["message"]
    delete_all = _forbidden(lambda: bot_core.delete_collection_namespaced_config_map(namespace))
    assert 'cannot deletecollection resource "configmaps"' in delete_all["message"]
    log = _forbidden(lambda: bot_core.read_namespaced_pod_log("p-0", namespace))
    assert log["message"] == (
        f'pods "p-0" is forbidden: User "{_user(namespace)}" cannot get resource "pods/log" in API group "" '
        f'in the namespace "{namespace}"'
    )
    custom = client.CustomObjectsApi(api)
    scale = _forbidden(
        lambda: custom.patch_namespaced_custom_object_scale(
            "workload.serving.volcano.sh",
            "v1alpha1",
            namespace,
            "modelservings",
            "m",
            {"spec": {"replicas": 2}},
        )
    )
    assert scale["message"].endswith(
        'cannot patch resource "modelservings/scale" in API group "workload.serving.volcano.sh" '
        f'in the namespace "{namespace}"'
    )
    assert scale["details"] == {"name": "m", "group": "workload.serving.volcano.sh", "kind": "modelservings"}
    # The API server's proxy subresources are checked like any other (pods/proxy, services/proxy).
    for path, resource, name in (
        (f"/api/v1/namespaces/{namespace}/pods/p-0:8000/proxy/metrics", "pods/proxy", "p-0:8000"),
        (
            f"/api/v1/namespaces/{namespace}/services/router:8000/proxy/metrics",
            "services/proxy",
            "router:8000",
        ),
    ):
        result = sandbox_cluster.kubectl("--token", token, "get", "--raw", path)
        assert result.returncode != 0
        assert (
            f'"{name}" is forbidden' in result.stderr and f'cannot get resource "{resource}"' in result.stderr
        )


def test_access_and_rules_reviews_answer_from_the_bindings(bot, rbac_api, namespace) -> None:
    _bind(rbac_api, namespace, "ClusterRole", "edit")
    _, api = bot
    authz = client.AuthorizationV1Api(api)

    def can(verb: str, resource: str, ns: str = namespace, **extra: str) -> bool:
        attrs = {"verb": verb, "resource": resource, "namespace": ns, **extra}
        return bool(
            authz.create_self_subject_access_review({"spec": {"resourceAttributes": attrs}}).status.allowed
        )

    assert can("create", "configmaps") and can("patch", "deployments", group="apps")
    assert can("get", "pods", subresource="log") and can("get", "pods", subresource="proxy")
    assert not can("create", "roles", group=RBAC), "edit cannot manage RBAC"
    assert not can("create", "configmaps", ns="default")
    assert not can("list", "nodes", ns="")
    granted = authz.create_self_subject_access_review(
        {"spec": {"resourceAttributes": {"verb": "create", "resource": "configmaps", "namespace": namespace}}}
    ).status
    assert (
        granted.reason.startswith("RBAC: allowed by RoleBinding")
        and 'of ClusterRole "edit"' in granted.reason
    )
    url = authz.create_self_subject_access_review(
        {"spec": {"nonResourceAttributes": {"verb": "get", "path": "/apis"}}}
    )
    assert url.status.allowed is True
    rules = authz.create_self_subject_rules_review({"spec": {"namespace": namespace}}).status
    assert rules.incomplete is False
    assert any("configmaps" in r.resources and "create" in r.verbs for r in rules.resource_rules)
    assert any("/version" in r.non_resource_urls for r in rules.non_resource_rules)
    elsewhere = authz.create_self_subject_rules_review({"spec": {"namespace": "default"}}).status
    assert not any("configmaps" in r.resources for r in elsewhere.resource_rules)


def test_cluster_roles_aggregate_labelled_roles(bot, rbac_api, namespace) -> None:
    name = f"view-modelservings-{uuid.uuid4().hex[:6]}"
    rbac_api.create_cluster_role(
        {
            "metadata": {"name": name, "labels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
            "rules": [
                {
                    "apiGroups": ["workload.serving.volcano.sh"],
                    "resources": ["modelservings"],
                    "verbs": ["list"],
                }
            ],
        }
    )
    try:
        view = rbac_api.read_cluster_role("view")
        assert any("modelservings" in (r.resources or []) for r in view.rules), (
            "view picked up the labelled role"
        )
        assert any("modelservings" in (r.resources or []) for r in rbac_api.read_cluster_role("admin").rules)
        _bind(rbac_api, namespace, "ClusterRole", "view")
        _, api = bot
        client.CustomObjectsApi(api).list_namespaced_custom_object(
            "workload.serving.volcano.sh", "v1alpha1", namespace, "modelservings"
        )
    finally:
        rbac_api.delete_cluster_role(name)
    assert not any("modelservings" in (r.resources or []) for r in rbac_api.read_cluster_role("view").rules)


def test_a_role_may_grant_only_what_its_author_holds(bot, rbac_api, namespace) -> None:
    _role(
        rbac_api,
        namespace,
        "rbac-writer",
        [
            {"apiGroups": [RBAC], "resources": ["roles", "rolebindings"], "verbs": ["create", "get"]},
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
        ],
    )
    _bind(rbac_api, namespace, "Role", "rbac-writer")
    _, api = bot
    bot_rbac = client.RbacAuthorizationV1Api(api)
    pods = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]
    bot_rbac.create_namespaced_role(namespace, {"metadata": {"name": "pods-reader"}, "rules": pods})
    wider = [{"apiGroups": [""], "resources": ["pods", "endpoints"], "verbs": ["get"]}]
    body = _forbidden(
        lambda: bot_rbac.create_namespaced_role(namespace, {"metadata": {"name": "wider"}, "rules": wider})
    )
    assert body["message"].startswith(
        f'roles.rbac.authorization.k8s.io "wider" is forbidden: user "{_user(namespace)}" (groups=['
    )
    assert (
        'attempting to grant RBAC permissions not currently held:\n{APIGroups:[""], Resources:["endpoints"]'
        in (body["message"])
    )
    binding = {
        "metadata": {"name": "to-edit"},
        "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "edit"},
        "subjects": [{"kind": "ServiceAccount", "name": "bot", "namespace": namespace}],
    }
    assert (
        "not currently held"
        in _forbidden(lambda: bot_rbac.create_namespaced_role_binding(namespace, binding))["message"]
    )


def test_kubectl_create_token_and_auth_can_i(sandbox_cluster, core, rbac_api, namespace, tmp_path) -> None:
    created = sandbox_cluster.kubectl("create", "serviceaccount", "ops", "-n", namespace)
    assert created.returncode == 0, created.stderr
    issued = sandbox_cluster.kubectl("create", "token", "ops", "-n", namespace, "--duration=20m")
    assert issued.returncode == 0, issued.stderr
    token = issued.stdout.strip()
    kubeconfig = sandbox_cluster.service_account_kubeconfig(token, tmp_path / "ops")
    bound = sandbox_cluster.kubectl(
        "create",
        "rolebinding",
        "ops-view",
        "--clusterrole=view",
        f"--serviceaccount={namespace}:ops",
        "-n",
        namespace,
    )
    assert bound.returncode == 0, bound.stderr

    def as_ops(*args: str):  # type: ignore[no-untyped-def]
        return sandbox_cluster.kubectl("--kubeconfig", str(kubeconfig), *args)

    yes = as_ops("auth", "can-i", "list", "pods", "-n", namespace)
    assert (yes.returncode, yes.stdout.strip()) == (0, "yes")
    no = as_ops("auth", "can-i", "create", "configmaps", "-n", namespace)
    assert (no.returncode, no.stdout.strip()) == (1, "no")
    assert (
        as_ops("auth", "can-i", "get", "pods", "--subresource=log", "-n", namespace).stdout.strip() == "yes"
    )
    listing = as_ops("auth", "can-i", "--list", "-n", namespace)
    assert listing.returncode == 0, listing.stderr
    lines = listing.stdout.splitlines()
    assert any(line.split()[0] == "pods" and "[get list watch]" in line for line in lines)
    assert any("selfsubjectaccessreviews.authorization.k8s.io" in line for line in lines)
    refused = as_ops("create", "configmap", "x", "-n", namespace, "--from-literal=a=b")
    assert refused.returncode != 0
    assert (
        f'configmaps is forbidden: User "system:serviceaccount:{namespace}:ops" cannot create resource '
        f'"configmaps" in API group "" in the namespace "{namespace}"' in refused.stderr
    )
    assert as_ops("get", "pods", "-n", namespace).returncode == 0


def test_rbac_objects_are_validated_like_the_api_server_does(rbac_api, namespace) -> None:
    def invalid(call) -> list[tuple[str, str]]:  # type: ignore[no-untyped-def]
        with pytest.raises(ApiException) as exc:
            call()
        assert exc.value.status == 422, exc.value.body
        return [(c["field"], c["message"]) for c in json.loads(exc.value.body)["details"]["causes"]]

    rules = [
        {"apiGroups": [""], "resources": ["pods"], "verbs": []},
        {"nonResourceURLs": ["/metrics"], "verbs": ["get"]},
    ]
    assert invalid(
        lambda: rbac_api.create_namespaced_role(namespace, {"metadata": {"name": "bad"}, "rules": rules})
    ) == [
        ("rules[0].verbs", "Required value: verbs must contain at least one value"),
        (
            "rules[1].nonResourceURLs",
            'Invalid value: []string{"/metrics"}: namespaced rules cannot apply to non-resource URLs',
        ),
    ]
    binding = {
        "metadata": {"name": "bad"},
        "roleRef": {"apiGroup": RBAC, "kind": "Role", "name": "x"},
        "subjects": [{"kind": "ServiceAccount", "name": "bot"}, {"kind": "Robot", "name": "r"}],
    }
    assert invalid(lambda: rbac_api.create_cluster_role_binding(binding)) == [
        ("roleRef.kind", 'Unsupported value: "Role": supported values: "ClusterRole"'),
        ("subjects[0].namespace", "Required value"),
        (
            "subjects[1].kind",
            'Unsupported value: "Robot": supported values: "ServiceAccount", "User", "Group"',
        ),
    ]
    _bind(rbac_api, namespace, "ClusterRole", "view")
    [created] = rbac_api.list_namespaced_role_binding(namespace).items
    changed = {"roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "edit"}}
    [(field, message)] = invalid(
        lambda: rbac_api.patch_namespaced_role_binding(created.metadata.name, namespace, changed)
    )
    assert field == "roleRef" and message.endswith("cannot change roleRef")
