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
does. Every other call is mapped to its IAM action (which is not always the operation's name: Lambda's
Invoke is lambda:InvokeFunction, SQS's batch calls their single action) and the resource ARN AWS
authorizes it on; a call sim does not know is refused and logged, never checked on `*`.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

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
# What an instant fleet launches, and the two actions it is authorized as.
_LAUNCHED = ("instance", "volume", "network-interface")
_SPOT_REQUEST = "spot-instances-request"
_LAUNCH_ACTIONS = ("ec2:CreateFleet", "ec2:RunInstances")
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
    modelled: bool = True  # False: sim does not know this call's action and resources (refused)


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
_URL_SUFFIX = "amazonaws.com.cn" if PARTITION == "aws-cn" else "amazonaws.com"
# What a service asks KMS, as the caller, when it uses a customer-managed key for the caller (kms:ViaService
# names it). SSM decrypting a SecureString: kms:Decrypt. EC2 creating a volume encrypted with the key: a grant
# for the volume, and a data key (Amazon EBS User Guide, "Required key policy for use with encrypted volumes").
SSM_VIA = f"ssm.{REGION}.{_URL_SUFFIX}"
EC2_VIA = f"ec2.{REGION}.{_URL_SUFFIX}"
VOLUME_KEY_ACTIONS = ("kms:CreateGrant", "kms:GenerateDataKeyWithoutPlaintext", "kms:Decrypt")
# SSM's AWS-managed key: its key policy allows every principal of the account through SSM, no grant needed.
_SSM_MANAGED_KEY = "alias/aws/ssm"

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
        self._images: dict[str, list[tuple[str, dict[str, list[str]]]]] = {}
        self._images_lock = threading.Lock()

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
            if not request.modelled:
                if statements is None:
                    continue  # the administrator: only a resource policy holds it, and this call names none
                # Loud, and refused: allowing it on `*` would let the product's next new call pass on sim
                # and be refused on AWS (or pass on AWS with a grant sim never checked).
                log.error("IAM: sim does not know how AWS authorizes %s (called by %s): refused; map it to its "
                          "IAM action and resource in sim/aws/iam_enforcement.py", request.action, identity)
                return Denial(identity, self.principal(identity), request.action, request.resource,
                              "sim does not model how AWS authorizes this call (sim/aws/iam_enforcement.py)")
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
        """The authorization requests of one call; a call sim does not know how AWS authorizes gives one
        unmodelled request, which `decide` refuses (never a guess on `*` that would let the next new call by)."""
        handler = getattr(self, f"_{prefix}_{action}", None) if prefix == "ec2" else None
        if handler is not None:
            return handler(params)
        mapper = _MAPPERS.get(prefix)
        found = mapper(self, action, params, path) if mapper is not None else None
        return found if found is not None else [Request(f"{prefix}:{action}", "*", modelled=False)]

    # EC2 calls that create or change resources
    def _ec2_CreateLaunchTemplate(self, params: Mapping[str, Any]) -> list[Request]:  # noqa: N802
        tags = _tag_specifications(params, "TagSpecification").get("launch-template", {})
        arn = _ec2_arn("launch-template", "*")
        requests = [Request("ec2:CreateLaunchTemplate", arn, _request_tags(tags))]
        if tags:
            requests.append(Request("ec2:CreateTags", arn, {**_request_tags(tags), "ec2:createaction": ["CreateLaunchTemplate"]}))
        return requests

    def _ec2_CreateFleet(self, params: Mapping[str, Any]) -> list[Request]:  # noqa: N802
        """An instant fleet launches through RunInstances with the caller's own permissions (it does not use
        the EC2 Fleet service-linked role): AWS authorizes CreateFleet and RunInstances each on every
        resource the launch creates or uses (Service Authorization Reference, Amazon EC2: CreateFleet's
        dependent action RunInstances; Karpenter's controller policy grants both on the same resources)."""
        request_tags = _tag_specifications(params, "TagSpecification")
        created_tags = {rtype: dict(request_tags.get(rtype, {})) for rtype in ("fleet", *_LAUNCHED, _SPOT_REQUEST)}
        used: list[tuple[str, dict[str, list[str]]]] = []  # (ARN, context) of what the launch uses, not creates
        passed: list[str] = []
        for config in _indexed(params, "LaunchTemplateConfigs"):
            spec = {k.split(".", 1)[1]: v for k, v in config.items() if k.startswith("LaunchTemplateSpecification.")}
            template = self._launch_template(spec)
            if template is None:
                continue  # EC2 answers a template that does not exist itself
            used.append((_ec2_arn("launch-template", template["id"]), _resource_tags(template["tags"])))
            for rtype, tags in template["tag_specifications"].items():
                if rtype in created_tags:
                    created_tags[rtype] = {**tags, **created_tags[rtype]}
            used += template["used"]
            if template.get("role_arn"):
                passed.append(template["role_arn"])
            for key, value in config.items():
                if key.startswith("Overrides.") and key.endswith(".SubnetId"):
                    used.append((_ec2_arn("subnet", value), {}))
                elif key.startswith("Overrides.") and key.endswith(".Placement.GroupName"):
                    used.append((_ec2_arn("placement-group", value), {}))
                elif key.startswith("Overrides.") and key.endswith(".ImageId"):
                    used += self._image_resources(value)
        spot = params.get("TargetCapacitySpecification.DefaultTargetCapacityType") == "spot" or \
            int(params.get("TargetCapacitySpecification.SpotTargetCapacity") or 0) > 0
        launched = [*_LAUNCHED, *([_SPOT_REQUEST] if spot else [])]
        fleet_arn = _ec2_arn("fleet", "*")
        requests = [Request("ec2:CreateFleet", fleet_arn, _request_tags(created_tags["fleet"]))]
        if created_tags["fleet"]:
            requests.append(Request("ec2:CreateTags", fleet_arn,
                                    {**_request_tags(created_tags["fleet"]), "ec2:createaction": ["CreateFleet"]}))
        unique: dict[str, dict[str, list[str]]] = {}
        for arn, context in used:  # each resource once, however many templates name it
            unique.setdefault(arn, context)
        for action in _LAUNCH_ACTIONS:
            requests += [Request(action, arn, context) for arn, context in unique.items()]
            requests += [Request(action, _ec2_arn(rtype, "*"), _request_tags(created_tags[rtype])) for rtype in launched]
        # The resources launched are tagged at creation: ec2:CreateTags with the creating action. Which action
        # EC2 names for an instant fleet's instances is not documented; Karpenter's policy allows both, so
        # sim asks for both (a policy allowing one only would be a guess that AWS may refuse).
        for rtype in launched:
            tags = created_tags[rtype]
            if tags:
                requests += [Request("ec2:CreateTags", _ec2_arn(rtype, "*"),
                                     {**_request_tags(tags), "ec2:createaction": [action.split(":", 1)[1]]})
                             for action in _LAUNCH_ACTIONS]
        requests += [Request("iam:PassRole", role, {"iam:passedtoservice": [EC2_PRINCIPAL]})
                     for role in dict.fromkeys(passed)]
        return requests

    def volume_key_requests(self, params: Mapping[str, Any]) -> list[Request]:
        """What EC2 asks KMS as the caller for the encrypted volumes of a fleet (its templates' mappings; the
        account's default EBS key where a mapping is encrypted without a key, or encryption is on by default):
        a grant for the volume and a data key, on each customer-managed key. AWS authorizes the fleet without
        them; the instance starts, and terminates with Client.InternalError when they are refused."""
        keys: list[str] = []
        for config in _indexed(params, "LaunchTemplateConfigs"):
            spec = {k.split(".", 1)[1]: v for k, v in config.items() if k.startswith("LaunchTemplateSpecification.")}
            template = self._launch_template(spec)
            if template is not None:
                keys += template["volume_keys"]
        context = {"kms:viaservice": [EC2_VIA], "kms:calleraccount": [ACCOUNT]}
        grant = {**context, "kms:grantisforawsresource": ["true"]}
        return [Request(action, key, grant if action == "kms:CreateGrant" else context)
                for key in dict.fromkeys(k for k in keys if k) for action in VOLUME_KEY_ACTIONS]

    def denied(self, identity: str, requests: list[Request]) -> Denial | None:
        """The first of ``requests`` ``identity``'s policy does not allow (identity policies only: sim gives KMS keys
        the default key policy, which leaves a key's use in the account to IAM)."""
        if identity == ADMIN:
            return None
        for request in requests:
            context = {"aws:requestedregion": [REGION], "aws:securetransport": ["true"], **request.context}
            decision = iam_policy.evaluate(self.statements[identity], request.action, request.resource, context)
            if not decision.allowed:
                return Denial(identity, self.principal(identity), request.action, request.resource,
                              f"no identity-based policy allows the {request.action} action")
        return None

    def _ec2_TerminateInstances(self, params: Mapping[str, Any]) -> list[Request]:  # noqa: N802
        ids = [v for k, v in params.items() if k.startswith("InstanceId.")]
        tags = self._resource_tags_of(ids)
        return [Request("ec2:TerminateInstances", _ec2_arn("instance", i), _resource_tags(tags.get(i, {}))) for i in ids]

    def _ec2_DeleteLaunchTemplate(self, params: Mapping[str, Any]) -> list[Request]:  # noqa: N802
        spec = {k: v for k, v in params.items() if k in ("LaunchTemplateId", "LaunchTemplateName")}
        template = self._launch_template(spec, with_data=False)
        if template is None:
            return [Request("ec2:DeleteLaunchTemplate", _ec2_arn("launch-template", "*"))]
        return [Request("ec2:DeleteLaunchTemplate", _ec2_arn("launch-template", template["id"]),
                        _resource_tags(template["tags"]))]

    def _ec2_CreateTags(self, params: Mapping[str, Any]) -> list[Request]:  # noqa: N802
        # Tags added after creation: each resource (instance, volume, interface...) with its current tags and
        # the tags asked for, as AWS authorizes aws:ResourceTag on each resource a CreateTags call names.
        ids = [v for k, v in params.items() if k.startswith("ResourceId.")]
        tags = {t["Key"]: t.get("Value", "") for t in _indexed(params, "Tag") if "Key" in t}
        current = self._resource_tags_of(ids)
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

    def _resource_tags_of(self, ids: list[str]) -> dict[str, dict[str, str]]:
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
        out["used"] = self._template_resources(data)
        out["volume_keys"] = self._volume_keys(data)
        profile = data.get("IamInstanceProfile") or {}
        out["role_arn"] = self._profile_role(profile.get("Name") or (profile.get("Arn") or "").rsplit("/", 1)[-1])
        return out

    def _template_resources(self, data: Mapping[str, Any]) -> list[tuple[str, dict[str, list[str]]]]:
        """The resources a launch from this template data uses (each RunInstances resource type that is not
        created): its image and that image's snapshots, security groups and subnets (also those named on its
        network interfaces), snapshots of its own block device mappings, key pair, placement group and
        capacity reservation."""
        used: list[tuple[str, dict[str, list[str]]]] = []
        if data.get("ImageId"):
            used += self._image_resources(str(data["ImageId"]))
        for mapping in data.get("BlockDeviceMappings") or []:
            snapshot = (mapping.get("Ebs") or {}).get("SnapshotId")
            if snapshot:
                used.append((_shared_arn("snapshot", snapshot), {}))
        groups = list(data.get("SecurityGroupIds") or [])
        for interface in data.get("NetworkInterfaces") or []:
            groups += interface.get("Groups") or []
            if interface.get("SubnetId"):
                used.append((_ec2_arn("subnet", interface["SubnetId"]), {}))
        used += [(_ec2_arn("security-group", g), {}) for g in groups]
        if data.get("KeyName"):
            used.append((_ec2_arn("key-pair", data["KeyName"]), {}))
        placement = data.get("Placement") or {}
        if placement.get("GroupName"):
            used.append((_ec2_arn("placement-group", placement["GroupName"]), {}))
        target = (data.get("CapacityReservationSpecification") or {}).get("CapacityReservationTarget") or {}
        if target.get("CapacityReservationId"):
            # A launch into a capacity reservation uses it: AWS authorizes the launch on its ARN too.
            used.append((_ec2_arn("capacity-reservation", target["CapacityReservationId"]), {}))
        return used

    def _volume_keys(self, data: Mapping[str, Any]) -> list[str]:
        """The customer-managed keys (ARNs) the volumes of a launch from this template data are encrypted with."""
        default: dict[str, Any] | None = None
        keys: list[str] = []
        for mapping in data.get("BlockDeviceMappings") or []:
            ebs = mapping.get("Ebs")
            if not isinstance(ebs, dict):
                continue
            if ebs.get("KmsKeyId"):
                keys.append(str(ebs["KmsKeyId"]))
                continue
            if default is None:
                default = self._ebs_default()
            if ebs.get("Encrypted") in (True, "true") or default["encryptedByDefault"]:
                keys.append(str(default["kmsKeyId"]))  # empty: the AWS-managed aws/ebs key
        return [arn for arn in (self.customer_key(k) for k in keys if k) if arn]

    def _ebs_default(self) -> dict[str, Any]:
        import urllib.request

        request = urllib.request.Request(f"{self.moto_url}/sim/v1/ebs-default-key", method="POST",
                                         data=json.dumps({"region": REGION, "account": ACCOUNT}).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as response:
            return dict(json.loads(response.read()))

    def customer_key(self, key: str) -> str | None:
        """The ARN of the customer-managed key ``key`` names (a key id, key ARN, alias or alias ARN); None for an
        AWS-managed key (its key policy lets the account use it through its service) or none found (the service
        answers that itself)."""
        if key == _SSM_MANAGED_KEY or key.endswith(":" + _SSM_MANAGED_KEY) or key.split("/")[-1] == "aws/ebs":
            return None
        kms = self._client("kms")
        try:
            metadata = kms.describe_key(KeyId=key)["KeyMetadata"]
            aliases = kms.list_aliases(KeyId=metadata["KeyId"]).get("Aliases") or []
        except Exception:
            return None
        # moto makes aws/ebs as a customer key; AWS's own keys are the ones under alias/aws/.
        if metadata.get("KeyManager") == "AWS" or any(str(a.get("AliasName", "")).startswith("alias/aws/")
                                                      for a in aliases):
            return None
        return str(metadata["Arn"])

    def secure_string_keys(self, action: str, params: Mapping[str, Any]) -> list[str]:
        """The customer-managed keys of the SecureString parameters a decrypting read returns (moto keeps each
        one's KeyId), once each."""
        ssm = self._client("ssm")
        if action == "GetParametersByPath":
            option = "Recursive" if params.get("Recursive") in (True, "true") else "OneLevel"
            filters = [{"Key": "Path", "Option": option, "Values": [str(params.get("Path") or "/")]}]
        else:
            names = [n.split(":", 1)[0] for n in _ssm_names(action, params)]
            filters = [{"Key": "Name", "Values": names}] if names else []
        if not filters:
            return []
        keys: list[str] = []
        kwargs: dict[str, Any] = {"ParameterFilters": [*filters, {"Key": "Type", "Values": ["SecureString"]}]}
        try:
            while True:
                page = ssm.describe_parameters(**kwargs)
                keys += [str(p["KeyId"]) for p in page.get("Parameters") or [] if p.get("KeyId")]
                if not page.get("NextToken"):
                    break
                kwargs["NextToken"] = page["NextToken"]
        except Exception:  # a bad path or name: SSM answers that itself
            return []
        return list(dict.fromkeys(arn for arn in (self.customer_key(k) for k in keys) if arn))

    def _image_resources(self, image_id: str) -> list[tuple[str, dict[str, list[str]]]]:
        """The image (with its ec2:Owner, ec2:Public, ec2:ImageType, ec2:RootDeviceType) and the snapshots its
        block device mappings name: a launch from an EBS-backed AMI reads them."""
        with self._images_lock:
            cached = self._images.get(image_id)
        if cached is not None:
            return cached
        try:
            images = self._ec2().describe_images(ImageIds=[image_id]).get("Images") or []
        except Exception:  # an image that does not exist: EC2 answers that itself
            images = []
        out: list[tuple[str, dict[str, list[str]]]] = [(_shared_arn("image", image_id), {})]
        if images:
            image = images[0]
            owner = "amazon" if image.get("ImageOwnerAlias") == "amazon" else str(image.get("OwnerId") or "")
            out[0] = (out[0][0], {"ec2:owner": [owner], "ec2:public": [str(bool(image.get("Public"))).lower()],
                                  "ec2:imagetype": [str(image.get("ImageType") or "machine")],
                                  "ec2:rootdevicetype": [str(image.get("RootDeviceType") or "ebs")]})
            out += [(_shared_arn("snapshot", m["Ebs"]["SnapshotId"]), {})
                    for m in image.get("BlockDeviceMappings") or [] if (m.get("Ebs") or {}).get("SnapshotId")]
            with self._images_lock:  # an image's snapshots never change: asked once per image
                self._images[image_id] = out
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


# --- the IAM action and resources of each call, per service (None: not modelled) ------------------------------
# Describe/List calls of these services take no resource-level permissions (Service Authorization Reference:
# no resource type for the action), so AWS authorizes them on "*".
_ON_ANY_RESOURCE = {
    "ec2": ("Describe",),
    "ssm": ("DescribeParameters",),
    "dynamodb": ("ListTables",),
    "eks": ("ListClusters",),
    "sqs": ("ListQueues",),
    "iam": ("ListRoles", "ListInstanceProfiles"),
    "pricing": ("GetProducts", "DescribeServices", "GetAttributeValues"),
    "cloudwatch": ("PutMetricData", "GetMetricData", "GetMetricStatistics", "ListMetrics"),
    "sts": ("GetCallerIdentity",),
}
_SSM_DECRYPTING = {"GetParameter", "GetParameters", "GetParametersByPath", "GetParameterHistory"}
_SSM_PARAMETER_ACTIONS = {"GetParameter", "GetParameters", "GetParametersByPath", "GetParameterHistory", "PutParameter",
                          "DeleteParameter", "DeleteParameters", "LabelParameterVersion"}
_DYNAMODB_TABLE_ACTIONS = {"GetItem", "PutItem", "UpdateItem", "DeleteItem", "Query", "Scan", "BatchGetItem",
                           "BatchWriteItem", "DescribeTable", "DescribeTimeToLive", "ConditionCheckItem"}
_EKS_CLUSTER = re.compile(r"^/clusters/([^/?]+)/?$")
# Lambda's Invoke operation is the IAM action lambda:InvokeFunction, on the function's (qualified) ARN.
_LAMBDA_INVOKE = re.compile(r"^/2015-03-31/functions/([^/?]+)/invocations/?$")


def _on_any_resource(prefix: str, action: str) -> list[Request] | None:
    if any(action == a or (a == "Describe" and action.startswith(a)) for a in _ON_ANY_RESOURCE.get(prefix, ())):
        return [Request(f"{prefix}:{action}", "*")]
    return None


def _ec2_requests(enforcer: Enforcer, action: str, params: Mapping[str, Any], path: str) -> list[Request] | None:
    return _on_any_resource("ec2", action)


def _ssm_requests(enforcer: Enforcer, action: str, params: Mapping[str, Any], path: str) -> list[Request] | None:
    if action in _SSM_PARAMETER_ACTIONS:
        requests = [Request(f"ssm:{action}", _ssm_arn(name)) for name in _ssm_names(action, params)]
        if requests and action in _SSM_DECRYPTING and params.get("WithDecryption") in (True, "true"):
            requests += [Request("kms:Decrypt", key, {"kms:viaservice": [SSM_VIA], "kms:calleraccount": [ACCOUNT]})
                         for key in enforcer.secure_string_keys(action, params)]
        return requests or None
    return _on_any_resource("ssm", action)


def _dynamodb_requests(enforcer: Enforcer, action: str, params: Mapping[str, Any], path: str) -> list[Request] | None:
    if action in _DYNAMODB_TABLE_ACTIONS:
        tables = [params["TableName"]] if "TableName" in params else list(params.get("RequestItems") or {})
        return [Request(f"dynamodb:{action}", f"arn:{PARTITION}:dynamodb:{REGION}:{ACCOUNT}:table/{t}")
                for t in tables] or None
    return _on_any_resource("dynamodb", action)


def _eks_requests(enforcer: Enforcer, action: str, params: Mapping[str, Any], path: str) -> list[Request] | None:
    match = _EKS_CLUSTER.match(urlsplit(path).path)
    if action == "DescribeCluster" and match:
        return [Request("eks:DescribeCluster",
                        f"arn:{PARTITION}:eks:{REGION}:{ACCOUNT}:cluster/{unquote(match.group(1))}")]
    return _on_any_resource("eks", action)


def _sqs_requests(enforcer: Enforcer, action: str, params: Mapping[str, Any], path: str) -> list[Request] | None:
    if "QueueUrl" in params:
        # .../<account>/<name>: a queue's ARN, which the function's ReceiveMessage/DeleteMessage grant names.
        # SQS has no IAM action for its batch calls: each is authorized as its single-message action.
        account, _, name = urlsplit(str(params["QueueUrl"])).path.strip("/").partition("/")
        return [Request(f"sqs:{action.removesuffix('Batch')}", f"arn:{PARTITION}:sqs:{REGION}:{account}:{name}")]
    if action == "GetQueueUrl" and "QueueName" in params:
        account = str(params.get("QueueOwnerAWSAccountId") or ACCOUNT)
        return [Request("sqs:GetQueueUrl", f"arn:{PARTITION}:sqs:{REGION}:{account}:{params['QueueName']}")]
    return _on_any_resource("sqs", action)


def _iam_requests(enforcer: Enforcer, action: str, params: Mapping[str, Any], path: str) -> list[Request] | None:
    if "RoleName" in params:  # iam:ListInstanceProfilesForRole, GetRole...: on the role
        return [Request(f"iam:{action}", enforcer._role_arn(str(params["RoleName"])))]
    if "InstanceProfileName" in params:
        return [Request(f"iam:{action}",
                        f"arn:{PARTITION}:iam::{ACCOUNT}:instance-profile/{params['InstanceProfileName']}")]
    return _on_any_resource("iam", action)


def _lambda_requests(enforcer: Enforcer, action: str, params: Mapping[str, Any], path: str) -> list[Request] | None:
    url = urlsplit(path)
    match = _LAMBDA_INVOKE.match(url.path)
    if action != "Invoke" or not match:
        return None
    qualifier = parse_qs(url.query).get("Qualifier", [""])[0]
    return [Request("lambda:InvokeFunction", lambda_function_arn(unquote(match.group(1)), qualifier))]


def lambda_function_arn(function: str, qualifier: str = "") -> str:
    """The ARN Lambda authorizes an invocation on, from the FunctionName it was given: a name, a partial
    ARN (account:function:name) or a full ARN, each maybe with a :qualifier (or the Qualifier parameter)."""
    parts = function.split(":")
    if function.startswith("arn:"):
        parts = parts[6:]
    elif len(parts) >= 3 and parts[1] == "function":
        parts = parts[2:]
    name, own_qualifier = parts[0], (parts[1] if len(parts) > 1 else "")
    qualifier = qualifier or own_qualifier
    return f"arn:{PARTITION}:lambda:{REGION}:{ACCOUNT}:function:{name}" + (f":{qualifier}" if qualifier else "")


def _on_any(prefix: str) -> Any:
    return lambda enforcer, action, params, path: _on_any_resource(prefix, action)


_MAPPERS: dict[str, Any] = {
    "ec2": _ec2_requests, "ssm": _ssm_requests, "dynamodb": _dynamodb_requests, "eks": _eks_requests,
    "sqs": _sqs_requests, "iam": _iam_requests, "lambda": _lambda_requests,
    "pricing": _on_any("pricing"), "cloudwatch": _on_any("cloudwatch"), "sts": _on_any("sts"),
}


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


def _shared_arn(resource_type: str, resource_id: str) -> str:
    """Images and snapshots have no account in their ARN (they may be public or another account's)."""
    return f"arn:{PARTITION}:ec2:{REGION}::{resource_type}/{resource_id}"


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
