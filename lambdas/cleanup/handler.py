"""The stack-deletion cleanup function: the custom resource that removes this cluster's capacity on `cdk destroy`.

It answers the CloudFormation Provider framework's onEvent: Create and Update do nothing but name the
resource; Delete runs ``nodescale.cleanup`` for the cluster in the resource's ``ClusterName``, which
terminates every instance tagged for it (after a drain) and deletes its launch templates, unless
``RetainNodes`` is "true". A Delete that could not terminate the instances raises, so the stack
deletion stops rather than leave paid capacity behind unseen.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from nodescale import base_runtime, telemetry
from nodescale.aws.clients import AwsClients
from nodescale.base_runtime import BaseRuntime
from nodescale.settings import Settings, SettingsError
from nodescale.usecases import cleanup

logger = telemetry.logger()

PROPERTY_CLUSTER = "ClusterName"
PROPERTY_RETAIN_NODES = "RetainNodes"


class CleanupEventError(ValueError):
    """The custom resource event cannot be acted on; the message names the field."""


@logger.inject_lambda_context(log_event=True)
def handler(event: Any, context: Any) -> dict[str, Any]:
    if not isinstance(event, dict):
        raise CleanupEventError("expected a CloudFormation custom resource event (a JSON object)")
    request = event.get("RequestType")
    props = event.get("ResourceProperties") or {}
    cluster = props.get(PROPERTY_CLUSTER)
    if not isinstance(cluster, str) or not cluster:
        raise CleanupEventError(f"ResourceProperties.{PROPERTY_CLUSTER} is required: the EKS cluster's name")
    retain_raw = str(props.get(PROPERTY_RETAIN_NODES, "false")).lower()
    if retain_raw not in ("true", "false"):
        raise CleanupEventError(f"ResourceProperties.{PROPERTY_RETAIN_NODES}={retain_raw!r}: allowed are 'true', 'false'")
    physical_id = event.get("PhysicalResourceId") or f"nodescale-cleanup-{cluster}"
    if request in ("Create", "Update"):
        return {"PhysicalResourceId": physical_id}
    if request != "Delete":
        raise CleanupEventError(f"RequestType={request!r}: allowed are Create, Update, Delete")
    summary = run_cleanup(cluster, retain_raw == "true")
    logger.info("cleanup summary", extra={"summary": summary})
    return {"PhysicalResourceId": physical_id, "Data": {"Message": summary["message"][:1000]}}


def run_cleanup(cluster: str, retain: bool) -> dict[str, Any]:
    """The cleanup for ``cluster``; without a reachable Kubernetes API, instances and templates only."""
    try:
        rt = base_runtime.shared(BaseRuntime)
    except SettingsError:
        raise
    except Exception as exc:  # noqa: BLE001 - the cluster may be gone already; its instances still must go
        logger.warning("Kubernetes API not reachable; cleaning up EC2 only", extra={"error": str(exc)})
        settings = dataclasses.replace(Settings.from_env(), cluster_name=cluster)
        return cleanup.run_without_cluster(settings, AwsClients.for_region(settings.region), retain)
    if rt.settings.cluster_name != cluster:
        rt = BaseRuntime(dataclasses.replace(rt.settings, cluster_name=cluster), rt.aws, rt.api)
    return cleanup.run(rt, retain)
