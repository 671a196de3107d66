"""The instance profile a node launches with: the node class's own, the one holding its role, or
the stack's default for the node's OS.

Windows nodes need a role of their own: EKS allows one access entry per IAM principal, and a Windows
node joins only through an ``EC2_WINDOWS`` entry (the Linux role's ``EC2_LINUX`` entry lacks the groups
Windows nodes need), so a Windows node class never falls back to the Linux profile."""

from __future__ import annotations

from typing import Any

from ..model.nodepool import NodeClass


class InstanceProfileError(ValueError):
    """No instance profile can be found for the node class; the message says what was looked for, ``code``
    the AWS error code behind it (AccessDenied, NoSuchEntity) when there is one."""

    def __init__(self, message: str, code: str = "") -> None:
        super().__init__(message)
        self.code = code


def resolve(
    iam: Any,
    node_class: NodeClass,
    default: str | None = None,
    windows_default: str | None = None,
    *,
    windows: bool = False,
) -> str:
    """The profile to launch ``node_class``'s nodes with; ``windows`` when its AMI family is Windows."""
    if windows:
        default = windows_default
    if node_class.instance_profile:
        return node_class.instance_profile
    where = node_class.source or f"node class {node_class.name}"
    if node_class.role:
        role = node_class.role.rsplit("/", 1)[-1]  # a role ARN or a bare name
        try:
            profiles = iam.list_instance_profiles_for_role(RoleName=role).get("InstanceProfiles", [])
        except Exception as exc:  # NoSuchEntity, AccessDenied: either way the role gives no profile
            code = getattr(exc, "response", {}).get("Error", {}).get("Code", type(exc).__name__)
            raise InstanceProfileError(f"{where}: role {role!r}: cannot list its instance profiles ({code})",
                                       code) from exc
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
    if windows:
        raise InstanceProfileError(
            f"{where}: a Windows node class needs a Windows node role: deploy the stack with -c windows=true "
            "(it sets NODESCALE_WINDOWS_INSTANCE_PROFILE), or set role or instanceProfile"
        )
    raise InstanceProfileError(f"{where}: set role or instanceProfile (or NODESCALE_INSTANCE_PROFILE for the stack)")
