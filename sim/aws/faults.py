"""Fault injection over the wire: a reverse proxy in front of moto that fails chosen AWS calls.

The product's `AWS_ENDPOINT_URL` points here, so its unmodified boto3 clients receive real AWS
error responses (status, XML/JSON/CBOR body, error code). Control API on the proxy itself:

    GET    /sim/v1/aws-faults          -> {"rules": [...]} with counters
    POST   /sim/v1/aws-faults          <- one rule or {"rules": [...]}; -> 201 {"rules": [...with ids]}
    DELETE /sim/v1/aws-faults[/<id>]   -> removes all rules (or one)
    GET    /sim/v1/aws-calls[?service=ec2&action=CreateFleet]  -> recent calls, newest last; each has the
           wall-clock `time` it arrived, `status`, and (CreateFleet, RunInstances) the `instanceIds` it launched
    DELETE /sim/v1/aws-calls           -> forget them
    GET|DELETE /sim/v1/lambda-invocations -> asynchronous Lambda invocations queued (DELETE takes them):
           Lambda's calls are answered by sim/aws/lambda_service.py, not moto

Rules (JSON):
- `{"kind": "capacity", "instanceType": "m5.large", "zone": "us-east-1a", "capacityType": "spot",
   "errorCode": "InsufficientInstanceCapacity", "count": 1}`: CreateFleet answers, like EC2, 200 with
  an entry in `Errors` per faulted override and launches from the remaining overrides only (none
  left: no instances). RunInstances of a faulted type/zone fails with the error code.
- `{"kind": "error", "service": "ec2", "action": "DescribeInstances", "code": "RequestLimitExceeded",
   "status": 503, "probability": 0.5, "count": 3}`: the call fails with that code. `code` may be
  `"throttling"` or `"internal"` to get the service's own throttling / 5xx error.
- `{"kind": "chaos", "fraction": 0.1, "code": "throttling"}`: that fraction of all calls fails.
- `{"kind": "delay", "service": "ec2", "action": "DescribeLaunchTemplates", "seconds": 5, "count": 1}`: the
  call is held that many (real) seconds, then answered as usual: a slow AWS call, a stalled caller.
Omitted fields match anything; `count` limits how often a rule fires; `seed` makes it repeatable.

CreateFleet honours `ClientToken` as EC2 does (moto ignores it; EC2 API Reference, "Ensuring
idempotency"): a request repeating an earlier successful one's token and parameters launches nothing
and is answered with the first one's fleet and instances; the same token with other parameters is
`IdempotentParameterMismatch` (400). Tokens are scoped to the region, as on EC2; a replayed call is
logged with `"idempotentReplay": true` and no `instanceIds` (it launched none).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import logging
import random
import re
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, parse_qsl, urlencode, urlsplit
from xml.sax.saxutils import escape

import botocore.session

from sim.aws.constants import REGION

log = logging.getLogger("sim.aws.faults")

# The StateReason code of an instance whose launch failed after EC2 accepted it: a volume's KMS key refused the
# caller (Karpenter's troubleshooting: "Node terminates before ready on failed encrypted EBS volume").
LAUNCH_KEY_ERROR = "Client.InternalError"

CAPACITY_ERROR_CODES = (
    "InsufficientInstanceCapacity",
    "MaxSpotInstanceCountExceeded",
    "VcpuLimitExceeded",
    "UnfulfillableCapacity",
    "InsufficientFreeAddressesInSubnet",
    "SpotMaxPriceTooLow",
    "Unsupported",
)
# HTTP status AWS uses for an error code when the rule does not say.
_STATUS = {
    "RequestLimitExceeded": 503,
    "ServiceUnavailable": 503,
    "Unavailable": 503,
    "InternalError": 500,
    "InternalFailure": 500,
    "InternalServerError": 500,
    "InternalServerException": 500,
    "InsufficientInstanceCapacity": 500,
    "ServerException": 500,
    "ThrottlingException": 400,
    "Throttling": 400,
    "ProvisionedThroughputExceededException": 400,
    "RequestThrottled": 403,
}
_LOGGED_BODY_LIMIT = 32768
# Signing name (in the Authorization header) -> botocore service name, where they differ.
_SERVICES = {"monitoring": "cloudwatch", "execute-api": "apigateway"}
_THROTTLING = {"ec2": "RequestLimitExceeded", "query": "Throttling", "cloudwatch": "Throttling"}
_INTERNAL = {"ec2": "InternalError", "query": "InternalFailure", "dynamodb": "InternalServerError"}


# A delay rule holds a call at most this long (boto3's default read timeout is 60 s).
MAX_DELAY_SECONDS = 300


class RuleError(ValueError):
    """A fault rule the proxy cannot use; the message names the field and what is allowed."""


@dataclass
class Rule:
    kind: str
    id: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    service: str | None = None
    action: str | None = None
    code: str = ""
    status: int | None = None
    message: str | None = None
    probability: float = 1.0
    count: int | None = None
    fired: int = 0
    instance_type: str | None = None
    zone: str | None = None
    capacity_type: str | None = None
    seed: int | None = None
    seconds: float | None = None  # a delay rule's hold
    _random: random.Random = field(default_factory=random.Random, repr=False)

    def to_json(self) -> dict[str, Any]:
        out = {
            "id": self.id, "kind": self.kind, "service": self.service, "action": self.action,
            "code": self.code, "status": self.status, "message": self.message,
            "probability": self.probability, "count": self.count, "fired": self.fired,
            "instanceType": self.instance_type, "zone": self.zone, "capacityType": self.capacity_type,
            "seconds": self.seconds,
        }
        return {k: v for k, v in out.items() if v is not None}

    @property
    def exhausted(self) -> bool:
        return self.count is not None and self.fired >= self.count

    def roll(self) -> bool:
        return not self.exhausted and (self.probability >= 1.0 or self._random.random() < self.probability)


def parse_rule(spec: Any) -> Rule:
    if not isinstance(spec, dict):
        raise RuleError("a fault rule must be a JSON object")
    kind = spec.get("kind", "error")
    known = {
        "kind", "service", "action", "code", "errorCode", "status", "message", "probability", "fraction",
        "count", "instanceType", "zone", "capacityType", "seed", "seconds",
    }
    unknown = sorted(set(spec) - known)
    if unknown:
        raise RuleError(f"unknown fault rule field(s) {unknown}: allowed are {sorted(known)}")
    if kind not in ("capacity", "error", "chaos", "delay"):
        raise RuleError(f"kind={kind!r}: allowed are 'capacity', 'error', 'chaos', 'delay'")
    probability = spec.get("fraction" if kind == "chaos" else "probability", 1.0 if kind != "chaos" else None)
    if not isinstance(probability, int | float) or not 0 <= probability <= 1:
        field_name = "fraction" if kind == "chaos" else "probability"
        raise RuleError(f"{field_name}={probability!r}: allowed is a number from 0 to 1")
    count = spec.get("count")
    if count is not None and (not isinstance(count, int) or count < 1):
        raise RuleError(f"count={count!r}: allowed is a whole number of at least 1")
    status = spec.get("status")
    if status is not None and (not isinstance(status, int) or not 400 <= status <= 599):
        raise RuleError(f"status={status!r}: allowed is an HTTP error status 400-599")
    rule = Rule(
        kind=kind, service=spec.get("service"), action=spec.get("action"), status=status,
        message=spec.get("message"), probability=float(probability), count=count, seed=spec.get("seed"),
    )
    if kind == "delay":
        seconds = spec.get("seconds")
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not 0 < seconds <= MAX_DELAY_SECONDS:
            raise RuleError(f"seconds={seconds!r}: a delay rule needs seconds, a number above 0 and at most "
                            f"{MAX_DELAY_SECONDS}")
        rule.seconds = float(seconds)
    elif kind == "capacity":
        rule.instance_type = spec.get("instanceType")
        if not rule.instance_type:
            raise RuleError("a capacity rule needs instanceType (e.g. 'm5.large')")
        rule.zone = spec.get("zone")
        rule.capacity_type = spec.get("capacityType")
        if rule.capacity_type not in (None, "spot", "on-demand"):
            raise RuleError(f"capacityType={rule.capacity_type!r}: allowed are 'spot', 'on-demand'")
        rule.code = spec.get("errorCode") or spec.get("code") or "InsufficientInstanceCapacity"
        if rule.code not in CAPACITY_ERROR_CODES:
            raise RuleError(f"errorCode={rule.code!r}: allowed are {CAPACITY_ERROR_CODES}")
    else:
        rule.code = spec.get("code") or ("throttling" if kind == "chaos" else "")
        if not rule.code:
            raise RuleError("an error rule needs code (an AWS error code, or 'throttling' / 'internal')")
    if rule.seed is not None:
        rule._random.seed(rule.seed)
    return rule


@dataclass
class Call:
    service: str
    action: str
    protocol: str
    params: dict[str, Any]


class FaultRules:
    """Thread-safe rule set plus a bounded log of the calls that passed through."""

    def __init__(self, log_size: int = 2000) -> None:
        self._rules: list[Rule] = []
        self._lock = threading.Lock()
        self.calls: deque[dict[str, Any]] = deque(maxlen=log_size)

    def add(self, specs: list[Any]) -> list[Rule]:
        rules = [parse_rule(spec) for spec in specs]
        with self._lock:
            self._rules.extend(rules)
        return rules

    def list(self) -> list[dict[str, Any]]:
        with self._lock:
            return [r.to_json() for r in self._rules]

    def clear(self, rule_id: str | None = None) -> bool:
        with self._lock:
            before = len(self._rules)
            self._rules = [r for r in self._rules if rule_id is not None and r.id != rule_id]
            return len(self._rules) < before

    def error_for(self, call: Call) -> Rule | None:
        return self._fire(call, lambda kind: kind not in ("capacity", "delay"))

    def delay_for(self, call: Call) -> float:
        """Seconds the call is held by the first delay rule it matches (0: none)."""
        rule = self._fire(call, lambda kind: kind == "delay")
        return (rule.seconds or 0.0) if rule else 0.0

    def _fire(self, call: Call, kind_matches: Callable[[str], bool]) -> Rule | None:
        """The first rule of a kind that matches the call and whose roll fires (counted), or None."""
        with self._lock:
            for rule in self._rules:
                if not kind_matches(rule.kind):
                    continue
                if rule.service and rule.service.lower() != call.service.lower():
                    continue
                if rule.action and rule.action.lower() != call.action.lower():
                    continue
                if rule.roll():
                    rule.fired += 1
                    return rule
        return None

    def capacity_rules(self) -> list[Rule]:
        with self._lock:
            return [r for r in self._rules if r.kind == "capacity" and not r.exhausted]

    def fired(self, rule: Rule) -> None:
        with self._lock:
            rule.fired += 1


# --- recognising calls -------------------------------------------------------------------------------------
class _RestRoutes:
    """REST services name the operation by method + path; match them against botocore's models."""

    def __init__(self) -> None:
        self._session = botocore.session.get_session()
        self._routes: dict[str, list[tuple[str, re.Pattern[str], int, str]]] = {}
        self._lock = threading.Lock()

    def action(self, service: str, method: str, path: str) -> str:
        with self._lock:
            if service not in self._routes:
                self._routes[service] = self._load(service)
            routes = self._routes[service]
        for route_method, pattern, _literal, name in routes:
            if route_method == method and pattern.match(path):
                return name
        return f"{method} {path}"

    def _load(self, service: str) -> list[tuple[str, re.Pattern[str], int, str]]:
        try:
            model = self._session.get_service_model(service)
        except Exception:
            return []
        routes = []
        for name in model.operation_names:
            http = model.operation_model(name).http
            uri = http.get("requestUri", "/").split("?")[0]
            regex = re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(uri).replace(r"\+\}", r"\}"))
            literal = len(re.sub(r"\{[^}]+\}", "", uri))
            routes.append((http.get("method", "GET"), re.compile(f"^{regex}/?$"), literal, name))
        routes.sort(key=lambda r: -r[2])  # the most specific path wins
        return routes


_CREDENTIAL = re.compile(r"Credential=[^/]+/[^/]+/([^/]+)/([^/]+)/")


def classify(method: str, path: str, headers: Any, body: bytes, routes: _RestRoutes) -> Call:
    """Which service and operation a request is, and in which protocol it speaks."""
    match = _CREDENTIAL.search(headers.get("Authorization", ""))
    signing = match.group(2) if match else ""
    service = _SERVICES.get(signing, signing)
    target = headers.get("X-Amz-Target")
    url = urlsplit(path)
    if target:
        return Call(service, target.rsplit(".", 1)[-1], "json", _json_params(body))
    rpc = re.match(r"^/service/[^/]+/operation/([^/?]+)", url.path)
    if rpc:
        return Call(service, rpc.group(1), "cbor", {})
    ctype = headers.get("Content-Type", "")
    if "x-www-form-urlencoded" in ctype or "Action=" in url.query:
        params = dict(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True)) if body else {}
        params.update(dict(parse_qsl(url.query, keep_blank_values=True)))
        protocol = "ec2" if service == "ec2" else "query"
        return Call(service, params.get("Action", ""), protocol, params)
    return Call(service, routes.action(service, method, url.path), "rest-json", _json_params(body))


def _json_params_unbounded(body: bytes) -> dict[str, Any]:
    try:
        loaded = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return {}
    return loaded if isinstance(loaded, dict) else {}


def _json_params(body: bytes) -> dict[str, Any]:
    if not body or len(body) > 65536:
        return {}
    try:
        loaded = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return {}
    return loaded if isinstance(loaded, dict) else {}


# --- error bodies --------------------------------------------------------------------------------------------
def resolve_code(code: str, call: Call) -> str:
    if code == "throttling":
        return _THROTTLING.get(call.service) or _THROTTLING.get(call.protocol) or "ThrottlingException"
    if code == "internal":
        return _INTERNAL.get(call.service) or _INTERNAL.get(call.protocol) or "InternalFailure"
    return code


def error_response(call: Call, code: str, message: str, status: int) -> tuple[int, dict[str, str], bytes]:
    request_id = str(uuid.uuid4())
    if call.protocol == "ec2":
        body = (
            '<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error>'
            f"<Code>{escape(code)}</Code><Message>{escape(message)}</Message>"
            f"</Error></Errors><RequestID>{request_id}</RequestID></Response>"
        )
        return status, {"Content-Type": "text/xml;charset=UTF-8"}, body.encode()
    if call.protocol == "query":
        kind = "Receiver" if status >= 500 else "Sender"
        body = (
            f"<ErrorResponse><Error><Type>{kind}</Type><Code>{escape(code)}</Code>"
            f"<Message>{escape(message)}</Message></Error><RequestId>{request_id}</RequestId></ErrorResponse>"
        )
        return status, {"Content-Type": "text/xml", "x-amzn-RequestId": request_id}, body.encode()
    error_type = f"com.amazonaws.{call.service}#{code}"
    headers = {"x-amzn-RequestId": request_id, "x-amzn-ErrorType": code}
    if call.protocol == "cbor":
        headers.update({"Content-Type": "application/cbor", "smithy-protocol": "rpc-v2-cbor"})
        return status, headers, _cbor_map({"__type": error_type, "message": message})
    if call.protocol == "json":
        headers["Content-Type"] = "application/x-amz-json-1.1"
        return status, headers, json.dumps({"__type": error_type, "message": message}).encode()
    headers["Content-Type"] = "application/json"
    return status, headers, json.dumps({"message": message}).encode()


def _cbor_map(values: dict[str, str]) -> bytes:
    """A CBOR map of text to text (all an rpc-v2-cbor error body needs)."""

    def head(major: int, length: int) -> bytes:
        if length < 24:
            return bytes([major << 5 | length])
        if length < 256:
            return bytes([major << 5 | 24, length])
        return bytes([major << 5 | 25]) + length.to_bytes(2, "big")

    out = bytearray(head(5, len(values)))
    for key, value in values.items():
        for text in (key, value):
            raw = text.encode()
            out += head(3, len(raw)) + raw
    return bytes(out)


def _default_message(code: str, call: Call) -> str:
    if code in ("RequestLimitExceeded",):
        return "Request limit exceeded."
    if code in ("Throttling", "ThrottlingException", "RequestThrottled"):
        return "Rate exceeded"
    if code == "ProvisionedThroughputExceededException":
        return ("The level of configured provisioned throughput for the table was exceeded. "
                "Consider increasing your provisioning level with the UpdateTable API.")
    if code in ("InternalError", "InternalFailure", "InternalServerError"):
        return "We encountered an internal error. Please try again."
    if code in ("ServiceUnavailable", "Unavailable"):
        return "The service is unavailable. Please try again shortly."
    return f"{call.action} failed: {code}"


def capacity_message(code: str, instance_type: str, zone: str, capacity_type: str) -> str:
    if code == "InsufficientInstanceCapacity" and capacity_type == "spot":
        return "There is no Spot capacity available that matches your request."
    if code == "InsufficientInstanceCapacity":
        return (
            f"We currently do not have sufficient {instance_type} capacity in the Availability Zone you "
            f"requested ({zone}). Our system will be working on provisioning additional capacity. You can "
            f"currently get {instance_type} capacity by not specifying an Availability Zone in your request "
            "or choosing a different Availability Zone."
        )
    return f"{code}: {instance_type} in {zone} ({capacity_type}) cannot be fulfilled"


# --- CreateFleet -----------------------------------------------------------------------------------------------
_OVERRIDE_KEY = re.compile(r"^LaunchTemplateConfigs\.(\d+)\.Overrides\.(\d+)\.(.+)$")
_CONFIG_KEY = re.compile(r"^LaunchTemplateConfigs\.(\d+)\.(.+)$")


@dataclass
class FleetRewrite:
    body: bytes | None  # None: nothing left to launch
    errors: list[dict[str, str]]
    target: int = 0


def rewrite_create_fleet(
    params: dict[str, str], rules: list[Rule], subnet_zone: Callable[[str], str]
) -> tuple[FleetRewrite | None, list[Rule]]:
    """Drop the overrides a capacity rule faults; None when nothing matched."""
    capacity_type = params.get("TargetCapacitySpecification.DefaultTargetCapacityType", "on-demand")
    overrides: dict[tuple[int, int], dict[str, str]] = {}
    configs: dict[int, dict[str, str]] = {}
    others: list[tuple[str, str]] = []
    for key, value in params.items():
        over = _OVERRIDE_KEY.match(key)
        conf = _CONFIG_KEY.match(key)
        if over:
            overrides.setdefault((int(over.group(1)), int(over.group(2))), {})[over.group(3)] = value
        elif conf:
            configs.setdefault(int(conf.group(1)), {})[conf.group(2)] = value
        else:
            others.append((key, value))
    errors: list[dict[str, str]] = []
    faulted: set[tuple[int, int]] = set()
    used: list[Rule] = []
    for key in sorted(overrides):
        override = overrides[key]
        zone = override.get("AvailabilityZone") or subnet_zone(override.get("SubnetId", ""))
        for rule in rules:
            if rule.instance_type != override.get("InstanceType"):
                continue
            if rule.zone and rule.zone != zone:
                continue
            if rule.capacity_type and rule.capacity_type != capacity_type:
                continue
            if not rule.roll():
                continue
            faulted.add(key)
            if rule not in used:
                used.append(rule)
            config = configs.get(key[0], {})
            errors.append({
                "launchTemplateId": config.get("LaunchTemplateSpecification.LaunchTemplateId", ""),
                "launchTemplateName": config.get("LaunchTemplateSpecification.LaunchTemplateName", ""),
                "version": config.get("LaunchTemplateSpecification.Version", ""),
                "instanceType": override.get("InstanceType", ""),
                "subnetId": override.get("SubnetId", ""),
                "availabilityZone": override.get("AvailabilityZone", ""),
                "lifecycle": capacity_type,
                "errorCode": rule.code,
                "errorMessage": capacity_message(rule.code, override.get("InstanceType", ""), zone, capacity_type),
            })
            break
    if not faulted:
        return None, []
    rebuilt = list(others)
    next_config = 0
    for index in sorted(configs):
        kept = [overrides[k] for k in sorted(overrides) if k[0] == index and k not in faulted]
        had = any(k[0] == index for k in overrides)
        if had and not kept:
            continue  # every offering of this template is out of capacity
        next_config += 1
        rebuilt += [(f"LaunchTemplateConfigs.{next_config}.{k}", v) for k, v in configs[index].items()]
        for position, override in enumerate(kept, start=1):
            rebuilt += [
                (f"LaunchTemplateConfigs.{next_config}.Overrides.{position}.{k}", v) for k, v in override.items()
            ]
    if next_config == 0:
        return FleetRewrite(body=None, errors=errors), used
    return FleetRewrite(body=urlencode(rebuilt).encode(), errors=errors), used


def _errors_xml(errors: list[dict[str, str]]) -> str:
    items = []
    for e in errors:
        spec = "".join(
            f"<{k}>{escape(e[k])}</{k}>" for k in ("launchTemplateId", "launchTemplateName", "version") if e[k]
        )
        over = "".join(
            f"<{k}>{escape(e[k])}</{k}>" for k in ("instanceType", "subnetId", "availabilityZone") if e[k]
        )
        items.append(
            "<item><launchTemplateAndOverrides>"
            f"<launchTemplateSpecification>{spec}</launchTemplateSpecification><overrides>{over}</overrides>"
            f"</launchTemplateAndOverrides><lifecycle>{e['lifecycle']}</lifecycle>"
            f"<errorCode>{escape(e['errorCode'])}</errorCode><errorMessage>{escape(e['errorMessage'])}</errorMessage></item>"
        )
    return "<errorSet>" + "".join(items) + "</errorSet>"


def add_fleet_errors(body: bytes, errors: list[dict[str, str]]) -> bytes:
    text = body.decode("utf-8")
    xml = _errors_xml(errors)
    existing = re.search(r"<errorSet>(.*?)</errorSet>", text, re.DOTALL)
    if existing:
        text = text[: existing.start()] + xml.replace("</errorSet>", existing.group(1) + "</errorSet>") + text[existing.end() :]
    else:
        text = re.sub(r"<errorSet\s*/>", "", text)
        text = text.replace("</CreateFleetResponse>", xml + "</CreateFleetResponse>")
    return text.encode("utf-8")


def empty_fleet_response(errors: list[dict[str, str]]) -> bytes:
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<CreateFleetResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">'
        f"<requestId>{uuid.uuid4()}</requestId><fleetId>fleet-{uuid.uuid4()}</fleetId>"
        f"{_errors_xml(errors)}<fleetInstanceSet/></CreateFleetResponse>"
    )
    return body.encode()


# --- client tokens -----------------------------------------------------------------------------------------------
# Actions whose ClientToken makes a retry idempotent on EC2 that the product calls (moto ignores the token).
IDEMPOTENT_ACTIONS = frozenset({"CreateFleet"})
# EC2's own message for a token reused with other parameters.
MISMATCH_MESSAGE = "Arguments on this idempotent request are inconsistent with arguments used in previous request(s)."
_Answer = tuple[int, list[tuple[str, str]] | dict[str, str], bytes]


@dataclass
class _Done:
    parameters: tuple[tuple[str, Any], ...]  # the request without its token
    answer: _Answer


class ClientTokens:
    """EC2's ClientToken idempotency: a token's first successful answer, replayed to a repeat of the same
    request; a repeat with other parameters is refused. A token's requests are answered one at a time, so
    two passes sending it at once launch once. EC2 keeps a token at least 24 hours; sim keeps the newest
    ``limit`` tokens (its environments live for minutes)."""

    def __init__(self, limit: int = 5000) -> None:
        self._lock = threading.Lock()
        self._done: dict[tuple[str, str, str], _Done] = {}
        self._serial: dict[tuple[str, str, str], threading.Lock] = {}
        self._limit = limit

    @staticmethod
    def key(call: Call, headers: Any) -> tuple[str, str, str] | None:
        """(region, action, token) for a call whose token EC2 honours; None for any other call."""
        token = call.params.get("ClientToken") if call.service == "ec2" else None
        if call.action not in IDEMPOTENT_ACTIONS or not token:
            return None
        match = _CREDENTIAL.search(headers.get("Authorization", ""))
        return (match.group(1) if match else "", call.action, token)

    @staticmethod
    def parameters(call: Call) -> tuple[tuple[str, Any], ...]:
        return tuple(sorted((k, v) for k, v in call.params.items() if k != "ClientToken"))

    @contextlib.contextmanager
    def serial(self, key: tuple[str, str, str]) -> Iterator[None]:
        with self._lock:
            lock = self._serial.setdefault(key, threading.Lock())
        with lock:
            yield

    def earlier(self, key: tuple[str, str, str]) -> _Done | None:
        with self._lock:
            return self._done.get(key)

    def remember(self, key: tuple[str, str, str], call: Call, answer: _Answer) -> None:
        """Only a success binds the token: a request EC2 refused may be sent again with it."""
        if answer[0] != 200:
            return
        with self._lock:
            self._done[key] = _Done(self.parameters(call), answer)
            while len(self._done) > self._limit:
                oldest = next(iter(self._done))
                del self._done[oldest]
                self._serial.pop(oldest, None)


# --- the proxy ----------------------------------------------------------------------------------------------------
Route = Callable[[], Any]


_INSTANCE_ID = re.compile(r"\bi-[0-9a-f]{8,17}\b")
# One instance of a DescribeInstances answer: its id, then (before the next instance) its launch time.
_LAUNCH_TIME = re.compile(
    r"<instanceId>(i-[0-9a-f]+)</instanceId>((?:(?!<instanceId>).)*?)<launchTime>([^<]*)</launchTime>", re.S
)


def _note_launched(call: Call, record: dict[str, Any], data: bytes) -> None:
    """A launch's record names the instances it made: the call log alone tells when each was launched."""
    if call.service == "ec2" and call.action in ("CreateFleet", "RunInstances") and record.get("status") == 200:
        record["instanceIds"] = sorted(set(_INSTANCE_ID.findall(data.decode("utf-8", "replace"))))


class FaultProxy:
    """Reverse proxy on 127.0.0.1 (free port) in front of `upstream` (moto's URL)."""

    def __init__(
        self, upstream: str, routes: dict[str, Route] | None = None, clock: Any = None, enforcer: Any = None,
        lambdas: Any = None,
    ) -> None:
        self.upstream = urlsplit(upstream)
        # Lambda (sim/aws/lambda_service.LambdaService) answers Lambda's calls itself: moto's would run containers.
        self.lambdas = lambdas
        # IAM (sim/aws/iam_enforcement.Enforcer): each call held to its caller's policy; None lets all through.
        self.enforcer = enforcer
        # moto stamps LaunchTime with the real clock; the environment runs on simulated time, so the
        # launch time reported is the simulated time the launch happened (a TTL scenario that advances
        # the clock must see an instance grow old, as a real one would).
        self.clock = clock
        self._launch_times: dict[str, str] = {}
        self.rules = FaultRules()
        self.tokens = ClientTokens()
        self.extra_routes = dict(routes or {})
        self._rest = _RestRoutes()
        self._zones: dict[str, str] = {}
        self._local = threading.local()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        assert self._server is not None, "start() the proxy first"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> FaultProxy:
        proxy = self

        class Handler(_ProxyHandler):
            owner = proxy

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.1}, name="sim-aws-proxy", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def forward(self, method: str, path: str, headers: dict[str, str], body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
        for attempt in range(2):
            conn = getattr(self._local, "conn", None)
            if conn is None:
                conn = http.client.HTTPConnection(self.upstream.hostname, self.upstream.port, timeout=300)
                self._local.conn = conn
            try:
                conn.request(method, path, body=body, headers=headers)
                response = conn.getresponse()
                data = response.read()
                return response.status, response.getheaders(), data
            except (http.client.HTTPException, OSError):
                conn.close()
                self._local.conn = None
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def simulated_launch_times(self, action: str, data: bytes) -> bytes:
        if action in ("CreateFleet", "RunInstances"):
            stamp = self.clock.now().strftime("%Y-%m-%dT%H:%M:%S.000Z")
            for iid in set(_INSTANCE_ID.findall(data.decode("utf-8", "replace"))):
                self._launch_times.setdefault(iid, stamp)
            return data
        if action != "DescribeInstances" or not self._launch_times:
            return data
        times = self._launch_times

        def stamp_launch(match: re.Match[str]) -> str:
            when = times.get(match.group(1))
            return match.group(0) if when is None else f"{match.group(0)[: match.start(3) - match.start(0)]}{when}</launchTime>"

        return _LAUNCH_TIME.sub(stamp_launch, data.decode("utf-8")).encode("utf-8")

    def subnet_zone(self, subnet_id: str) -> str:
        if not subnet_id:
            return ""
        if subnet_id not in self._zones:
            query = urlencode({"Action": "DescribeSubnets", "Version": "2016-11-15", "SubnetId.1": subnet_id})
            headers = {
                "Content-Type": "application/x-www-form-urlencoded",
                "Authorization": "AWS4-HMAC-SHA256 Credential=sim/20240101/us-east-1/ec2/aws4_request",
            }
            _, _, data = self.forward("POST", "/", headers, query.encode())
            found = re.search(r"<availabilityZone>([^<]+)</availabilityZone>", data.decode("utf-8", "replace"))
            if not found:
                return ""
            self._zones[subnet_id] = found.group(1)
        return self._zones[subnet_id]


class _ProxyHandler(BaseHTTPRequestHandler):
    owner: FaultProxy
    protocol_version = "HTTP/1.1"
    server_version = "AmazonEC2"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002  (BaseHTTPRequestHandler's name)
        return

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _send(self, status: int, headers: list[tuple[str, str]] | dict[str, str], body: bytes) -> None:
        self.send_response(status)
        items = headers.items() if isinstance(headers, dict) else headers
        for key, value in items:
            if key.lower() not in ("content-length", "transfer-encoding", "connection", "server", "date"):
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, payload: Any) -> None:
        self._send(status, {"Content-Type": "application/json"}, json.dumps(payload, default=str).encode())

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def do_HEAD(self) -> None:
        self._handle("HEAD")

    def _handle(self, method: str) -> None:
        body = self._body()
        path = urlsplit(self.path).path
        if path.startswith("/sim/v1/") and self._control(method, path, body):
            return
        self._proxy(method, body)

    # control API ---------------------------------------------------------------------------------------
    def _control(self, method: str, path: str, body: bytes) -> bool:
        owner = self.owner
        if path == "/sim/v1/aws-faults" or path.startswith("/sim/v1/aws-faults/"):
            rule_id = path[len("/sim/v1/aws-faults/") :] if path.startswith("/sim/v1/aws-faults/") else None
            if method == "GET":
                self._json(200, {"rules": owner.rules.list()})
            elif method == "POST" and rule_id is None:
                try:
                    payload = json.loads(body or b"{}")
                    specs = payload["rules"] if isinstance(payload, dict) and "rules" in payload else [payload]
                    if not isinstance(specs, list):
                        raise RuleError("'rules' must be a list of fault rules")
                    rules = owner.rules.add(specs)
                except (ValueError, RuleError) as exc:
                    self._json(400, {"error": str(exc)})
                    return True
                self._json(201, {"rules": [r.to_json() for r in rules]})
            elif method == "DELETE":
                removed = owner.rules.clear(rule_id)
                if rule_id is not None and not removed:
                    self._json(404, {"error": f"no fault rule {rule_id}"})
                else:
                    self._json(200, {"rules": owner.rules.list()})
            else:
                self._json(405, {"error": f"{method} is not allowed on {path}"})
            return True
        if path == "/sim/v1/aws-calls":
            if method == "DELETE":
                owner.rules.calls.clear()
                self._json(200, {"calls": []})
                return True
            query = parse_qs(urlsplit(self.path).query)
            calls = list(owner.rules.calls)
            for key in ("service", "action"):
                if key in query:
                    calls = [c for c in calls if c[key].lower() == query[key][0].lower()]
            self._json(200, {"calls": calls})
            return True
        route = owner.extra_routes.get(f"{method} {path}")
        if route is not None:
            try:
                self._json(200, route())
            except Exception as exc:
                self._json(500, {"error": str(exc)})
            return True
        return False

    # proxying ----------------------------------------------------------------------------------------------
    def _proxy(self, method: str, body: bytes) -> None:
        owner = self.owner
        call = classify(method, self.path, self.headers, body, owner._rest)
        # Big requests are logged without their parameters, so the bounded log stays small in memory.
        params = call.params if len(body) <= _LOGGED_BODY_LIMIT else {"_omitted": f"{len(body)} bytes"}
        record = {"time": time.time(), "service": call.service, "action": call.action, "params": params}
        owner.rules.calls.append(record)
        # sim's own control routes that moto serves (/sim/v1/...) are not AWS: no signature, no IAM.
        is_control = urlsplit(self.path).path.startswith("/sim/v1/")
        if owner.enforcer is not None and not is_control and self._refused(call, body, record):
            return
        held = owner.rules.delay_for(call)
        if held:
            record["delayed"] = held
            time.sleep(held)
        rule = owner.rules.error_for(call)
        if rule is not None:
            code = resolve_code(rule.code, call)
            status = rule.status or _STATUS.get(code, 400)
            record["error"] = code
            self._send(*error_response(call, code, rule.message or _default_message(code, call), status))
            return
        key = owner.tokens.key(call, self.headers)
        if key is None:
            self._send(*self._answer(method, call, body, record))
            return
        with owner.tokens.serial(key):
            earlier = owner.tokens.earlier(key)
            if earlier is None:
                answer = self._answer(method, call, body, record)
                owner.tokens.remember(key, call, answer)
            elif earlier.parameters == owner.tokens.parameters(call):
                answer = earlier.answer
                record["status"], record["idempotentReplay"] = answer[0], True
            else:
                record["error"] = "IdempotentParameterMismatch"
                answer = error_response(call, "IdempotentParameterMismatch", MISMATCH_MESSAGE, 400)
        self._send(*answer)

    def _answer(self, method: str, call: Call, body: bytes, record: dict[str, Any]) -> _Answer:
        """The call carried out (by moto, through the capacity rules for a launch): status, headers, body."""
        owner = self.owner
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("connection", "keep-alive", "content-length")}
        if call.service == "lambda" and owner.lambdas is not None:
            status, lambda_headers, data = owner.lambdas.answer(call.action, self.path, self.headers, body)
            record["status"] = status
            return status, lambda_headers, data
        if call.service == "ec2" and call.action in ("CreateFleet", "RunInstances"):
            capacity = owner.rules.capacity_rules()
            answer = self._capacity(call, capacity, headers, record) if capacity else None
            if answer is not None:
                if call.action == "CreateFleet" and record.get("instanceIds"):
                    self._volume_keys_refused(call, record)
                return answer
        status, response_headers, data = owner.forward(method, self.path, headers, body)
        record["status"] = status
        _note_launched(call, record, data)
        if call.service == "ec2" and call.action == "CreateFleet" and record.get("instanceIds"):
            self._volume_keys_refused(call, record)
        if call.service == "ec2" and status == 200 and owner.clock is not None:
            data = owner.simulated_launch_times(call.action, data)
        return status, response_headers, data

    def _volume_keys_refused(self, call: Call, record: dict[str, Any]) -> None:
        """The fleet's volumes are encrypted with a customer-managed key the caller may not use through EC2: AWS
        launches the instances all the same, and each terminates as it starts with Client.InternalError (its
        volume could not be created); sim does the same, once the answer is made."""
        enforcer, identity = self.owner.enforcer, getattr(self, "_identity", None)
        if enforcer is None or identity is None:
            return
        denial = enforcer.denied(identity, enforcer.volume_key_requests(call.params))
        if denial is None:
            return
        record["volumeKeyDenied"] = denial.to_json()
        log.warning("IAM denied %s: the launched instances terminate with Client.InternalError", denial.message())
        body = json.dumps({"region": REGION, "instanceIds": record["instanceIds"], "code": LAUNCH_KEY_ERROR,
                           "message": "Client error on launch"}).encode()
        self.owner.forward("POST", "/sim/v1/fail-launch", {"Content-Type": "application/json"}, body)

    def _refused(self, call: Call, body: bytes, record: dict[str, Any]) -> bool:
        """Authenticate and authorize the call as AWS would; answer and return True when it is refused."""
        from sim.aws import iam_enforcement as iam

        enforcer = self.owner.enforcer
        identity = enforcer.identity(iam.access_key(self.headers, self.path))
        if identity is None:
            code, message, status = iam.unknown_key_error(call.protocol)
            record["error"] = code
            self._send(*error_response(call, code, message, status))
            return True
        self._identity = identity
        params = call.params
        if not params and call.protocol == "json" and body:  # large bodies are not kept in the call log
            params = _json_params_unbounded(body)
        denial = enforcer.decide(identity, call.service, call.action, params, self.path)
        if denial is None:
            return False
        code, message, status = iam.denied_error(call.protocol, denial)
        record["error"], record["denied"] = code, denial.to_json()
        log.warning("IAM denied %s", denial.message())
        self._send(*error_response(call, code, message, status))
        return True

    def _capacity(self, call: Call, rules: list[Rule], headers: dict[str, str], record: dict[str, Any]) -> _Answer | None:
        """The launch's answer when a capacity rule faults one of its offerings; None when none matched."""
        owner = self.owner
        if call.action == "RunInstances":
            zone = call.params.get("Placement.AvailabilityZone") or owner.subnet_zone(call.params.get("SubnetId", ""))
            capacity_type = "spot" if call.params.get("InstanceMarketOptions.MarketType") == "spot" else "on-demand"
            for rule in rules:
                if rule.instance_type == call.params.get("InstanceType") and (not rule.zone or rule.zone == zone) \
                        and (not rule.capacity_type or rule.capacity_type == capacity_type) and rule.roll():
                    owner.rules.fired(rule)
                    record["error"] = rule.code
                    message = capacity_message(rule.code, rule.instance_type or "", zone, capacity_type)
                    return error_response(call, rule.code, message, rule.status or 500)
            return None
        rewrite, used = rewrite_create_fleet(call.params, rules, owner.subnet_zone)
        if rewrite is None:
            return None
        for rule in used:
            owner.rules.fired(rule)
        record["capacityErrors"] = [e["instanceType"] + "/" + (e["availabilityZone"] or e["subnetId"]) for e in rewrite.errors]
        if rewrite.body is None:
            record["status"] = 200
            return 200, {"Content-Type": "text/xml;charset=UTF-8"}, empty_fleet_response(rewrite.errors)
        status, response_headers, data = owner.forward("POST", self.path, headers, rewrite.body)
        record["status"] = status
        _note_launched(call, record, data)
        if status == 200:
            data = add_fleet_errors(data, rewrite.errors)
        return status, response_headers, data
