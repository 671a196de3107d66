"""Network interfaces tagged at launch, as EC2 tags them.

moto tags a launch's instances and volumes from the request's and its launch template's TagSpecifications
(CreateFleet hands RunInstances both, by resource type) but drops the ``network-interface`` ones; EC2 tags
the interfaces a launch creates with them, and the launch template's ``volume`` tags reach a RunInstances
launch's volumes too, the request's tags winning on a key both set. nodescale's IAM policy lets a function
tag only resources already carrying its cluster's tag (aws:ResourceTag), so sim must carry these tags.
"""

from __future__ import annotations

import itertools
from typing import Any

_INSTALLED = itertools.count()


def install() -> None:
    """Wrap moto's launch (RunInstances, and CreateFleet's launches, which go through it) once per process."""
    if next(_INSTALLED):
        return
    # moto is imported here, not at the top: sim.aws.moto_main imports this module before it points moto's
    # AMI loader at sim's catalog (MOTO_AMIS_PATH), which moto.ec2.models reads once on import.
    from moto.ec2.models.instances import InstanceBackend
    from moto.ec2.utils import convert_tag_spec

    original = InstanceBackend.run_instances

    def run_instances(self: Any, *args: Any, **kwargs: Any) -> Any:
        given: dict[str, dict[str, str]] = dict(kwargs.get("tags") or {})
        template: dict[str, dict[str, str]] = {}
        if kwargs.get("launch_template"):
            data = self._get_template_from_args(kwargs["launch_template"]).data
            template = convert_tag_spec(data.get("TagSpecifications") or [])
        reservation = original(self, *args, **kwargs)
        interface_tags = {**template.get("network-interface", {}), **given.get("network-interface", {})}
        for instance in reservation.instances:
            for _, device in instance.get_block_device_mapping:
                _add_missing(self.get_volume(device.volume_id), template.get("volume", {}))
            for nic in list(instance.nics.values()):
                _add_missing(nic, interface_tags)
        return reservation

    InstanceBackend.run_instances = run_instances  # type: ignore[method-assign]


def _add_missing(resource: Any, tags: dict[str, str]) -> None:
    """``tags`` on ``resource`` but for the keys it already carries (the request's own win)."""
    have = resource.ec2_backend.tags.get(resource.id) or {}
    if missing := {k: v for k, v in tags.items() if k not in have}:
        resource.add_tags(missing)
