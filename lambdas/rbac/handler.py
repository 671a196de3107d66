"""The RBAC function: the custom resource that applies nodescale's RBAC at deploy and removes it on destroy.

Deployed only with ``-c applyRbac=true``. It answers the CloudFormation Provider framework's onEvent:
Create and Update server-side apply every object of ``rbac.yaml`` (``infra/manifests/rbac.yaml``,
bundled beside this file) to the cluster in ``ResourceProperties.ClusterName``; Delete removes them,
after the cleanup has drained the nodes with them (the stack orders the two). A cluster that is already
gone has nothing left to remove: the Delete succeeds. Any other failure raises, so CloudFormation shows it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from nodescale import telemetry
from nodescale.k8s.client import KubeConfigError, build_api_client
from nodescale.settings import Settings
from nodescale.usecases import rbac

logger = telemetry.logger()

PROPERTY_CLUSTER = "ClusterName"
MANIFEST_NAME = "rbac.yaml"
# Bundled beside the handler in the function's package; in a checkout (sim/, tests), the repository's own.
MANIFEST = next(
    (p for p in (Path(__file__).with_name(MANIFEST_NAME), Path(__file__).resolve().parents[2] / "infra" / "manifests"
                 / MANIFEST_NAME) if p.is_file()),
    Path(__file__).with_name(MANIFEST_NAME),
)


class RbacEventError(ValueError):
    """The custom resource event cannot be acted on; the message names the field."""


@logger.inject_lambda_context(log_event=True)
def handler(event: Any, context: Any) -> dict[str, Any]:
    if not isinstance(event, dict):
        raise RbacEventError("expected a CloudFormation custom resource event (a JSON object)")
    request = event.get("RequestType")
    cluster = (event.get("ResourceProperties") or {}).get(PROPERTY_CLUSTER)
    if not isinstance(cluster, str) or not cluster:
        raise RbacEventError(f"ResourceProperties.{PROPERTY_CLUSTER} is required: the EKS cluster's name")
    if request not in ("Create", "Update", "Delete"):
        raise RbacEventError(f"RequestType={request!r}: allowed are Create, Update, Delete")
    physical_id = event.get("PhysicalResourceId") or f"nodescale-rbac-{cluster}"
    documents = rbac.load(MANIFEST)
    settings = dataclasses.replace(Settings.from_env(), cluster_name=cluster)
    try:
        api = build_api_client(settings)
    except KubeConfigError as exc:
        if request != "Delete":
            raise
        logger.warning("cluster not reachable; its RBAC went with it", extra={"error": str(exc)})
        return {"PhysicalResourceId": physical_id, "Data": {"Objects": ""}}
    done = rbac.remove(api, documents) if request == "Delete" else rbac.apply(api, documents)
    logger.info("RBAC %s", "removed" if request == "Delete" else "applied", extra={"objects": done})
    return {"PhysicalResourceId": physical_id, "Data": {"Objects": ", ".join(done)[:1000]}}
