"""Plumbing shared by the integration tests that run the product against `sim/` or a bare local API server.

A test module that wants an environment of its own (not the session one of `simfixtures`) declares:

    env = helpers.environment_fixture("provisioner")      # module scope, started once
    sim = helpers.emptied_environment_fixture()           # the same, left empty after each test
    rt = helpers.runtime_fixture()
    ns = helpers.namespace_fixture()

and reaches nodes, instances, pods and pools through the functions below, all over HTTP.

Two identities, as on a real cluster: what a test seeds, reads to assert, or cleans up goes through the
administrator (`Environment.kube_api_client()`, `.boto3_client()`); what the product does runs as the
functions (`runtime_for`, `use_settings`, DIR/env), held to `infra/manifests/rbac.yaml`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any, NamedTuple

import pytest
from kubernetes.client.exceptions import ApiException

from nodescale.aws import clients
from nodescale.aws.clients import AwsClients
from nodescale.clock import CLOCK_URL
from nodescale.k8s.client import client_from_kubeconfig
from nodescale.k8s.raw import MERGE_PATCH, request_json
from nodescale.k8s.watch import watch_joining_nodes
from nodescale.model.labels import TERMINATION_FINALIZER
from nodescale.runtime import Runtime
from nodescale.settings import Settings
from nodescale.usecases.provision.registration import register_joined
from sim.aws.constants import DEMO_NODECLASS_YAML, KUBE_ADMIN_TOKEN, KUBE_FUNCTIONS_TOKEN
from sim.environment import RBAC_MANIFEST, Environment
from sim.kube.rbac import apply_manifest
from sim.kube.server import KubeServer
from sim.kube.store import Store

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "tests" / "fixtures" / "examples"
CLUSTER_TAG = "nodescale.io/cluster"
POOL_LABEL = "karpenter.sh/nodepool"
PROVISIONER_LABEL = "karpenter.sh/provisioner-name"  # what a v1alpha5 Provisioner's nodes carry instead
LIVE_STATES = ("pending", "running")
POOL_PATH_SETTING = "NODESCALE_NODEPOOL_PARAMETER_PATH"
# Test namespaces start with this, so the clean-up knows which ones a test made.
TEST_NAMESPACE_PREFIX = "t-"
# How long each of the registrar's watches runs before it is opened again (a list of the nodes, then a watch).
REGISTRAR_WATCH_SECONDS = 600.0

log = logging.getLogger(__name__)


# ------------------------------------------------------------------------------------------ fixtures


# The EC2NodeClass "default" of sim's demo cluster (its role, AMI alias, subnets and security groups), the
# second document of the NodePool YAML most sim tests write.
DEMO_NODECLASS = "---\n" + DEMO_NODECLASS_YAML

def environment_fixture(
    name: str, *, sim_clock: bool = True, prepare: Callable[[Environment], None] | None = None,
    fixture_name: str = "env", speed: float = 1.0, registrar: bool = True,
    detach_delay: float = 2.0,
) -> Any:
    """A module-scoped fixture (called `fixture_name`): a running `Environment` of the module's own.

    With `sim_clock` the product decides by the environment's (simulated) clock, as the Lambdas do
    against sim/; `prepare` runs once after the start (e.g. to put the module's NodePools in place);
    `speed` is how much faster than real time that clock runs. With `registrar` (the default) Nodes are
    registered as they join, as the deployed provisioner's watch does (`Registrar`); a test of what happens
    before registration turns it off.
    """

    @pytest.fixture(scope="module", name=fixture_name)
    def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Environment]:
        environment = Environment(tmp_path_factory.mktemp(f"{name}-sim"), ready_delay=1.0, speed=speed,
                                  detach_delay=detach_delay)
        environment.start()
        patch = pytest.MonkeyPatch()
        try:
            if sim_clock:
                patch.setenv(CLOCK_URL, environment.env[CLOCK_URL])
            if prepare is not None:
                prepare(environment)
            with Registrar(environment) if registrar else contextlib.nullcontext():
                yield environment
        finally:
            patch.undo()
            environment.stop()

    return env


class Registrar:
    """What the deployed provisioner's watch does for Nodes joining, between the passes a test runs (#30.4).

    On EKS the provisioner function's watch runs all the time and registers each Node as it joins (its
    labels, taints and ``karpenter.sh/unregistered`` removed); a test that runs one ``provision_once`` and
    waits for its pods needs that too. This runs exactly the product's path (``watch_joining_nodes`` feeding
    ``register_joined``), as the functions, reading NodePools from both sources a test may put them in."""

    def __init__(self, env: Environment) -> None:
        self.rt = runtime_for(env, nodepool_sources=("ssm", "cluster"))
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="test-registrar", daemon=True)

    def start(self) -> Registrar:
        self.thread.start()
        return self

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=10)

    def __enter__(self) -> Registrar:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                for joined in watch_joining_nodes(self.rt.api, time.monotonic() + REGISTRAR_WATCH_SECONDS,
                                                  stop=self.stop):
                    register_joined(self.rt.begin_invocation(), joined.names)
            except Exception as exc:  # noqa: BLE001 - the environment going away under it, as a Lambda's would
                log.warning("test registrar: watch failed", extra={"error": repr(exc)})
                self.stop.wait(0.5)


def emptied_environment_fixture(*, keep_pools: bool = False, node_timeout: float = 30.0) -> Any:
    """A fixture over the module's `env`: the same environment, left empty after each test (see `empty`)."""

    @pytest.fixture
    def sim(env: Environment) -> Iterator[Environment]:
        yield env
        empty(env, keep_pools=keep_pools, node_timeout=node_timeout)

    return sim


def runtime_fixture() -> Any:
    """A fixture: a Runtime over the test's `sim`."""

    @pytest.fixture
    def rt(sim: Environment) -> Runtime:
        return runtime_for(sim)

    return rt


def namespace_fixture() -> Any:
    """A fixture: a fresh namespace in the test's `sim` (emptied by `empty` afterwards)."""

    @pytest.fixture
    def ns(sim: Environment) -> str:
        return new_namespace(sim.kube_api_client())

    return ns


# ------------------------------------------------------------------------------------- environment


def empty(env: Environment, *, keep_pools: bool = False, node_timeout: float = 30.0) -> None:
    """Leave the environment as a test found it: no faults, test workloads, instances of the cluster,
    offering marks or nodes, and (unless `keep_pools`) no NodePools in SSM or as custom objects."""
    env.reset_faults()
    api = env.kube_api_client()
    for ns in request_json(api, "GET", "/api/v1/namespaces").get("items") or []:
        name = ns["metadata"]["name"]
        if not name.startswith(TEST_NAMESPACE_PREFIX):
            continue
        for kind in ("apis/apps/v1/namespaces/{}/deployments", "apis/apps/v1/namespaces/{}/statefulsets",
                     "apis/policy/v1/namespaces/{}/poddisruptionbudgets"):
            base = "/" + kind.format(name)
            for item in request_json(api, "GET", base).get("items") or []:
                delete_quietly(api, f"{base}/{item['metadata']['name']}")
        for pod in request_json(api, "GET", f"/api/v1/namespaces/{name}/pods").get("items") or []:
            delete_quietly(api, f"/api/v1/namespaces/{name}/pods/{pod['metadata']['name']}",
                           body={"gracePeriodSeconds": 0})
    ours = instance_ids(env)
    polls = env.kubelet()["polls"]
    if ours:
        env.boto3_client("ec2").terminate_instances(InstanceIds=ours)
    if not keep_pools:
        _delete_pools(env, api)
    table = env.seed["table_name"]
    dynamodb = env.boto3_client("dynamodb")
    for item in dynamodb.scan(TableName=table).get("Items") or []:
        dynamodb.delete_item(TableName=table, Key={"pk": item["pk"]})
    # A Node the kubelet was registering as the instances ended shows up after them: two of its passes
    # later, every Node of an ended instance has been made and deleted (else the next test counts it in flight).
    wait_for("two kubelet passes", lambda: env.kubelet()["polls"] >= polls + 2, timeout=node_timeout)
    wait_for("the test's nodes to go", lambda: not _released(api, managed_nodes(env)), timeout=node_timeout)
    # NodeClaims of the instances just terminated: one whose Node never registered would stand in flight for the
    # next test (no pass of the product runs here to delete it after its registration TTL).
    wait_for("the test's NodeClaims to go", lambda: not _nodeclaims_removed(api), timeout=node_timeout)
    # A pass of the test may still have been launching while the instances were listed above; the next test
    # would count such an instance as capacity in flight (this once took a pod from a test under CI's load).
    wait_for("the test's instances to go", lambda: not _terminated(env), timeout=node_timeout)
    _delete_nodeclaims(api)


def _delete_nodeclaims(api: Any) -> None:
    """The test's NodeClaims, finalizers let go (their instances are gone): one left unregistered would count as
    capacity in flight for the next test, as a NodeClaim does for nodescale."""
    base = "/apis/karpenter.sh/v1/nodeclaims"
    try:
        items = request_json(api, "GET", base).get("items") or []
    except ApiException:
        return  # the CRD is not installed in this environment
    for item in items:
        name = item["metadata"]["name"]
        with contextlib.suppress(ApiException):
            request_json(api, "PATCH", f"{base}/{name}", body={"metadata": {"finalizers": None}},
                         content_type=MERGE_PATCH)
        delete_quietly(api, f"{base}/{name}")


def _terminated(env: Environment) -> list[str]:
    """The cluster's live instances, after asking EC2 to terminate them."""
    live = instance_ids(env)
    if live:
        env.boto3_client("ec2").terminate_instances(InstanceIds=live)
    return instance_ids(env)


def _nodeclaims_removed(api: Any) -> list[dict]:
    """The NodeClaims left, after deleting them and letting go of nodescale's termination finalizer on each."""
    try:
        claims = request_json(api, "GET", "/apis/karpenter.sh/v1/nodeclaims").get("items") or []
    except ApiException:
        return []  # no NodeClaim CRD installed
    for claim in claims:
        path = f"/apis/karpenter.sh/v1/nodeclaims/{claim['metadata']['name']}"
        if not claim["metadata"].get("deletionTimestamp"):
            delete_quietly(api, path)
    return _released(api, claims, "/apis/karpenter.sh/v1/nodeclaims")


def _released(api: Any, nodes: list[dict], collection: str = "/api/v1/nodes") -> list[dict]:
    """``nodes``, after letting go of those deleted but held by nodescale's termination finalizer (a test's
    instances are terminated behind nodescale's back: no pass of it runs to finish their termination)."""
    for node in nodes:
        meta = node["metadata"]
        if meta.get("deletionTimestamp") and TERMINATION_FINALIZER in (meta.get("finalizers") or []):
            left = [f for f in meta["finalizers"] if f != TERMINATION_FINALIZER]
            with contextlib.suppress(ApiException):
                request_json(api, "PATCH", f"{collection}/{meta['name']}", body=[
                    {"op": "test", "path": "/metadata/finalizers", "value": meta["finalizers"]},
                    {"op": "replace", "path": "/metadata/finalizers", "value": left}],
                    content_type="application/json-patch+json")
    return nodes


def _delete_pools(env: Environment, api: Any) -> None:
    ssm = env.boto3_client("ssm")
    path = pool_path(env)
    names = [p["Name"] for p in ssm.get_parameters_by_path(Path=path, Recursive=True).get("Parameters") or []]
    if names:
        ssm.delete_parameters(Names=names)
    for group, version, plural in (("karpenter.sh", "v1", "nodepools"), ("karpenter.k8s.aws", "v1", "ec2nodeclasses")):
        try:
            items = request_json(api, "GET", f"/apis/{group}/{version}/{plural}").get("items") or []
        except ApiException:
            items = []
        for item in items:
            delete_quietly(api, f"/apis/{group}/{version}/{plural}/{item['metadata']['name']}")


def runtime_for(sim: Environment, **changes: Any) -> Runtime:
    """A Runtime as the functions (DIR/env's credentials and kubeconfig), with `changes` applied to its settings."""
    settings = dataclasses.replace(Settings.from_env(sim.env), **changes)
    aws = AwsClients(**{s: sim.functions_boto3_client(s) for s in ("ec2", "ssm", "eks", "dynamodb", "iam")})
    return Runtime(settings, aws, sim.functions_kube_api_client())


def pool_path(sim: Environment) -> str:
    return sim.env[POOL_PATH_SETTING].rstrip("/")


def install_karpenter_crds(sim: Environment) -> None:
    """Karpenter's CRDs in the environment's cluster, as an administrator installs them (already there: fine)."""
    from sim.kube.crds import karpenter_crds

    api = sim.kube_api_client()
    for crd in karpenter_crds():
        try:
            request_json(api, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", body=crd)
        except ApiException as exc:
            if exc.status != 409:
                raise


def put_pool(sim: Environment, text: str, name: str = "pool") -> None:
    """NodePool (and EC2NodeClass) YAML as the SSM parameter `name` under the pool path."""
    sim.boto3_client("ssm").put_parameter(Name=f"{pool_path(sim)}/{name}", Value=text, Type="String",
                                          Overwrite=True)


def use_settings(sim: Environment, monkeypatch: pytest.MonkeyPatch) -> None:
    """The environment's settings in `os.environ`, as a shell or a Lambda would have them."""
    for key, value in sim.env.items():
        monkeypatch.setenv(key, value)


class fresh_clients:  # noqa: N801 - used as a context manager, like contextlib's
    """Process-wide clients dropped on entry and exit: cached ones may point at another module's environment."""

    def __enter__(self) -> None:
        clients.reset()

    def __exit__(self, *exc: object) -> None:
        clients.reset()


def load_handler(function: str) -> ModuleType:
    """`lambdas/<function>/handler.py`, loaded as the Lambda runtime would load it."""
    spec = importlib.util.spec_from_file_location(f"{function}_handler", ROOT / "lambdas" / function / "handler.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---------------------------------------------------------------------------------- waiting, lookups


def wait_for(what: str, check: Callable[[], Any], timeout: float = 30.0) -> Any:
    """Poll `check` until it returns something truthy, and return that; fail naming `what` after `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def delete_quietly(api: Any, path: str, body: dict | None = None) -> None:
    """DELETE `path`; one that is already gone is fine."""
    try:
        request_json(api, "DELETE", path, body=body)
    except ApiException as exc:
        if exc.status != 404:
            raise


def new_namespace(api: Any, prefix: str = TEST_NAMESPACE_PREFIX) -> str:
    name = f"{prefix}{uuid.uuid4().hex[:8]}"
    request_json(api, "POST", "/api/v1/namespaces", body={"metadata": {"name": name}})
    return name


def pods(sim: Environment, ns: str) -> list[dict]:
    return request_json(sim.kube_api_client(), "GET", f"/api/v1/namespaces/{ns}/pods").get("items") or []


def managed_nodes(sim: Environment) -> list[dict]:
    """The nodes of a NodePool (nodescale's and the sim's own alike carry the pool label)."""
    nodes = request_json(sim.kube_api_client(), "GET", "/api/v1/nodes").get("items") or []
    return [n for n in nodes if {POOL_LABEL, PROVISIONER_LABEL} & set(n["metadata"].get("labels") or {})]


def node_named(sim: Environment, name: str) -> dict | None:
    """The Node ``name`` as the API serves it now, or None once it is gone."""
    try:
        return request_json(sim.kube_api_client(), "GET", f"/api/v1/nodes/{name}")
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def node_of(sim: Environment, instance_id: str) -> dict:
    """The node of the instance, once it has registered."""

    def find() -> dict | None:
        for n in request_json(sim.kube_api_client(), "GET", "/api/v1/nodes").get("items") or []:
            if (n.get("spec") or {}).get("providerID", "").endswith("/" + instance_id):
                return n
        return None

    return wait_for(f"the node of {instance_id}", find)


def instance_ids(sim: Environment, states: tuple[str, ...] = LIVE_STATES) -> list[str]:
    """The cluster's instances (by the ownership tag) in the given states."""
    out = sim.boto3_client("ec2").describe_instances(Filters=[
        {"Name": f"tag:{CLUSTER_TAG}", "Values": [sim.cluster]},
        {"Name": "instance-state-name", "Values": list(states)},
    ])
    return [i["InstanceId"] for r in out["Reservations"] for i in r["Instances"]]


def instance_state(sim: Environment, instance_id: str) -> str:
    out = sim.boto3_client("ec2").describe_instances(InstanceIds=[instance_id])
    return out["Reservations"][0]["Instances"][0]["State"]["Name"]


# ------------------------------------------------------------------------- a bare local API server


class KubeApi(NamedTuple):
    store: Store
    server: KubeServer
    api: Any  # the functions' client: what the product code under test uses
    admin: Any  # the administrator's: what the test seeds and checks with


def _client(server: KubeServer, directory: Path, user: str, token: str) -> Any:
    path = directory / f"config-{server.port}-{user}"
    path.write_text(json.dumps({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "sim", "cluster": {"server": server.url}}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": "sim", "context": {"cluster": "sim", "user": user}}],
        "current-context": "sim",
    }))
    return client_from_kubeconfig(str(path))


def serve(store: Store, directory: Path) -> tuple[KubeServer, Any, Any]:
    """An API server over `store` holding the functions' RBAC (`infra/manifests/rbac.yaml`), and two clients
    made from kubeconfig files as the product makes its own: the functions' and the administrator's."""
    apply_manifest(store, RBAC_MANIFEST)
    server = KubeServer(store).start()
    functions = _client(server, directory, "nodescale", KUBE_FUNCTIONS_TOKEN)
    return server, functions, _client(server, directory, "admin", KUBE_ADMIN_TOKEN)


def kube_api_fixture(name: str = "kube") -> Any:
    """A module-scoped fixture called `name`: a `KubeApi` (store, server, functions' and admin's clients)
    over a fresh store."""

    @pytest.fixture(scope="module", name=name)
    def kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeApi]:
        store = Store()
        server, api, admin = serve(store, tmp_path_factory.mktemp("kube"))
        try:
            yield KubeApi(store, server, api, admin)
        finally:
            api.close()
            admin.close()
            server.stop()

    return kube


def create_pod(api: Any, body: dict) -> dict:
    """Create the pod, then write its status the way the scheduler and kubelet would."""
    ns, name = body["metadata"]["namespace"], body["metadata"]["name"]
    created = request_json(api, "POST", f"/api/v1/namespaces/{ns}/pods",
                           body={k: v for k, v in body.items() if k != "status"})
    if not body.get("status"):
        return created
    return request_json(api, "PATCH", f"/api/v1/namespaces/{ns}/pods/{name}/status",
                        body={"status": body["status"]}, content_type=MERGE_PATCH)


def nodeclaims_served(sim: Environment) -> bool:
    """Whether the environment's API server serves karpenter.sh/v1 NodeClaims (its CRD installed)."""
    try:
        request_json(sim.kube_api_client(), "GET", "/apis/karpenter.sh/v1/nodeclaims")
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True
