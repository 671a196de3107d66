"""The functions' thin API client (nodescale/k8s/http.py, #32 cold start) builds the requests the generated
ApiClient built for what the product sends: same URL, headers (auth from the refresh hook included) and
body. Each case is compared with the generated client itself, so a change in either shows here."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from kubernetes.client import ApiClient as GeneratedApiClient
from kubernetes.client.configuration import Configuration

from nodescale.k8s.http import ApiClient

CASES: list[dict[str, Any]] = [
    {"method": "GET", "resource_path": "/api/v1/pods",
     "query_params": [("labelSelector", "a in (x,y),b!=c"), ("limit", 500), ("watch", True),
                      ("fieldSelector", "spec.nodeName=n/1&x"), ("allowWatchBookmarks", False)],
     "header_params": {"Accept": "application/json"}},
    {"method": "PATCH", "resource_path": "/api/v1/nodes/n%201",
     "header_params": {"Accept": "application/json", "Content-Type": "application/merge-patch+json"},
     "body": {"metadata": {"labels": {"a": "b"}}, "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}}},
    {"method": "POST", "resource_path": "/apis/events.k8s.io/v1/namespaces/default/events",
     "header_params": {"Accept": "application/json", "Content-Type": "application/json"},
     "body": {"eventTime": datetime.datetime(2026, 1, 2, 3, 4, 5, 600000, tzinfo=datetime.UTC),
              "day": datetime.date(2026, 1, 2), "series": ({"count": 2},)}},
]


def configuration(tokens: list[str]) -> Configuration:
    conf = Configuration(host="https://127.0.0.1:6443")
    conf.api_key = {"BearerToken": "first"}
    conf.api_key_prefix = {"BearerToken": "Bearer"}

    def refresh(c: Configuration) -> None:
        c.api_key["BearerToken"] = tokens.pop(0)

    conf.refresh_api_key_hook = refresh
    return conf


@pytest.mark.parametrize("case", CASES, ids=[c["method"] for c in CASES])
def test_a_request_is_serialized_as_the_generated_client_serializes_it(case: dict[str, Any]) -> None:
    """#32, cold start: the replacement must send what the generated client sent."""
    ours = ApiClient(configuration(["t1", "t2"])).param_serialize(**case, auth_settings=["BearerToken"])
    theirs = GeneratedApiClient(configuration(["t1", "t2"])).param_serialize(
        **{**case, "header_params": dict(case.get("header_params") or {})}, auth_settings=["BearerToken"])
    assert ours == theirs
    assert ours[2]["authorization"] == "Bearer t1"  # the refresh hook ran for this request


def test_the_token_is_refreshed_for_every_request() -> None:
    """#32, cold start: an EKS token expires after 15 minutes; each request reads the hook's newest."""
    api = ApiClient(configuration(["t1", "t2"]))
    first = api.param_serialize("GET", "/api", auth_settings=["BearerToken"])[2]["authorization"]
    second = api.param_serialize("GET", "/api", auth_settings=["BearerToken"])[2]["authorization"]
    assert (first, second) == ("Bearer t1", "Bearer t2")
