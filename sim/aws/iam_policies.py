"""The functions' IAM policies as the stack synthesizes them, for sim's AWS endpoint to enforce.

Never a hand copy: `synthesize` builds the stack with infra/'s own code for sim's cluster, account and
region, deployed as docs/deploy.md's one command says (its `-c` values, read from the document: a NodePool
file whose EC2NodeClass names Karpenter's node role, which sim seeds; for another cluster than the docs',
that role given with `-c nodeRoles`), so the functions may pass exactly the roles that deploy grants; then reads, for each Lambda function, the statements of the role it runs as, with
CloudFormation's intrinsics resolved to the names those resources get. Importing aws_cdk and
synthesizing takes seconds, so the result is cached under `.cache/sim-iam/` (or the directory
`NODESCALE_SIM_IAM_CACHE` names: an empty one is a first run's), keyed by everything that shapes it (infra's code
and manifests, the naming rule, cluster, region); `policies_for` reads the cache, or synthesizes in a subprocess
once per change.

    python -m sim.aws.iam_policies --cluster demo-cluster --region us-east-1   # prints the JSON
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from sim.aws.constants import FUNCTIONS, partition_of

ROOT = Path(__file__).resolve().parents[2]
CACHE_VARIABLE = "NODESCALE_SIM_IAM_CACHE"
ACCOUNT = "123456789012"  # moto's account
DEPLOY_DOC = ROOT / "docs" / "deploy.md"
_SHAPING = ("infra", "layers/nodescale/python/nodescale/names.py", "app.py", "cdk.json", "sim/aws/iam_policies.py",
            "docs/deploy.md", "tests/fixtures/examples/karpenter-v1")
_DEPLOY_COMMAND = re.compile(r"^npx cdk deploy((?: -c [A-Za-z]+=\S+)+)\s*$", re.MULTILINE)


def docs_deploy_context() -> dict[str, str]:
    """The `-c key=value` pairs of docs/deploy.md's one command (the first `npx cdk deploy` line)."""
    found = _DEPLOY_COMMAND.search(DEPLOY_DOC.read_text(encoding="utf-8"))
    if found is None:
        raise RuntimeError(f"{DEPLOY_DOC} has no `npx cdk deploy -c key=value ...` line to deploy sim's stack as")
    pairs = [item.partition("=") for item in found.group(1).split(" -c ") if item.strip()]
    return {key.strip(): value for key, _, value in pairs}


def deploy_context(cluster: str) -> dict[str, str]:
    """The context sim's stack is synthesized with: docs/deploy.md's command for ``cluster``, plus the Windows
    node role (sim seeds it under the stack's name, for the Windows tests). The docs' NodePool file names the
    docs' cluster's Karpenter role; another cluster's stack is told its own with -c nodeRoles, as a user whose
    NodePools are in the cluster would."""
    context = {**docs_deploy_context(), "windows": "true"}
    if context.get("clusterName") != cluster:
        context = {"clusterName": cluster, "windows": "true", "nodeRoles": f"KarpenterNodeRole-{cluster}"}
    return context


def _cache_key(cluster: str, region: str) -> str:
    digest = hashlib.sha256(f"{cluster}\0{region}\0{sys.version_info[:2]}".encode())
    for entry in _SHAPING:
        path = ROOT / entry
        files = sorted(p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts) \
            if path.is_dir() else [path]
        for file in files:
            digest.update(str(file.relative_to(ROOT)).encode())
            digest.update(file.read_bytes())
    return digest.hexdigest()[:24]


def policies_for(cluster: str, region: str) -> dict[str, list[dict[str, Any]]]:
    """{function: [statement, ...]} for each of the stack's functions, from the cache or a fresh synth."""
    return _synthesized(cluster, region)["functions"]


def stack_resources_for(cluster: str, region: str) -> dict[str, Any]:
    """What sim seeds as the stack creates it: {"queuePolicies": {queue name: [statement, ...]}, "rules": [{"name",
    "arn", "eventPattern", "queues": [queue name, ...]}]} (the interruption rules and their SQS targets)."""
    return _synthesized(cluster, region)["stack"]


def cache_dir() -> Path:
    """Where synthesized policies are kept; read at each call, so a sim child started with the variable agrees."""
    return Path(os.environ.get(CACHE_VARIABLE) or ROOT / ".cache" / "sim-iam")


def policies_cached(cluster: str, region: str) -> bool:
    """Whether `policies_for` answers from the cache; False: it synthesizes the stack first."""
    return _read(_cache_path(cluster, region)) is not None


def _cache_path(cluster: str, region: str) -> Path:
    return cache_dir() / f"{cluster}-{region}-{_cache_key(cluster, region)}.json"


def _synthesized(cluster: str, region: str) -> dict[str, Any]:
    cache = _cache_path(cluster, region)
    cached = _read(cache)
    if cached is not None:
        return cached
    cache.parent.mkdir(parents=True, exist_ok=True)
    # One synthesis at a time on this machine (pytest workers start sims together); the others wait and read.
    with open(cache.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        cached = _read(cache)
        if cached is not None:
            return cached
        return _synthesize_into(cache, cluster, region)


def _read(cache: Path) -> dict[str, Any] | None:
    try:
        return json.loads(cache.read_text())
    except (FileNotFoundError, ValueError):
        return None


def _synthesize_into(cache: Path, cluster: str, region: str) -> dict[str, Any]:
    env = dict(os.environ, JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION="1",
               JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION="1", JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION="1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), str(ROOT / "layers/nodescale/python"),
                                                      env.get("PYTHONPATH", "")]))
    done = subprocess.run(
        [sys.executable, "-m", "sim.aws.iam_policies", "--cluster", cluster, "--region", region],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"synthesizing the stack for sim's IAM policies failed:\n{done.stderr[-3000:]}")
    policies = json.loads(done.stdout)
    fd, tmp = tempfile.mkstemp(dir=cache.parent, suffix=".tmp")
    with os.fdopen(fd, "w") as out:
        json.dump(policies, out)
    os.replace(tmp, cache)
    return policies


# --- synthesis (in the subprocess) ---------------------------------------------------------------------------
def synthesize(cluster: str, region: str) -> dict[str, Any]:
    from aws_cdk import App, Environment

    from infra.config import StackConfig
    from infra.stack import NodescaleStack

    with tempfile.TemporaryDirectory(prefix="sim-iam-synth-") as outdir:
        app = App(outdir=outdir, context=deploy_context(cluster))
        config = StackConfig.from_context(app.node.try_get_context, base_dir=ROOT)
        stack = NodescaleStack(app, config.stack_name, config=config, env=Environment(account=ACCOUNT, region=region))
        assembly = app.synth()
        return assembly.get_stack_by_name(stack.stack_name).template


def extract(template: dict[str, Any], cluster: str, region: str) -> dict[str, list[dict[str, Any]]]:
    """Each function's role's statements, intrinsics resolved."""
    from nodescale.names import physical_name

    resources = template.get("Resources") or {}
    resolver = _Resolver(resources, region)
    by_name = {physical_name(cluster, fn): fn for fn in FUNCTIONS}
    out: dict[str, list[dict[str, Any]]] = {}
    for props in (r.get("Properties") or {} for r in resources.values() if r.get("Type") == "AWS::Lambda::Function"):
        function = by_name.get(resolver.resolve(props.get("FunctionName")))
        role = props.get("Role")
        if function is None or not isinstance(role, dict) or "Fn::GetAtt" not in role:
            continue
        role_id = role["Fn::GetAtt"][0]
        statements: list[dict[str, Any]] = []
        for inline in (resources[role_id].get("Properties") or {}).get("Policies") or []:
            statements += inline["PolicyDocument"]["Statement"]
        for resource in resources.values():
            if resource.get("Type") != "AWS::IAM::Policy":
                continue
            policy = resource.get("Properties") or {}
            if any(isinstance(r, dict) and r.get("Ref") == role_id for r in policy.get("Roles") or []):
                statements += policy["PolicyDocument"]["Statement"]
        out[function] = resolver.resolve(statements)
    missing = sorted(set(FUNCTIONS) - set(out))
    if missing:
        raise RuntimeError(f"the synthesized stack has no function (or role) for {', '.join(missing)}")
    return out


def extract_stack_resources(template: dict[str, Any], region: str) -> dict[str, Any]:
    """The queues' resource policies and the event rules with SQS targets, intrinsics resolved."""
    resources = template.get("Resources") or {}
    resolver = _Resolver(resources, region)
    policies: dict[str, list[dict[str, Any]]] = {}
    for props in (r.get("Properties") or {} for r in resources.values() if r.get("Type") == "AWS::SQS::QueuePolicy"):
        for url in resolver.resolve(props.get("Queues") or []):
            policies.setdefault(str(url).rsplit("/", 1)[-1], []).extend(
                resolver.resolve(props["PolicyDocument"]["Statement"]))
    rules = []
    for logical, resource in resources.items():
        props = resource.get("Properties") or {}
        if resource.get("Type") != "AWS::Events::Rule" or "EventPattern" not in props:
            continue
        targets = [str(resolver.resolve(t["Arn"])) for t in props.get("Targets") or []]
        rules.append({"name": resolver.resolve(props["Name"]), "arn": resolver._get_att(logical, "Arn"),
                      "eventPattern": resolver.resolve(props["EventPattern"]),
                      "queues": [t.split(":")[5] for t in targets if t.split(":")[2] == "sqs"]})
    return {"queuePolicies": policies, "rules": rules}


class _Resolver:
    """CloudFormation intrinsics to the values they take in sim's account, from the resources' properties."""

    _ARNS = {
        "AWS::IAM::Role": ("RoleName", "arn:{partition}:iam::{account}:role{path}{name}"),
        "AWS::IAM::InstanceProfile": ("InstanceProfileName", "arn:{partition}:iam::{account}:instance-profile{path}{name}"),
        "AWS::DynamoDB::Table": ("TableName", "arn:{partition}:dynamodb:{region}:{account}:table/{name}"),
        "AWS::Logs::LogGroup": ("LogGroupName", "arn:{partition}:logs:{region}:{account}:log-group:{name}:*"),
        "AWS::SQS::Queue": ("QueueName", "arn:{partition}:sqs:{region}:{account}:{name}"),
        "AWS::SNS::Topic": ("TopicName", "arn:{partition}:sns:{region}:{account}:{name}"),
        "AWS::Lambda::Function": ("FunctionName", "arn:{partition}:lambda:{region}:{account}:function:{name}"),
        "AWS::Events::Rule": ("Name", "arn:{partition}:events:{region}:{account}:rule/{name}"),
    }

    def __init__(self, resources: dict[str, Any], region: str) -> None:
        self.resources = resources
        self.region = region
        self.pseudo = {
            "AWS::Region": region,
            "AWS::AccountId": ACCOUNT,
            "AWS::Partition": partition_of(region),
            "AWS::URLSuffix": "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com",
            "AWS::StackName": "sim",
            "AWS::NoValue": None,
        }

    def resolve(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self.resolve(v) for v in value]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            (key, arg), = value.items()
            if key == "Ref":
                return self._ref(arg)
            if key == "Fn::GetAtt":
                return self._get_att(*(arg.split(".", 1) if isinstance(arg, str) else arg))
            if key == "Fn::Join":
                separator, parts = arg
                return separator.join(str(self.resolve(p)) for p in self.resolve(parts))
            if key == "Fn::Select":
                index, items = arg
                return self.resolve(items)[int(self.resolve(index))]
            if key == "Fn::Split":
                separator, text = arg
                return str(self.resolve(text)).split(separator)
            if key == "Fn::Sub":
                text, variables = (arg, {}) if isinstance(arg, str) else arg
                names = {k: str(self.resolve(v)) for k, v in variables.items()}
                return re.sub(r"\$\{([^}]+)\}", lambda m: names.get(m.group(1)) or str(
                    self._get_att(*m.group(1).split(".", 1)) if "." in m.group(1) else self._ref(m.group(1))), text)
        return {k: self.resolve(v) for k, v in value.items()}

    def _ref(self, name: str) -> Any:
        if name in self.pseudo:
            return self.pseudo[name]
        resource = self.resources.get(name)
        if resource is None:
            raise RuntimeError(f"Ref to {name}: no such resource or parameter in the synthesized template")
        kind = resource.get("Type")
        props = resource.get("Properties") or {}
        if kind in self._ARNS and kind not in ("AWS::SQS::Queue", "AWS::SNS::Topic"):
            return self.resolve(props.get(self._ARNS[kind][0]))
        if kind == "AWS::SQS::Queue":
            return f"https://sqs.{self.region}.{self.pseudo['AWS::URLSuffix']}/{ACCOUNT}/{self.resolve(props.get('QueueName'))}"
        return self._arn(kind, props) if kind in self._ARNS else f"{name}-sim-id"

    def _get_att(self, name: str, attribute: str) -> Any:
        resource = self.resources.get(name)
        if resource is None:
            raise RuntimeError(f"Fn::GetAtt {name}.{attribute}: no such resource in the synthesized template")
        kind = resource.get("Type")
        props = resource.get("Properties") or {}
        if attribute == "Arn" and kind in self._ARNS:
            return self._arn(kind, props)
        if kind == "AWS::SQS::Queue" and attribute == "QueueName":
            return self.resolve(props.get("QueueName"))
        return f"{name}-{attribute}-sim"

    def _arn(self, kind: str, props: dict[str, Any]) -> str:
        field, pattern = self._ARNS[kind]
        name = self.resolve(props.get(field))
        path = self.resolve(props.get("Path")) or "/"
        return pattern.format(partition=self.pseudo["AWS::Partition"], account=ACCOUNT, region=self.region, path=path,
                              name=name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sim.aws.iam_policies", description=__doc__.split("\n\n")[0])
    parser.add_argument("--cluster", required=True)
    parser.add_argument("--region", required=True)
    args = parser.parse_args(argv)
    template = synthesize(args.cluster, args.region)
    synthesized = {"functions": extract(template, args.cluster, args.region),
                   "stack": extract_stack_resources(template, args.region)}
    json.dump(synthesized, sys.stdout, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
