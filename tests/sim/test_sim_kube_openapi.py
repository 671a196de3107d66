"""The OpenAPI documents sim serves (made from the `kubernetes` client's models and CRDs) and strict field
validation against them."""

from __future__ import annotations

import json

import pytest

from sim.kube import fieldvalidation
from sim.kube.crds import karpenter_crds
from sim.kube.errors import ApiError
from sim.kube.openapi import V3_PREFIX, OpenApiDocuments
from sim.kube.resources import Registry


@pytest.fixture
def docs() -> OpenApiDocuments:
    registry = Registry()
    crds = karpenter_crds()
    for crd in crds:
        registry.register_crd(crd)
    return OpenApiDocuments(registry.all, lambda: crds)


def test_v3_index_lists_every_group_version_by_hash(docs: OpenApiDocuments) -> None:
    paths = json.loads(docs.v3_index())["paths"]
    assert {"api/v1", "apis/apps/v1", "apis/policy/v1", "apis/karpenter.sh/v1"} <= paths.keys()
    assert paths["apis/apps/v1"]["serverRelativeURL"].startswith("/openapi/v3/apis/apps/v1?hash=")
    assert docs.v3_index() == docs.v3_index()  # cached, stable


def test_patch_operations_take_field_validation(docs: OpenApiDocuments) -> None:
    """What kubectl looks for before it leaves validation to the server."""
    doc = json.loads(docs.v3_document("apps", "v1") or b"")
    patch = doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"]
    assert patch["x-kubernetes-group-version-kind"] == {"group": "apps", "version": "v1", "kind": "Deployment"}
    assert {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": True}} in patch[
        "parameters"]
    nodes = json.loads(docs.v3_document("", "v1") or b"")["paths"]["/api/v1/nodes/{name}"]
    assert nodes["patch"]["x-kubernetes-group-version-kind"]["kind"] == "Node"
    assert docs.v3_document("nope", "v1") is None


def test_schemas_have_the_kubernetes_names_fields_and_types(docs: OpenApiDocuments) -> None:
    schemas = json.loads(docs.v3_document("apps", "v1") or b"")["components"]["schemas"]
    deployment = schemas["io.k8s.api.apps.v1.Deployment"]
    assert deployment["x-kubernetes-group-version-kind"] == [{"group": "apps", "version": "v1", "kind": "Deployment"}]
    assert deployment["properties"]["spec"] == {"$ref": V3_PREFIX + "io.k8s.api.apps.v1.DeploymentSpec"}
    assert deployment["properties"]["metadata"] == {"$ref": V3_PREFIX + "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}
    assert schemas["io.k8s.api.apps.v1.DeploymentSpec"]["properties"]["replicas"]["type"] == "integer"
    containers = schemas["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"]
    assert containers["items"] == {"$ref": V3_PREFIX + "io.k8s.api.core.v1.Container"}
    assert containers["x-kubernetes-patch-merge-key"] == "name"
    assert "imagePullPolicy" in schemas["io.k8s.api.core.v1.Container"]["properties"]
    assert schemas["io.k8s.api.apps.v1.RollingUpdateDeployment"]["properties"]["maxSurge"]["x-kubernetes-int-or-string"]


def test_v2_document_and_custom_resources(docs: OpenApiDocuments) -> None:
    v2 = json.loads(docs.v2_document())
    assert v2["swagger"] == "2.0"
    assert v2["definitions"]["io.k8s.api.core.v1.Pod"]["properties"]["spec"] == {
        "$ref": "#/definitions/io.k8s.api.core.v1.PodSpec"}
    nodepool = v2["definitions"]["sh.karpenter.v1.NodePool"]
    # #28.4: the kinds nodescale reads have structural schemas (infra/manifests/crds/); NodeClaim keeps all.
    assert "x-kubernetes-preserve-unknown-fields" not in nodepool
    assert "requirements" in nodepool["properties"]["spec"]["properties"]["template"]["properties"]["spec"]["properties"]
    assert "x-kubernetes-preserve-unknown-fields" not in v2["definitions"]["sh.karpenter.v1.NodeClaim"]
    assert v2["definitions"]["sh.karpenter.v1alpha5.Machine"]["x-kubernetes-preserve-unknown-fields"] is True
    assert nodepool["x-kubernetes-group-version-kind"] == [{"group": "karpenter.sh", "version": "v1", "kind": "NodePool"}]


def test_unknown_fields_and_the_three_modes(docs: OpenApiDocuments) -> None:
    registry = Registry()
    for crd in karpenter_crds():
        registry.register_crd(crd)
    schema, components = docs.schema_for(registry.get("apps/v1/deployments")) or ({}, {})
    body = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x", "labels": {"any": "thing"}},
            "spec": {"replica": 2, "template": {"spec": {"containers": [{"name": "a", "imagePullPolcy": "x"}]}}}}
    fields = fieldvalidation.unknown_fields(body, schema, components)
    assert fields == ["spec.replica", "spec.template.spec.containers[0].imagePullPolcy"]
    with pytest.raises(ApiError) as refused:
        fieldvalidation.check("Deployment", "v1", fields, "Strict", "create")
    assert refused.value.status == 400 and refused.value.reason == "BadRequest"
    assert refused.value.message == (
        'Deployment in version "v1" cannot be handled as a Deployment: strict decoding error: '
        'unknown field "spec.replica", unknown field "spec.template.spec.containers[0].imagePullPolcy"')
    assert fieldvalidation.check("Deployment", "v1", fields, "Warn", "patch") == [
        'unknown field "spec.replica"', 'unknown field "spec.template.spec.containers[0].imagePullPolcy"']
    assert fieldvalidation.check("Deployment", "v1", fields, "Ignore", "create") == []
    patch = {"spec": {"template": {"spec": {"$setElementOrder/containers": [{"name": "a"}]}}}}
    assert fieldvalidation.unknown_fields(patch, schema, components, patch=True) == []
    with pytest.raises(ApiError):
        fieldvalidation.mode({"fieldValidation": "Loud"})
    nodepools = registry.lookup("karpenter.sh", "v1", "nodepools")
    assert nodepools is not None
    nodepool, components = docs.schema_for(nodepools) or ({}, {})
    assert nodepool["properties"]["metadata"] == {"$ref": V3_PREFIX + "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}
    assert fieldvalidation.unknown_fields({"spec": {"anything": 1, "weight": 1}}, nodepool, components) == [
        "spec.anything"]
    nodeclaims = registry.lookup("karpenter.sh", "v1", "nodeclaims")
    assert nodeclaims is not None
    nodeclaim, components = docs.schema_for(nodeclaims) or ({}, {})
    assert fieldvalidation.unknown_fields({"spec": {"anything": 1, "expireAfter": "1h"}}, nodeclaim, components) == [
        "spec.anything"]


def test_served_over_https_with_the_documents_and_tables() -> None:
    """kubectl sends its token only over TLS: the same API on a second, HTTPS listener."""
    import ssl
    import urllib.error
    import urllib.request

    from sim.aws.constants import KUBE_ADMIN_TOKEN
    from sim.kube.server import KubeServer
    from sim.kube.store import Store
    from sim.kube.tls import self_signed

    certificate = self_signed()
    context = ssl.create_default_context(cadata=certificate.cert_pem.decode())
    with KubeServer(Store(), tls=certificate) as server:
        assert server.secure_url and server.secure_url.startswith("https://127.0.0.1:")

        def get(path: str, accept: str = "application/json") -> tuple[int, dict, dict]:
            request = urllib.request.Request(str(server.secure_url) + path, headers={
                "Authorization": f"Bearer {KUBE_ADMIN_TOKEN}", "Accept": accept})
            try:
                with urllib.request.urlopen(request, context=context, timeout=10) as response:
                    return response.status, json.loads(response.read()), dict(response.headers)
            except urllib.error.HTTPError as error:
                return error.code, json.loads(error.read()), dict(error.headers)

        status, index, _ = get("/openapi/v3")
        assert status == 200 and "apis/apps/v1" in index["paths"]
        status, doc, headers = get(index["paths"]["apis/apps/v1"]["serverRelativeURL"])
        assert status == 200 and doc["openapi"] == "3.0.0" and headers["Cache-Control"] == "public, immutable"
        status, body, _ = get("/openapi/v2", accept="application/com.github.proto-openapi.spec.v2@v1.0+protobuf")
        assert (status, body["reason"]) == (406, "NotAcceptable")
        status, listed, _ = get("/api/v1/namespaces", accept="application/json;as=Table;v=v1;g=meta.k8s.io")
        assert status == 200 and listed["kind"] == "Table"
        assert [c["name"] for c in listed["columnDefinitions"]] == ["Name", "Status", "Age"]
        assert {"default", "kube-system"} <= {row["cells"][0] for row in listed["rows"]}
