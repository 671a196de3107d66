"""#28.4: the CRDs nodescale ships (infra/manifests/crds/) have structural schemas made from the one field
table (config/schema.py), as Karpenter's CRDs do, instead of `x-kubernetes-preserve-unknown-fields` on
spec, which let `kubectl apply` "create" a Provisioner with any typo in it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from nodescale.config import crds
from nodescale.config.schema import SCHEMAS

CRD_DIR = Path(__file__).resolve().parents[2] / "infra" / "manifests" / "crds"


def test_the_shipped_files_are_the_generated_ones():
    generated = {crds.file_name(m): crds.manifest_text(m) for m in crds.all_crds()}
    assert sorted(generated) == sorted(p.name for p in CRD_DIR.glob("*.yaml"))
    for name, text in generated.items():
        assert (CRD_DIR / name).read_text() == text, f"{name} is stale: run scripts/gen_crds.py"


def _walk(schema: dict, path: str):
    yield path, schema
    for key, sub in (schema.get("properties") or {}).items():
        yield from _walk(sub, f"{path}.{key}")
    if isinstance(schema.get("items"), dict):
        yield from _walk(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from _walk(schema["additionalProperties"], f"{path}{{}}")


@pytest.mark.parametrize("manifest", crds.all_crds(), ids=lambda m: m["metadata"]["name"])
def test_every_version_is_structural_and_covers_its_generation(manifest):
    spec = manifest["spec"]
    assert [v["name"] for v in spec["versions"] if v["storage"]] == [spec["versions"][0]["name"]]
    for version in spec["versions"]:
        root = version["schema"]["openAPIV3Schema"]
        assert "x-kubernetes-preserve-unknown-fields" not in root["properties"]["spec"]
        for path, node in _walk(root, ""):
            # Structural: every node says its type, or is int-or-string, or keeps anything (a free-form place).
            assert node.get("type") or node.get("x-kubernetes-int-or-string") or \
                node.get("x-kubernetes-preserve-unknown-fields"), path
        key = (f"{spec['group']}/{version['name']}", spec["names"]["kind"])
        if key == ("karpenter.sh/v1", "NodeClaim"):
            continue  # written, not read (#30.1): its schema is its own table, config/nodeclaim_schema.py
        fields = SCHEMAS[key]["spec"]
        assert set(root["properties"]["spec"]["properties"]) <= set(fields)


def test_refused_fields_are_unknown_to_the_api_server():
    nodepool = {m["metadata"]["name"]: m for m in crds.all_crds()}["nodepools.karpenter.sh"]
    v1 = nodepool["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    assert "kubelet" not in v1["template"]["properties"]["spec"]["properties"]
    assert "expireAfter" not in v1["disruption"]["properties"]
    assert v1["weight"] == {"type": "integer"}
    assert v1["template"]["properties"]["spec"]["properties"]["requirements"]["items"]["properties"]["values"] == {
        "type": "array", "items": {"type": "string"}}


def test_karpenter_printer_columns_on_nodeclaims_nodepools_and_ec2nodeclasses():
    """#30.7: `kubectl get` shows Karpenter v1's columns (kubernetes-sigs/karpenter pkg/apis/crds/
    karpenter.sh_nodeclaims.yaml, karpenter.sh_nodepools.yaml; aws/karpenter-provider-aws
    karpenter.k8s.aws_ec2nodeclasses.yaml additionalPrinterColumns)."""
    by_name = {m["metadata"]["name"]: m["spec"]["versions"][0] for m in crds.all_crds()}

    def columns(name):
        return [(c["name"], c.get("priority", 0)) for c in by_name[name]["additionalPrinterColumns"]]

    assert columns("nodeclaims.karpenter.sh") == [
        ("Type", 0), ("Capacity", 0), ("Zone", 0), ("Node", 0), ("Ready", 0), ("Age", 0),
        ("ImageID", 1), ("ID", 1), ("NodePool", 1), ("NodeClass", 1), ("Drifted", 1)]
    assert columns("nodepools.karpenter.sh") == [
        ("NodeClass", 0), ("Nodes", 0), ("Ready", 0), ("Age", 0), ("Weight", 1), ("CPU", 1), ("Memory", 1)]
    assert columns("ec2nodeclasses.karpenter.k8s.aws") == [("Ready", 0), ("Age", 0), ("Role", 1)]
    claim = by_name["nodeclaims.karpenter.sh"]
    assert claim["subresources"] == {"status": {}}
    status = claim["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
    assert {"providerID", "nodeName", "imageID", "capacity", "allocatable", "conditions"} <= set(status)
