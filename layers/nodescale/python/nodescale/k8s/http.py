"""The Kubernetes API client the functions use: the generated client's transport, without its models.

The product sends and reads plain JSON (see `raw.py`), so it needs only what turns a request into an
HTTP call: the configuration (host, TLS, the bearer token and its refresh hook) and the REST layer
(urllib3's pool, retries, body encoding, `ApiException` on errors). The generated ``ApiClient`` also
imports pydantic and the package's response models, a fifth of a function's cold start (#32, cold
start) for nothing a function calls. This class builds the same requests as the generated
``param_serialize`` and ``call_api`` for what the product sends (a path, query pairs, JSON headers and
body, the BearerToken auth), on the same ``RESTClientObject``; the generated client still works
wherever one is passed in (sim, tests, a user's script), as only those two methods are called.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from enum import Enum
from typing import Any
from urllib.parse import quote

from kubernetes.client.configuration import Configuration
from kubernetes.client.rest import RESTClientObject, RESTResponse

# The generated client's header, so the API server's audit log shows the same agent as before.
USER_AGENT = "OpenAPI-Generator/37.0.1/python"


def json_ready(value: Any) -> Any:
    """A body as the generated client serializes one: dates as ISO 8601, enums by value, tuples kept."""
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, Mapping):
        return {key: json_ready(item) for key, item in value.items()}
    if isinstance(value, list):
        return [json_ready(item) for item in value]
    if isinstance(value, tuple):
        return tuple(json_ready(item) for item in value)
    if isinstance(value, (datetime.datetime, datetime.date)):
        return value.isoformat()
    return value


def query_string(params: Sequence[tuple[str, Any]]) -> str:
    """``k=v&...`` as the generated client writes it: booleans lowercase, values quoted ('/' kept)."""
    parts = []
    for key, value in params:
        text = str(value).lower() if isinstance(value, bool) else str(value)
        parts.append(f"{key}={quote(text)}")
    return "&".join(parts)


class ApiClient:
    """Requests to the API server through the generated client's REST layer (see the module's docstring)."""

    def __init__(self, configuration: Configuration | None = None) -> None:
        self.configuration = configuration or Configuration.get_default_copy()
        self.rest_client = RESTClientObject(self.configuration)
        self.default_headers = {"User-Agent": USER_AGENT}

    def param_serialize(
        self,
        method: str,
        resource_path: str,
        query_params: Sequence[tuple[str, Any]] | None = None,
        header_params: Mapping[str, str] | None = None,
        body: Any = None,
        auth_settings: Sequence[str] | None = None,
    ) -> tuple[str, str, dict[str, str], Any, None]:
        """(method, url, headers, body, post params), the tuple ``call_api`` takes."""
        headers = {**(header_params or {}), **self.default_headers}
        # The token is read per request: the refresh hook renews an expiring EKS token (client.py).
        configured = self.configuration.auth_settings()
        for name in auth_settings or ():
            setting = configured.get(name)
            if setting:
                headers[setting["key"]] = setting["value"]
        url = self.configuration.host + resource_path
        if query_params:
            url += "?" + query_string(query_params)
        return method, url, headers, json_ready(body) if body else body, None

    def call_api(
        self,
        method: str,
        url: str,
        header_params: Mapping[str, str] | None = None,
        body: Any = None,
        post_params: list | None = None,
        _request_timeout: Any = None,
    ) -> RESTResponse:
        """One HTTP request; the response is returned unread, whatever its status."""
        return self.rest_client.request(method, url, headers=header_params, body=body, post_params=post_params,
                                        _request_timeout=_request_timeout)

    def close(self) -> None:
        self.rest_client.close()

    def __enter__(self) -> ApiClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
