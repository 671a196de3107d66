"""The CustomResourceDefinitions of every kind nodescale reads, with structural schemas made from schema.py.

One table (schema.py) says which fields each generation has and their JSON types; from it come both
`nodescale plan`'s and `cdk synth`'s strict checks and the CRDs' OpenAPI schemas, as Karpenter's own CRDs
have them: the API server then refuses a misspelled field under `kubectl apply` (fieldValidation=Strict,
kubectl's default), prunes it otherwise, and refuses a value of the wrong type (422). Refused fields are
left out of the schema: to the API server they are unknown fields. infra/manifests/crds/ holds these
manifests as YAML (scripts/gen_crds.py writes them; a test checks they are current), and sim installs them.
"""

from __future__ import annotations

import json
from typing import Any

import yaml

from .nodeclaim_schema import NODECLAIM_V1, PRINTER_COLUMNS
from .schema import ANY, FREE, SCALAR, SCHEMAS, Leaf, Refused, Schema

# (group, plural, kind, served versions, storage version, scope); the first served version is the storage one.
KINDS: tuple[tuple[str, str, str, tuple[str, ...], str], ...] = (
    ("karpenter.sh", "nodepools", "NodePool", ("v1", "v1beta1"), "Cluster"),
    ("karpenter.sh", "provisioners", "Provisioner", ("v1alpha5",), "Cluster"),
    ("karpenter.k8s.aws", "ec2nodeclasses", "EC2NodeClass", ("v1", "v1beta1"), "Cluster"),
    ("karpenter.k8s.aws", "awsnodetemplates", "AWSNodeTemplate", ("v1alpha1",), "Cluster"),
    ("karpenter.sh", "nodeoverlays", "NodeOverlay", ("v1alpha1",), "Cluster"),
    ("autoscaling.x-k8s.io", "capacitybuffers", "CapacityBuffer", ("v1", "v1beta1", "v1alpha1"), "Namespaced"),
    # Not read but written (#30.1): every launch is a NodeClaim.
    ("karpenter.sh", "nodeclaims", "NodeClaim", ("v1",), "Cluster"),
)

_PRESERVE = {"x-kubernetes-preserve-unknown-fields": True}


def openapi(schema: Schema) -> dict[str, Any]:
    """The structural OpenAPI v3 schema of one node of schema.py's table."""
    if isinstance(schema, Leaf):
        if schema.type == "int-or-string":
            return {"x-kubernetes-int-or-string": True}
        return {"type": schema.type}
    if schema is SCALAR or schema == ANY:
        return dict(_PRESERVE)  # any value: the converters check it
    if schema == FREE:
        # Keys the user chooses; values are strings or, for resource maps, quantities (numbers allowed).
        return {"type": "object", "additionalProperties": {"x-kubernetes-int-or-string": True}}
    if isinstance(schema, list):
        return {"type": "array", "items": openapi(schema[0])}
    if isinstance(schema, dict):
        return {"type": "object",
                "properties": {k: openapi(v) for k, v in schema.items() if not isinstance(v, Refused)}}
    raise TypeError(f"not a schema node: {schema!r}")


def object_schema(api_version: str, kind: str) -> dict[str, Any]:
    """A whole object's schema: apiVersion, kind, metadata (the API server's own), spec and status."""
    if (api_version, kind) == ("karpenter.sh/v1", "NodeClaim"):
        return _fresh(NODECLAIM_V1)  # written by nodescale, status included: its own table (nodeclaim_schema.py)
    fields = dict(SCHEMAS[(api_version, kind)])
    out = openapi({k: v for k, v in fields.items() if k != "metadata"})
    out["properties"]["metadata"] = {"type": "object"}
    out["properties"]["status"] = {"type": "object", **_PRESERVE}
    return out


def crd(group: str, plural: str, kind: str, versions: tuple[str, ...], scope: str = "Cluster") -> dict[str, Any]:
    """The CRD of one kind: every version served, the first stored, a status subresource."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}", "labels": {"app.kubernetes.io/name": "nodescale"}},
        "spec": {
            "group": group,
            "scope": scope,
            "names": {"kind": kind, "listKind": f"{kind}List", "plural": plural, "singular": kind.lower()},
            "versions": [_version(group, plural, kind, v, i == 0) for i, v in enumerate(versions)],
        },
    }


def _fresh(value: Any) -> Any:
    """A copy sharing no dict with the table (YAML would write a shared one as an anchor and aliases)."""
    return json.loads(json.dumps(value))


def _version(group: str, plural: str, kind: str, version: str, storage: bool) -> dict[str, Any]:
    """One served version; the v1 of Karpenter's kinds with Karpenter's printer columns."""
    out: dict[str, Any] = {"name": version, "served": True, "storage": storage}
    if version == "v1" and plural in PRINTER_COLUMNS:
        out["additionalPrinterColumns"] = _fresh(PRINTER_COLUMNS[plural])
    out["subresources"] = {"status": {}}
    out["schema"] = {"openAPIV3Schema": object_schema(f"{group}/{version}", kind)}
    return out


def all_crds() -> list[dict[str, Any]]:
    return [crd(*k) for k in KINDS]


# What each file is for, above the generated manifest.
_ABOUT = {
    "nodepools": "NodePools nodescale provisions for (karpenter.sh/v1, and v1beta1 as written before v1).",
    "provisioners": "Provisioners: the NodePool of Karpenter before v0.32.",
    "ec2nodeclasses": "EC2 node classes: AMI, subnets, security groups and launch options.",
    "awsnodetemplates": "AWSNodeTemplates: the node class of Karpenter before v0.32.",
    "nodeoverlays": "NodeOverlays (karpenter.sh/v1alpha1, Karpenter v1.6+): price and capacity changes nodescale\n"
                    "# applies to the instance types it plans with.",
    "nodeclaims": "NodeClaims (karpenter.sh/v1): nodescale writes one per launch, with its status and conditions.",
    "capacitybuffers": "CapacityBuffers (autoscaling.x-k8s.io, the API Cluster Autoscaler and Karpenter v1.14\n"
                       "# share): spare room for pods of a template.",
}


def file_name(manifest: dict[str, Any]) -> str:
    """``karpenter.sh_nodepools.yaml``: group, then plural, as Karpenter names its CRD files."""
    spec = manifest["spec"]
    return f"{spec['group']}_{spec['names']['plural']}.yaml"


def manifest_text(manifest: dict[str, Any]) -> str:
    """The CRD as the YAML file infra/manifests/crds/ holds."""
    plural = manifest["spec"]["names"]["plural"]
    header = (
        f"# {_ABOUT[plural]}\n"
        "# For clusters without the upstream CRD. Generated from nodescale/config/schema.py by\n"
        "# scripts/gen_crds.py: do not edit. The schema is structural, with the fields (and their types) of each\n"
        "# version, so the API server refuses or prunes an unknown field as Karpenter's CRDs make it do.\n"
        "# Skip this file where the upstream CRD is installed.\n"
    )
    return header + yaml.safe_dump(manifest, sort_keys=False, default_flow_style=False, width=110)
