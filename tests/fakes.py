"""Recording stand-ins for the clients a Runtime holds: every call is kept, writes can be asserted absent.

Shared by the interruption and termination tests (a module, not collected: it holds no tests).

The Kubernetes client is the real `ApiClient` with its transport replaced, so every request the
product makes goes through the same serialization it uses against a server.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlparse

from kubernetes.client import ApiClient, Configuration

from nodescale.aws.clients import AwsClients
from nodescale.runtime import Runtime
from nodescale.settings import Settings

CLUSTER = "demo-cluster"
REGION = "us-east-1"


@contextlib.contextmanager
def state_table(name: str) -> Iterator[Any]:
    """A DynamoDB client (moto, in-process) with the functions' shared table: key ``pk``, on demand."""
    import boto3
    from moto import mock_aws

    with mock_aws():
        client = boto3.client("dynamodb", region_name=REGION)
        client.create_table(
            TableName=name,
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            BillingMode="PAY_PER_REQUEST",
        )
        yield client


class FakeResponse:
    def __init__(self, status: int, body: Any) -> None:
        self.status = status
        self.reason = "OK" if status < 300 else "Error"
        self.data = json.dumps(body).encode()
        self.headers: dict[str, str] = {}

    def read(self) -> bytes:
        return self.data

    def getheaders(self) -> dict[str, str]:
        return {}

    def getheader(self, name: str, default: Any = None) -> Any:
        return default


class RecordingApi(ApiClient):
    """Answers GETs from `objects` (path -> body, 404 otherwise) and records every request."""

    def __init__(self, objects: dict[str, Any] | None = None) -> None:
        config = Configuration(host="http://kube.invalid")
        super().__init__(configuration=config)
        self.objects = dict(objects or {})
        self.requests: list[tuple[str, str]] = []

    def call_api(self, method, url, header_params=None, body=None, post_params=None, _request_timeout=None):  # type: ignore[override]
        path = urlparse(url).path
        self.requests.append((method, path))
        if method == "GET" and path in self.objects:
            return FakeResponse(200, self.objects[path])
        return FakeResponse(404, {"kind": "Status", "reason": "NotFound", "message": f"{path} not found"})

    @property
    def writes(self) -> list[tuple[str, str]]:
        return [r for r in self.requests if r[0] != "GET"]


class _Paginator:
    def __init__(self, owner: FakeEc2, name: str) -> None:
        self.owner, self.name = owner, name

    def paginate(self, **kwargs: Any):
        self.owner.calls.append((self.name, kwargs))
        ids: set[str] | None = None
        for f in kwargs.get("Filters") or []:
            if f["Name"] == "instance-id":
                ids = set(f["Values"])
        found = [i for i in self.owner.instances if ids is None or i["InstanceId"] in ids]
        yield {"Reservations": [{"Instances": found}] if found else []}


class FakeEc2:
    def __init__(self, instances: list[dict[str, Any]] | None = None) -> None:
        self.instances = list(instances or [])
        self.calls: list[tuple[str, dict]] = []

    def get_paginator(self, name: str) -> _Paginator:
        return _Paginator(self, name)

    def __getattr__(self, name: str) -> Any:
        def record(**kwargs: Any) -> dict:
            self.calls.append((name, kwargs))
            return {}

        return record

    @property
    def writes(self) -> list[str]:
        return [name for name, _ in self.calls if not name.startswith("describe")]


class FakeService:
    """Any other AWS client: records calls, answers nothing."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict]] = []

    def __getattr__(self, name: str) -> Any:
        def record(*args: Any, **kwargs: Any) -> dict:
            self.calls.append((name, kwargs))
            return {}

        return record


def instance(
    instance_id: str, tags: dict[str, str], state: str = "running", spot: bool = True, dns: str = ""
) -> dict[str, Any]:
    """A DescribeInstances instance; ``dns`` is its PrivateDnsName, the name its Node must have."""
    raw: dict[str, Any] = {
        "InstanceId": instance_id,
        "PrivateDnsName": dns,
        "InstanceType": "m5.large",
        "Placement": {"AvailabilityZone": "us-east-1a"},
        "State": {"Name": state},
        "Tags": [{"Key": k, "Value": v} for k, v in tags.items()],
    }
    if spot:
        raw["InstanceLifecycle"] = "spot"
    return raw


def node(name: str, instance_id: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": "1", "labels": {}, "annotations": {}},
        "spec": {"providerID": f"aws:///us-east-1a/{instance_id}", **spec},
    }


def runtime(instances: list[dict[str, Any]], nodes: list[dict[str, Any]]) -> Runtime:
    settings = Settings(cluster_name=CLUSTER, region=REGION, table_name=None)
    objects: dict[str, Any] = {"/api/v1/nodes": {"kind": "NodeList", "metadata": {}, "items": nodes}}
    for n in nodes:
        objects[f"/api/v1/nodes/{n['metadata']['name']}"] = n
    aws = AwsClients(ec2=FakeEc2(instances), ssm=FakeService(), eks=FakeService(), dynamodb=FakeService(),
                     iam=FakeService())
    return Runtime(settings, aws, RecordingApi(objects))
