"""IAM at sim's AWS endpoint: who is calling, what the call does to which resources, and AWS's answer.

Each request is signed (SigV4) with an access key; the key says which identity calls (sim/aws/constants.py):
the administrator is unrestricted; each function's key is held to that function's role as the stack
synthesizes it (sim/aws/iam_policies.py); the CLI's "operator" key to the union of the functions' roles.

A call is authorized as AWS authorizes it (the Service Authorization Reference lists each action's
resource types and condition keys): one request per resource the call creates or names, each with its
own context. For the calls that create EC2 resources that is one request per created resource type
with that type's request tags (from the call's TagSpecifications and, for the instances, volumes and
network interfaces of a fleet, its launch template's), plus the implied `ec2:CreateTags` with
`ec2:CreateAction`; for calls on existing resources the resources' own tags (`aws:ResourceTag/*`,
`ec2:ResourceTag/*`), read from moto as the administrator. Any request denied denies the call, as AWS
does. Actions not modelled here are authorized against `*`.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

from sim.aws import iam_policy
from sim.aws.constants import (
    ADMIN_CREDENTIALS,
    FUNCTION_CREDENTIALS,
    FUNCTIONS,
    OPERATOR_CREDENTIALS,
    PARTITION,
    REGION,
)

log = logging.getLogger("sim.aws.iam")

ACCOUNT = "123456789012"
OPERATOR = "operator"
ADMIN = "admin"
_CREDENTIAL = re.compile(r"Credential=([^/,\s]+)/")
# Signing name -> IAM service prefix, where they differ.
_PREFIX = {"monitoring": "cloudwatch", "cloudwatch": "cloudwatch", "execute-api": "execute-api"}
# Actions AWS authorizes for any signed caller, with no policy needed.
_ALWAYS = {"sts:GetCallerIdentity"}
# Services whose resources sim gives resource-based policies (Enforcer.resource_policy).
_RESOURCE_POLICIES = {"sqs"}


@dataclass(frozen=True)
class Request:
    """One authorization request: an action on one resource, with its context."""

    action: str
    resource: str
    context: dict[str, list[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class Denial:
    identity: str
    principal: str
    action: str
    resource: str
    reason: str

    def message(self) -> str:
        return (
            f"User: {self.principal} is not authorized to perform: {self.action} on resource: {self.resource} "
            f"because {self.reason}"
        )

    def to_json(self) -> dict[str, str]:
        return {"identity": self.identity, "action": self.action, "resource": self.resource, "reason": self.reason}


def unknown_key_error(protocol: str) -> tuple[str, str, int]:
    """AWS's answer to a request signed with an access key it does not know: (code, message, status)."""
    if protocol == "ec2":
        return "AuthFailure", "AWS was not able to validate the provided access credentials", 401
    if protocol == "query":
        return "InvalidClientTokenId", "The security token included in the request is invalid.", 403
    return "UnrecognizedClientException", "The security token included in the request is invalid.", 400


def denied_error(protocol: str, denial: Denial) -> tuple[str, str, int]:
    """AWS's answer to a call its policy does not allow: (code, message, status)."""
    if protocol == "ec2":
        return "UnauthorizedOperation", f"You are not authorized to perform this operation. {denial.message()}", 403
    if protocol == "query":
        return "AccessDenied", denial.message(), 403
    return "AccessDeniedException", denial.message(), 403 if protocol == "rest-json" else 400


def access_key(headers: Mapping[str, str], path: str) -> str | None:
    match = _CREDENTIAL.search(headers.get("Authorization", "") or "")
    if match:
        return match.group(1)
    query = unquote(urlsplit(path).query)
    match = re.search(r"X-Amz-Credential=([^/&]+)/", query)
    return match.group(1) if match else None


# The EC2 service principal a role is passed to: its aws-cn spelling ends in .cn.
EC2_PRINCIPAL = "ec2.amazonaws.com.cn" if PARTITION == "aws-cn" else "ec2.amazonaws.com"

class Enforcer:
    """Decides each call for the identities sim knows, from the functions' synthesized policies."""

    def __init__(self, policies: Mapping[str, list[dict[str, Any]]], moto_url: str, cluster: str) -> None:
        self.cluster = cluster
        for fn in FUNCTIONS:  # what IAM would refuse to create is refused here, not evaluated
            iam_policy.validate(policies[fn], name=f"the {fn} function's role")
        self.statements: dict[str, list[dict[str, Any]]] = {fn: list(policies[fn]) for fn in FUNCTIONS}
        self.statements[OPERATOR] = [s for fn in FUNCTIONS for s in policies[fn]]
        self.keys = {FUNCTION_CREDENTIALS[fn]["aws_access_key_id"]: fn for fn in FUNCTIONS}
        self.keys[OPERATOR_CREDENTIALS["aws_access_key_id"]] = OPERATOR
        self.keys[ADMIN_CREDENTIALS["aws_access_key_id"]] = ADMIN
        self.moto_url = moto_url
        self._local = threading.local()

    def identity(self, key: str | None) -> str | None:
        return self.keys.get(key or "")

    def principal(self, identity: str) -> str:
        from nodescale.names import physical_name

        role = physical_name(self.cluster, identity)
        return f"arn:{PARTITION}:sts::{ACCOUNT}:assumed-role/{role}/{identity}"

    def decide(self, identity: str, signing_service: str, action: str, params: Mapping[str, Any],
               path: str) -> Denial | None:
        """None when the call is allowed; else the first denial."""
        prefix = _PREFIX.get(signing_service, signing_service)
        if identity == ADMIN and prefix not in _RESOURCE_POLICIES:
            return None
        # The administrator has no identity policy to hold it, but an explicit Deny in a resource policy binds it.
        requests = self.requests(prefix, action, params, path)
        statements = None if identity == ADMIN else self.statements[identity]
        for request in requests:
            if request.action in _ALWAYS:
                continue
            # sim's endpoint is plain HTTP on the loopback; the SDKs speak TLS to AWS.
            context = {"aws:requestedregion": [REGION], "aws:securetransport": ["true"], **request.context}
            policy = self.resource_policy(request.resource)
            if policy is not None:
                decision = iam_policy.evaluate_with_resource_policy(
                    statements, policy, request.action, request.resource, context, self.principal(identity), ACCOUNT)
            elif statements is None:
                continue
            else:
                decision = iam_policy.evaluate(statements, request.action, request.resource, context)
            if not decision.allowed:
                reason = (
                    f"an explicit deny in {'an' if decision.policy == iam_policy.IDENTITY else 'a'} {decision.policy} "
                    f"policy ({decision.statement})"
                    if decision.verdict == iam_policy.EXPLICIT_DENY
                    else f"no identity-based policy allows the {request.action} action"
                )
                return Denial(identity, self.principal(identity), request.action, request.resource, reason)
        return None

    def resource_policy(self, resource: str) -> list[dict[str, Any]] | None:
        """The statements of the resource's own policy (an SQS queue's Policy attribute, read from moto as the
        administrator, so a policy set at run time counts at once); None when it has none."""
        if not resource.startswith(f"arn:{PARTITION}:sqs:"):
            return None
        account, name = resource.split(":")[4:6]
        try:
            attributes = self._client("sqs").get_queue_attributes(
                QueueUrl=f"{self.moto_url}/{account}/{name}", AttributeNames=["Policy"]).get("Attributes") or {}
        except Exception:  # no such queue: SQS answers that itself
            return None
        return iam_policy.statements_of(json.loads(attributes["Policy"])) if attributes.get("Policy") else None

    # --- what a call asks for ---------------------------------------------------------------------------------
    def requests(self, prefix: str, action: str, params: Mapping[str, Any], path: str) -> list[Request]:
        full = f"{prefix}:{action}"
        if prefix == "ec2":
            handler = getattr(self, f"_ec2_{action}", None)
            if handler is not None:
                return handler(params)
            return [Request(full, "*")]
        if prefix == "ssm":
            return [Request(full, _ssm_arn(name)) for name in _ssm_names(action, params)] or [Request(full, "*")]
        if prefix == "dynamodb":
            tables = [params["TableName"]] if "TableName" in params else list(params.get("RequestItems") or {})
            return [Request(full, f"arn:{PARTITION}:dynamodb:{REGION}:{ACCOUNT}:table/{t}") for t in tables] \
                or [Request(full, "*")]
        if prefix == "eks":
            match = re.match(r"^/clusters/([^/?]+)", urlsplit(path).path)
            if match:
                return [Request(full, f"arn:{PARTITION}:eks:{REGION}:{ACCOUNT}:cluster/{unquote(match.group(1))}")]
            return [Request(full, "*")]
        if prefix == "sqs" and "QueueUrl" in params:
            # .../<account>/<name>: a queue's ARN, which the function's ReceiveMessage/DeleteMessage grant names.
            # SQS has no IAM action for its batch calls: each is authorized as its single-message action.
            account, _, name = urlsplit(str(params["QueueUrl"])).path.strip("/").partition("/")
            return [Request(f"sqs:{action.removesuffix('Batch')}", f"arn:{PARTITION}:sqs:{REGION}:{account}:{name}")]
        if prefix == "iam" and "RoleName" in params:
            return [Request(full, self._role_arn(str(params["RoleName"])))]
        if prefix == "iam" and "InstanceProfileName" in params:
            return [Request(full, f"arn:{PARTITION}:iam::{ACCOUNT}:instance-profile/{params['InstanceProfileName']}")]
        return [Request(full, "*")]  # not modelled: authorized against any resource

    # EC2 calls that create or change resources
    def _ec2_CreateLaunchTemplate(self, params: Mapping[str, Any]) -> list[Request]:  # noqa: N802
        tags = _tag_specifications(params, "TagSpecification").get("launch-template", {})
        arn = _ec2_arn("launch-template", "*")
        requests = [Request("ec2:CreateLaunchTemplate", arn, _request_tags(tags))]
        if tags:
            requests.append(Request("ec2:CreateTags", arn, {**_request_tags(tags), "ec2:createaction": ["CreateLaunchTemplate"]}))
        return requests

    def _ec2_CreateFleet(self, params: Mapping[str, Any]) -> list[Request]:  # noqa: N802
        action = "ec2:CreateFleet"
        request_tags = _tag_specifications(params, "TagSpecification")
        templates = _indexed(params, "LaunchTemplateConfigs")
        requests: list[Request] = []
        created_tags: dict[str, dict[str, str]] = {"fleet": dict(request_tags.get("fleet", {}))}
        for rtype in ("instance", "volume", "network-interface", "spot-instances-request"):
            created_tags[rtype] = dict(request_tags.get(rtype, {}))
        subnets: set[str] = set()
        for config in templates:
            spec = {k.split(".", 1)[1]: v for k, v in config.items() if k.startswith("LaunchTemplateSpecification.")}
            template = self._launch_template(spec)
            if template is None:
                continue
            requests.append(Request(action, _ec2_arn("launch-template", template["id"]), _resource_tags(template["tags"])))
            for rtype, tags in template["tag_specifications"].items():
                if rtype in created_tags:
                    created_tags[rtype] = {**tags, **created_tags[rtype]}
            if template.get("image"):
                requests.append(Request(action, f"arn:{PARTITION}:ec2:{REGION}::image/{template['image']}"))
            for group in template.get("security_groups", []):
                requests.append(Request(action, _ec2_arn("security-group", group)))
            if template.get("role_arn"):
                requests.append(Request("iam:PassRole", template["role_arn"],
                                        {"iam:passedtoservice": [EC2_PRINCIPAL]}))
            if template.get("capacity_reservation"):
                # A launch into a capacity reservation uses it: AWS authorizes the action on its ARN too.
                requests.append(Request(action, _ec2_arn("capacity-reservation", template["capacity_reservation"])))
            subnets.update(v for k, v in config.items() if k.startswith("Overrides.") and k.endswith(".SubnetId"))
        for subnet in sorted(subnets):
            requests.append(Request(action, _ec2_arn("subnet", subnet)))
        spot = params.get("TargetCapacitySpecification.DefaultTargetCapacityType") == "spot" or \
            int(params.get("TargetCapacitySpecification.SpotTargetCapacity") or 0) > 0
        created = ["fleet", "instance", "volume", "network-interface"] + (["spot-instances-request"] if spot else [])
        for rtype in created:
            tags = created_tags[rtype]
            arn = _ec2_arn(rtype, "*")
            requests.append(Request(action, arn, _request_tags(tags)))
            if tags:
                requests.append(Request("ec2:CreateTags", arn, {**_request_tags(tags), "ec2:createaction": ["CreateFleet"]}))
        return requests

    def _ec2_TerminateInstances(self, params: Mapping[str, Any]) -> list[Request]:  # noqa: N802
        ids = [v for k, v in params.items() if k.startswith("InstanceId.")]
        tags = self._instance_tags(ids)
        return [Request("ec2:TerminateInstances", _ec2_arn("instance", i), _resource_tags(tags.get(i, {}))) for i in ids]

    def _ec2_DeleteLaunchTemplate(self, params: Mapping[str, Any]) -> list[Request]:  # noqa: N802
        spec = {k: v for k, v in params.items() if k in ("LaunchTemplateId", "LaunchTemplateName")}
        template = self._launch_template(spec, with_data=False)
        if template is None:
            return [Request("ec2:DeleteLaunchTemplate", _ec2_arn("launch-template", "*"))]
        return [Request("ec2:DeleteLaunchTemplate", _ec2_arn("launch-template", template["id"]),
                        _resource_tags(template["tags"]))]

    def _ec2_CreateTags(self, params: Mapping[str, Any]) -> list[Request]:  # noqa: N802
        # Tags added after creation: each resource with its current tags and the tags asked for.
        ids = [v for k, v in params.items() if k.startswith("ResourceId.")]
        tags = {t["Key"]: t.get("Value", "") for t in _indexed(params, "Tag") if "Key" in t}
        current = self._instance_tags([i for i in ids if i.startswith("i-")])
        return [Request("ec2:CreateTags", _ec2_arn(_ec2_type(i), i),
                        {**_resource_tags(current.get(i, {})), **_request_tags(tags)}) for i in ids]

    # --- moto lookups, as the administrator ---------------------------------------------------------------
    def _client(self, service: str) -> Any:
        """A boto3 client straight to moto as the administrator (one per proxy thread)."""
        client = getattr(self._local, service, None)
        if client is None:
            import boto3

            client = boto3.client(service, endpoint_url=self.moto_url, region_name=REGION, **ADMIN_CREDENTIALS)
            setattr(self._local, service, client)
        return client

    def _ec2(self) -> Any:
        return self._client("ec2")

    def _iam(self) -> Any:
        return self._client("iam")

    def _instance_tags(self, ids: list[str]) -> dict[str, dict[str, str]]:
        if not ids:
            return {}
        out: dict[str, dict[str, str]] = {}
        paginator = self._ec2().get_paginator("describe_tags")
        for page in paginator.paginate(Filters=[{"Name": "resource-id", "Values": ids}]):
            for tag in page.get("Tags") or []:
                out.setdefault(tag["ResourceId"], {})[tag["Key"]] = tag.get("Value", "")
        return out

    def _launch_template(self, spec: Mapping[str, str], with_data: bool = True) -> dict[str, Any] | None:
        ec2 = self._ec2()
        query: dict[str, Any] = {}
        if spec.get("LaunchTemplateId"):
            query["LaunchTemplateIds"] = [spec["LaunchTemplateId"]]
        elif spec.get("LaunchTemplateName"):
            query["LaunchTemplateNames"] = [spec["LaunchTemplateName"]]
        else:
            return None
        try:
            found = ec2.describe_launch_templates(**query).get("LaunchTemplates") or []
        except Exception:  # a template that does not exist: EC2 answers that itself
            return None
        if not found:
            return None
        template = found[0]
        out: dict[str, Any] = {
            "id": template["LaunchTemplateId"],
            "tags": {t["Key"]: t.get("Value", "") for t in template.get("Tags") or []},
            "tag_specifications": {},
        }
        if not with_data:
            return out
        version = spec.get("Version") or "$Default"
        versions = ec2.describe_launch_template_versions(LaunchTemplateId=out["id"], Versions=[version])
        data = (versions.get("LaunchTemplateVersions") or [{}])[0].get("LaunchTemplateData") or {}
        for ts in data.get("TagSpecifications") or []:
            out["tag_specifications"][ts.get("ResourceType")] = {t["Key"]: t.get("Value", "") for t in ts.get("Tags") or []}
        out["image"] = data.get("ImageId")
        out["security_groups"] = list(data.get("SecurityGroupIds") or [])
        target = (data.get("CapacityReservationSpecification") or {}).get("CapacityReservationTarget") or {}
        out["capacity_reservation"] = target.get("CapacityReservationId")
        profile = data.get("IamInstanceProfile") or {}
        out["role_arn"] = self._profile_role(profile.get("Name") or (profile.get("Arn") or "").rsplit("/", 1)[-1])
        return out

    def _profile_role(self, profile: str) -> str | None:
        if not profile:
            return None
        try:
            roles = self._iam().get_instance_profile(InstanceProfileName=profile)["InstanceProfile"]["Roles"]
        except Exception:
            return None
        return roles[0]["Arn"] if roles else None

    def _role_arn(self, name: str) -> str:
        try:
            return str(self._iam().get_role(RoleName=name)["Role"]["Arn"])
        except Exception:
            return f"arn:{PARTITION}:iam::{ACCOUNT}:role/{name}"


# --- request parameters (EC2's query protocol flattens lists as Name.N.Field) --------------------------------
def _indexed(params: Mapping[str, Any], prefix: str) -> list[dict[str, str]]:
    items: dict[int, dict[str, str]] = {}
    for key, value in params.items():
        if key.startswith(prefix + "."):
            index, _, rest = key[len(prefix) + 1 :].partition(".")
            if index.isdigit() and rest:
                items.setdefault(int(index), {})[rest] = value
    return [items[i] for i in sorted(items)]


def _tag_specifications(params: Mapping[str, Any], prefix: str) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for spec in _indexed(params, prefix):
        tags = {t["Key"]: t.get("Value", "") for t in _indexed(spec, "Tag") if "Key" in t}
        out.setdefault(spec.get("ResourceType", ""), {}).update(tags)
    return out


def _request_tags(tags: Mapping[str, str]) -> dict[str, list[str]]:
    context = {f"aws:requesttag/{k}".lower(): [v] for k, v in tags.items()}
    if tags:
        context["aws:tagkeys"] = list(tags)
    return context


def _resource_tags(tags: Mapping[str, str]) -> dict[str, list[str]]:
    context: dict[str, list[str]] = {}
    for key, value in tags.items():
        context[f"aws:resourcetag/{key}".lower()] = [value]
        context[f"ec2:resourcetag/{key}".lower()] = [value]
    return context


def _ec2_arn(resource_type: str, resource_id: str) -> str:
    return f"arn:{PARTITION}:ec2:{REGION}:{ACCOUNT}:{resource_type}/{resource_id}"


def _ec2_type(resource_id: str) -> str:
    prefixes = {"i-": "instance", "vol-": "volume", "eni-": "network-interface", "lt-": "launch-template",
                "fleet-": "fleet", "sir-": "spot-instances-request", "subnet-": "subnet", "sg-": "security-group"}
    return next((t for p, t in prefixes.items() if resource_id.startswith(p)), "*")


def _ssm_names(action: str, params: Mapping[str, Any]) -> list[str]:
    if action == "GetParametersByPath":
        return [str(params.get("Path") or "/")]
    if "Names" in params:
        return [str(n) for n in params.get("Names") or []]
    return [str(params["Name"])] if "Name" in params else []


def _ssm_arn(name: str) -> str:
    name = name.rstrip("/") if name != "/" else name
    # Public parameters (AWS's own, such as the EKS AMI ids) have no account in their ARN.
    account = "" if name.startswith("/aws/service/") else ACCOUNT
    return f"arn:{PARTITION}:ssm:{REGION}:{account}:parameter{name if name.startswith('/') else '/' + name}"
