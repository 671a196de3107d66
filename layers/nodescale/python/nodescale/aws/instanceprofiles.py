"""The instance profile a node launches with: the node class's own, the one holding its role, or
the stack's default."""

from __future__ import annotations

from typing import Any

from ..model.nodepool import NodeClass


class InstanceProfileError(ValueError):
    """No instance profile can be found for the node class; the message says what was looked for."""


def resolve(iam: Any, node_class: NodeClass, default: str | None = None) -> str:
    if node_class.instance_profile:
        return node_class.instance_profile
    where = node_class.source or f"node class {node_class.name}"
    if node_class.role:
        role = node_class.role.rsplit("/", 1)[-1]  # a role ARN or a bare name
        try:
            profiles = iam.list_instance_profiles_for_role(RoleName=role).get("InstanceProfiles", [])
        except Exception as exc:  # NoSuchEntity, AccessDenied: either way the role gives no profile
            code = getattr(exc, "response", {}).get("Error", {}).get("Code", type(exc).__name__)
            raise InstanceProfileError(f"{where}: role {role!r}: cannot list its instance profiles ({code})") from exc
        names = sorted(p["InstanceProfileName"] for p in profiles)
        if names:
            return names[0]
        if default:
            return default
        raise InstanceProfileError(
            f"{where}: role {role!r} is in no instance profile; add it to one or set instanceProfile"
        )
    if default:
        return default
    raise InstanceProfileError(f"{where}: set role or instanceProfile (or NODESCALE_INSTANCE_PROFILE for the stack)")
