"""Make moto's EC2 answer in linear time at the thousands of instances a scale run creates.

Three hot spots, measured with 2,000 instances (see `bench.scale`):

- A resource's tags: moto filters every tag of every resource (`describe_tags` with a `resource-id`
  filter) and DescribeInstances reads each instance's tags several times, so listing 2,000
  instances took about a minute. Here they come straight from the backend's per-resource map.
- One instance by id (DescribeInstanceAttribute, ModifyInstanceAttribute, CreateFleet's volumes, ...):
  moto copies every reservation and scans them, so a fleet of 500 in a cluster of 10,000 instances
  scanned 5 million. Here an index by id answers, re-read from the newest reservations on a miss.
  DescribeVolumes of one id (each new instance's root volume) is a map lookup, not a scan.
- The response serializer works out, for every field of every object, which attribute holds it
  (a chain of alias rules evaluated afresh each time). The answer depends only on the object's
  class, the field and its place in the API model, so it is worked out once and remembered.

Every patch returns exactly what moto would; the integration tests run on top of them.
"""

from __future__ import annotations

import itertools
from typing import Any

_MISSING = object()
RESERVATIONS_REREAD = 8


def install() -> None:
    _tags_by_resource()
    _instance_by_id()
    _one_volume_by_id()
    _remembered_attribute_names()


def _tags_by_resource() -> None:
    from moto.ec2.models.core import TaggedEC2Resource
    from moto.ec2.utils import EC2_PREFIX_TO_RESOURCE, get_prefix

    def get_tags(self: Any) -> list[dict[str, str]]:
        resource_id = getattr(self, "id", None)
        if not resource_id:
            return []
        # .get, not [...]: the map is a defaultdict and a read must not add an entry.
        tags = self.ec2_backend.tags.get(resource_id)
        if not tags:
            return []
        resource_type = EC2_PREFIX_TO_RESOURCE.get(get_prefix(resource_id), "")
        return [{"resource_id": resource_id, "key": key, "value": value, "resource_type": resource_type}
                for key, value in list(tags.items())]

    TaggedEC2Resource.get_tags = get_tags  # type: ignore[method-assign]


def _instance_by_id() -> None:
    from moto.ec2.exceptions import InvalidInstanceIdError
    from moto.ec2.models.instances import InstanceBackend

    def get_instance(self: Any, instance_id: str) -> Any:
        # moto never removes an instance from its reservations (terminated ones stay listed), so an index
        # that is only ever added to stays exact; a miss re-reads the reservations for new instances.
        index: dict[str, Any] = self.__dict__.setdefault("_sim_instances_by_id", {})
        found = index.get(instance_id)
        if found is None:
            # Reservations are added at the end of the dict, and run_instances adds one before filling it
            # (possibly in two requests at once): re-read the newest few and any added since the last miss.
            done = self.__dict__.get("_sim_reservations_indexed", 0)
            start = max(0, done - RESERVATIONS_REREAD)
            added = list(itertools.islice(self.reservations.values(), start, None))
            for reservation in added:
                for instance in list(reservation.instances):
                    index.setdefault(instance.id, instance)
            self.__dict__["_sim_reservations_indexed"] = start + len(added)
            found = index.get(instance_id)
        if found is None:
            raise InvalidInstanceIdError(instance_id)
        return found

    InstanceBackend.get_instance = get_instance  # type: ignore[method-assign]


def _one_volume_by_id() -> None:
    """DescribeVolumes of one volume id (each new instance's root volume asks it) from the map, not by
    scanning every volume; more ids, or filters, go to moto's own."""
    from moto.ec2.exceptions import InvalidVolumeIdError
    from moto.ec2.models.elastic_block_store import EBSBackend

    original = EBSBackend.describe_volumes
    if getattr(original, "__module__", "") == __name__:
        return

    def describe_volumes(self: Any, volume_ids: list[str] | None = None, filters: Any = None) -> list[Any]:
        if not volume_ids or len(volume_ids) != 1 or filters:
            return original(self, volume_ids, filters)
        volume = self.volumes.get(volume_ids[0])
        if volume is None:
            raise InvalidVolumeIdError({volume_ids[0]})
        return [volume]

    EBSBackend.describe_volumes = describe_volumes  # type: ignore[method-assign]


def _remembered_attribute_names() -> None:
    from moto.core import serialize
    from moto.core.utils import get_value

    picker = serialize.AttributePicker
    names: dict[tuple[Any, ...], tuple[str, ...]] = {}

    def shape_key(context: Any) -> tuple[Any, ...]:
        shape = context.shape
        if shape is None:
            return (None,)
        parent = getattr(shape, "parent", None)
        service = context.service_model.service_name if context.service_model is not None else None
        # Shape names are unique within a service model, so (service, shape, parent) pins the place.
        return (service, shape.name, shape.type_name, None if parent is None else (parent.name, parent.type_name))

    original = picker.__call__
    if getattr(original, "__module__", "") == __name__:
        return  # installed already

    def call(self: Any, context: Any) -> Any:
        if self.alias_providers is not serialize.DEFAULT_ALIAS_PROVIDERS:
            return original(self, context)  # rules of its own: nothing to remember them by
        obj = context.obj
        key = (type(self), type(obj), context.key, *shape_key(context))
        candidates = names.get(key)
        if candidates is None:
            candidates = names[key] = tuple(self.get_possible_keys(context))
        value = None
        for candidate in candidates:
            found = get_value(obj, candidate, _MISSING)
            if found is not _MISSING:
                value = found
                break
        if self.response_transformers:
            key_path = f"{context.key_path}.{context.key}"
            for transform_path, transform in self.response_transformers.items():
                if key_path.endswith(transform_path):
                    return transform(value)
        return value

    picker.__call__ = call  # type: ignore[method-assign]
