"""One local environment: moto + fault proxy + Kubernetes API + controllers + kubelet, in one process.

`up(dir)` starts `python -m sim serve --dir DIR` as a background process in its own session and
returns once everything answers; `down(dir)` stops it and everything it started. The serving
process writes, in DIR:

- `env`: `export K='V'` lines a shell or a test can load (KUBECONFIG, AWS_ENDPOINT_URL, region,
  credentials, CLUSTER_NAME, NODESCALE_* settings, NODESCALE_SIM_CONTROL ...): the functions'
  identity, what the handlers, the `nodescale` CLI and the demo run as. Its kubeconfig holds the
  functions' token (RBAC: what `infra/manifests/rbac.yaml` grants the group `nodescale-functions`),
  its AWS credentials the operator's (held to the stack's IAM policy);
- `admin.env`: the same lines for the administrator: `admin-kubeconfig` (system:masters) and
  unrestricted AWS credentials, for seeding, tests, fixtures and kubectl;
- `kubeconfig`, `admin-kubeconfig`: real kubeconfigs for the local API server, one per identity, and
  `rbac-kubeconfig`: the stack's RBAC function (`-c applyRbac=true`), held to its EKS access policy;
- `seed.json`: ids of the seeded AWS resources; `state.json`: pids, ports and URLs (present while
  serving); `sim.pid`; `sim.log`, `moto.log`.

`Environment` wraps up/down as a context manager for tests.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from nodescale import settings as names
from nodescale.clock import CLOCK_URL
from sim.aws.amis import DEFAULT_KUBERNETES_VERSION, Image, public_parameters
from sim.aws.constants import (
    ADMIN_CREDENTIALS,
    DEFAULT_REGION,
    KUBE_ADMIN_TOKEN,
    KUBE_FUNCTIONS_TOKEN,
    KUBE_FUNCTIONS_USER,
    KUBE_RBAC_APPLIER_TOKEN,
    KUBE_RBAC_APPLIER_USER,
    OPERATOR_CREDENTIALS,
    REGION,
    REGION_VARIABLE,
)
from sim.aws.moto_server import PROJECT_ROOT, MotoServer
from sim.prepare import Say, prepare

log = logging.getLogger("sim.environment")

SIM_CONTROL = "NODESCALE_SIM_CONTROL"  # kube control API: clock, kube faults
SIM_AWS_CONTROL = "NODESCALE_SIM_AWS_CONTROL"  # AWS proxy control API: aws-faults, aws-calls, seed, kubelet
AWS_ENDPOINT_URL = "AWS_ENDPOINT_URL"
CLOCK_FILE = "clock.json"  # the simulated clock's state, which NODESCALE_CLOCK_URL names (nodescale/clock.py)
START_TIMEOUT = 90.0
ADMIN_ENV = "admin.env"
ADMIN_KUBECONFIG = "admin-kubeconfig"
# The stack's RBAC function (`-c applyRbac=true`), authorized by its EKS access policy (sim.kube.rbac).
RBAC_APPLIER_KUBECONFIG = "rbac-kubeconfig"
# The functions' RBAC, applied as the stack's deploy guide applies it (never a copy: the same file).
RBAC_MANIFEST = PROJECT_ROOT / "infra" / "manifests" / "rbac.yaml"


class SimEnvironmentError(RuntimeError):
    """The environment could not be started, found or stopped; the message says what to do."""


# --- the serving process -------------------------------------------------------------------------------------------
def serve(
    directory: Path,
    cluster: str = "demo-cluster",
    ready_delay: float = 2.0,
    speed: float = 1.0,
    kubernetes_version: str = DEFAULT_KUBERNETES_VERSION,
    parent_pid: int | None = None,
    region: str = REGION,
    detach_delay: float = 2.0,
) -> None:
    """Run one environment in this process until SIGTERM/SIGINT (or until `parent_pid` exits),
    then stop every part of it. Every part reads its region from the environment variable
    NODESCALE_SIM_REGION (`up` sets it): asked for another region, this process starts again with it set."""
    _in_region(region)
    from sim.aws.faults import FaultProxy
    from sim.aws.seed import seed
    from sim.clock import Clock
    from sim.kube.controllers import Controllers
    from sim.kube.rbac import apply_manifest
    from sim.kube.server import KubeServer
    from sim.kube.store import Store
    from sim.kube.tls import self_signed
    from sim.nodes.kubelet import Kubelet

    directory.mkdir(parents=True, exist_ok=True)
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    signal.signal(signal.SIGINT, lambda *_: stopping.set())
    (directory / "sim.pid").write_text(str(os.getpid()))

    parts: list[Any] = []
    try:
        moto = MotoServer(log_path=directory / "moto.log").start()
        parts.append(moto)
        clock = Clock(speed=speed)
        clock.publish(directory / CLOCK_FILE)
        store = Store(clock)
        apply_manifest(store, RBAC_MANIFEST)
        certificate = self_signed()
        kube = KubeServer(store, tls=certificate).start()
        kube_https = str(kube.secure_url)
        parts.append(kube)
        from sim.aws.iam_policies import stack_resources_for

        # The stack's queue policies and interruption rules, as a deploy leaves them (cached: `up` made sure of it).
        account = seed(moto.url, cluster=cluster, kubernetes_version=kubernetes_version, region=REGION,
                       kube_url=kube.url, stack=stack_resources_for(cluster, REGION))
        (directory / "seed.json").write_text(account.to_json())

        controllers = Controllers(store, clock, detach_delay=detach_delay)
        controllers.start()
        parts.append(controllers)
        kubelet = Kubelet(
            store, clock, moto.url, cluster, ready_delay=ready_delay, kubernetes_version=kubernetes_version,
            region=REGION,
        ).start()
        parts.append(kubelet)
        from sim.kube.drainaudit import DrainAudit
        from sim.nodes import spot

        # EC2's spot interruptions: warned now, terminated when the notice runs out; the drains recorded.
        audit = DrainAudit(store)
        kube.record_drains(audit)
        reclaimer = spot.SpotReclaimer(store, clock, audit, moto.url, REGION).start()
        kube.add_control(spot.PATH, reclaimer.control)
        parts.append(reclaimer)
        from sim.aws.iam_enforcement import Enforcer
        from sim.aws.iam_policies import policies_for
        from sim.aws.lambda_service import LambdaService

        # The functions' policies as the stack synthesizes them (cached: `up` made sure of it).
        enforcer = Enforcer(policies_for(cluster, REGION), moto.url, cluster)
        lambdas = LambdaService(cluster)
        proxy = FaultProxy(
            moto.url,
            clock=clock,
            enforcer=enforcer,
            lambdas=lambdas,
            routes={
                "GET /sim/v1/seed": lambda: json.loads(account.to_json()),
                "GET /sim/v1/kubelet": kubelet.status,
                **lambdas.routes(),
            },
        ).start()
        parts.append(proxy)

        env = settings_for(directory, cluster, proxy.url, kube.url, account.table_name,
                           account.nodepool_parameter_path, account.node_role_name, account.instance_profile_name,
                           account.windows_node_role_name, account.windows_instance_profile_name)
        admin_env = {
            **env,
            names.KUBECONFIG: str(directory / ADMIN_KUBECONFIG),
            "AWS_ACCESS_KEY_ID": ADMIN_CREDENTIALS["aws_access_key_id"],
            "AWS_SECRET_ACCESS_KEY": ADMIN_CREDENTIALS["aws_secret_access_key"],
        }
        _write_kubeconfigs(directory, kube_https, cluster, certificate.cert_pem)
        _write_atomic(directory / ADMIN_ENV, _env_text(admin_env))
        _write_atomic(directory / "env", _env_text(env))
        state = {
            "pid": os.getpid(),
            "moto_pid": moto.pid,
            "moto_url": moto.url,
            "aws_endpoint": proxy.url,
            "kube_url": kube.url,
            "kube_https_url": kube_https,
            "cluster": cluster,
            "ready_delay": ready_delay,
            "speed": speed,
            "kubernetes_version": kubernetes_version,
            "region": REGION,
            "dir": str(directory),
        }
        _write_atomic(directory / "state.json", json.dumps(state, indent=2))
        log.info("environment %s ready: kube %s, aws %s", directory, kube.url, proxy.url)
        while not stopping.wait(0.5):
            if parent_pid is not None and not pid_alive(parent_pid):
                log.info("parent process %s is gone: stopping", parent_pid)
                break
    finally:
        for part in reversed(parts):
            try:
                part.stop()
            except Exception:  # stop the rest whatever one part does
                log.exception("stopping %s failed", type(part).__name__)
        for name in ("state.json", "sim.pid"):
            with contextlib.suppress(FileNotFoundError):
                (directory / name).unlink()
        log.info("environment %s stopped", directory)


def _in_region(region: str) -> None:
    """Unless this process's parts were imported for ``region``, run `python -m sim` again with it set."""
    if region != REGION:
        os.environ[REGION_VARIABLE] = region
        os.execv(sys.executable, [sys.executable, "-m", "sim", *sys.argv[1:]])


def settings_for(
    directory: Path, cluster: str, aws_endpoint: str, kube_url: str, table: str, nodepool_path: str,
    node_role: str, instance_profile: str, windows_node_role: str = "", windows_instance_profile: str = "",
) -> dict[str, str]:
    """The variables a process needs to use this environment (names from nodescale.settings)."""
    return {
        names.KUBECONFIG: str(directory / "kubeconfig"),
        AWS_ENDPOINT_URL: aws_endpoint,
        names.DEFAULT_REGION: REGION,
        names.REGION: REGION,
        "AWS_ACCESS_KEY_ID": OPERATOR_CREDENTIALS["aws_access_key_id"],
        "AWS_SECRET_ACCESS_KEY": OPERATOR_CREDENTIALS["aws_secret_access_key"],
        "AWS_EC2_METADATA_DISABLED": "true",
        names.CLUSTER_NAME: cluster,
        names.TABLE_NAME: table,
        names.NODEPOOL_PARAMETER_PATH: nodepool_path,
        names.NODE_ROLE: node_role,
        names.INSTANCE_PROFILE: instance_profile,
        names.WINDOWS_NODE_ROLE: windows_node_role,
        names.WINDOWS_INSTANCE_PROFILE: windows_instance_profile,
        SIM_CONTROL: f"{kube_url}/sim/v1",
        # The product decides by the environment's simulated time, so TTL scenarios need no real waiting.
        CLOCK_URL: (directory.resolve() / CLOCK_FILE).as_uri(),
        SIM_AWS_CONTROL: f"{aws_endpoint}/sim/v1",
    }


def _write_kubeconfigs(directory: Path, server: str, cluster: str, ca_pem: bytes) -> None:
    """The functions' and the administrator's kubeconfigs, over HTTPS: kubectl sends a token only over TLS."""
    write_kubeconfig(directory / "kubeconfig", server, cluster, KUBE_FUNCTIONS_USER, KUBE_FUNCTIONS_TOKEN, ca_pem)
    write_kubeconfig(directory / ADMIN_KUBECONFIG, server, cluster, f"{cluster}-admin", KUBE_ADMIN_TOKEN, ca_pem)
    write_kubeconfig(directory / RBAC_APPLIER_KUBECONFIG, server, cluster, KUBE_RBAC_APPLIER_USER,
                     KUBE_RBAC_APPLIER_TOKEN, ca_pem)


def write_kubeconfig(
    path: Path, server: str, cluster: str, user: str, token: str, ca_pem: bytes | None = None
) -> None:
    """A kubeconfig for the local API server that authenticates as `user` with its bearer `token`
    (trusting `ca_pem`, the server's certificate, when it serves HTTPS)."""
    cluster_entry: dict[str, Any] = {"server": server}
    if ca_pem is not None:
        cluster_entry["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster, "cluster": cluster_entry}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [
            {"name": cluster, "context": {"cluster": cluster, "user": user, "namespace": "default"}}
        ],
        "current-context": cluster,
        "preferences": {},
    }
    _write_atomic(path, yaml.safe_dump(config, sort_keys=False))


def _env_text(env: dict[str, str]) -> str:
    return "".join(f"export {k}={_quote(v)}\n" for k, v in env.items())


def _quote(value: str) -> str:
    """Single-quoted for any POSIX shell, whatever the value holds."""
    return "'" + value.replace("'", "'\"'\"'") + "'"


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


# --- controlling it from outside ------------------------------------------------------------------------------------
def read_env(directory: Path, name: str = "env") -> dict[str, str]:
    """Parse DIR/env (or DIR/admin.env): the `export K='V'` lines `serve` wrote."""
    env: dict[str, str] = {}
    for line in (directory / name).read_text().splitlines():
        if line.startswith("export "):
            words = shlex.split(line[len("export ") :])
            if words and "=" in words[0]:
                key, value = words[0].split("=", 1)
                env[key] = value
    return env


def read_state(directory: Path) -> dict[str, Any] | None:
    try:
        return json.loads((directory / "state.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def pid_alive(pid: int) -> bool:
    """True while the process exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def running_pid(directory: Path) -> int | None:
    try:
        pid = int((directory / "sim.pid").read_text().strip())
    except (FileNotFoundError, ValueError):
        return None
    return pid if pid_alive(pid) else None


def up(
    directory: Path,
    cluster: str = "demo-cluster",
    ready_delay: float = 2.0,
    speed: float = 1.0,
    kubernetes_version: str = DEFAULT_KUBERNETES_VERSION,
    timeout: float = START_TIMEOUT,
    exit_with_parent: bool = False,
    region: str = DEFAULT_REGION,
    say: Say | None = None,
    detach_delay: float = 2.0,
) -> subprocess.Popen[bytes]:
    """Start the environment in the background and wait until it answers. With `exit_with_parent`
    it also stops when the calling process exits (tests: a killed pytest worker leaves nothing).
    `region`: any region the bundled catalog knows (`cn-north-1` is in the aws-cn partition).
    `say(what, why)` hears the first run's set-up steps (sim/prepare.py); by default they are logged."""
    check_region(region)
    directory = directory.resolve()
    directory.mkdir(parents=True, exist_ok=True)
    existing = running_pid(directory)
    if existing:
        raise SimEnvironmentError(
            f"an environment is already running in {directory} (pid {existing}); "
            f"run `python -m sim down --dir {directory}` first"
        )
    for name in ("state.json", "sim.pid", "env", ADMIN_ENV):
        with contextlib.suppress(FileNotFoundError):
            (directory / name).unlink()
    # Building the layers and synthesizing the stack take minutes the first time: done here, before the
    # start-up timeout runs, so the environment itself only reads the cache.
    prepare(cluster, region, say or _log_step)
    env = dict(os.environ)
    env[REGION_VARIABLE] = region
    env["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(PROJECT_ROOT), str(PROJECT_ROOT / "layers/nodescale/python"), env.get("PYTHONPATH", "")])
    )
    command = [
        sys.executable, "-m", "sim", "serve", "--dir", str(directory), "--cluster", cluster,
        "--ready-delay", str(ready_delay), "--speed", str(speed), "--kubernetes-version", kubernetes_version,
        "--region", region, "--detach-delay", str(detach_delay),
    ]
    if exit_with_parent:
        command += ["--exit-with-parent", str(os.getpid())]
    with open(directory / "sim.log", "ab") as log_file:
        proc = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT,
            env=env, cwd=str(PROJECT_ROOT), start_new_session=True,
        )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SimEnvironmentError(
                f"the environment exited during start-up (code {proc.returncode}):\n{_log_tail(directory)}"
            )
        state = read_state(directory)
        if state and _answers(f"{state['kube_url']}/readyz") and _answers(f"{state['aws_endpoint']}/sim/v1/seed"):
            return proc
        time.sleep(0.1)
    _stop_pid(proc.pid, None)
    proc.wait(timeout=10)
    raise SimEnvironmentError(f"the environment did not answer within {timeout:.0f}s:\n{_log_tail(directory)}")


def _log_step(what: str, why: str) -> None:
    log.info("%s (%s)", what, why)


def check_region(region: str) -> None:
    """A region sim can play: one the bundled catalog has instance types (and zones, prices) for."""
    from nodescale.aws.catalog import bundled_regions

    if region not in bundled_regions():
        raise SimEnvironmentError(f"region {region!r}: the bundled catalog does not know it; "
                                  f"known are {', '.join(bundled_regions())}")


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except (OSError, urllib.error.URLError):
        return False


def _log_tail(directory: Path, lines: int = 30) -> str:
    try:
        return "\n".join((directory / "sim.log").read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return "(no sim.log)"


def down(directory: Path, timeout: float = 20.0) -> bool:
    """Stop the environment in DIR and everything it started; False when none was running."""
    directory = directory.resolve()
    state = read_state(directory) or {}
    pid = running_pid(directory) or (state.get("pid") if state.get("pid") and pid_alive(state["pid"]) else None)
    if pid is None:
        moto_pid = state.get("moto_pid")
        if moto_pid and pid_alive(moto_pid):
            os.kill(moto_pid, signal.SIGKILL)
        for name in ("state.json", "sim.pid"):
            with contextlib.suppress(FileNotFoundError):
                (directory / name).unlink()
        return False
    _stop_pid(pid, state.get("moto_pid"), timeout)
    return True


def _stop_pid(pid: int, moto_pid: int | None, timeout: float = 20.0) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and pid_alive(pid):
        time.sleep(0.05)
    # Whatever is left of its session (the serving process leads it) is killed outright.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    for leftover in (pid, moto_pid):
        if leftover and pid_alive(leftover):
            with contextlib.suppress(ProcessLookupError):
                os.kill(leftover, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(p and pid_alive(p) for p in (pid, moto_pid)):
        time.sleep(0.05)


def session_members(session_id: int) -> list[int]:
    """Pids of live processes in a session (what `down` must leave empty), read from /proc."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[-1].split()
        except OSError:
            continue
        # fields: state ppid pgrp session ...
        if int(fields[3]) == session_id and fields[0] != "Z":
            members.append(int(entry.name))
    return members


# --- for tests ----------------------------------------------------------------------------------------------------------
class Environment:
    """`with Environment() as env:` a running environment in a temporary (or given) directory."""

    def __init__(
        self,
        directory: Path | str | None = None,
        cluster: str = "demo-cluster",
        ready_delay: float = 2.0,
        speed: float = 1.0,
        kubernetes_version: str = DEFAULT_KUBERNETES_VERSION,
        region: str = DEFAULT_REGION,
        detach_delay: float = 2.0,
    ) -> None:
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self.region = region
        self.detach_delay = detach_delay
        if directory is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="sim-env-")
            directory = self._tmp.name
        self.dir = Path(directory).resolve()
        self.cluster = cluster
        self.ready_delay = ready_delay
        self.speed = speed
        self.kubernetes_version = kubernetes_version
        self.env: dict[str, str] = {}
        self.admin_env: dict[str, str] = {}
        self.state: dict[str, Any] = {}
        self._proc: subprocess.Popen[bytes] | None = None

    # lifecycle
    def start(self) -> Environment:
        self._proc = up(
            self.dir, self.cluster, self.ready_delay, self.speed, self.kubernetes_version, exit_with_parent=True,
            region=self.region, detach_delay=self.detach_delay,
        )
        self.env = read_env(self.dir)
        self.admin_env = read_env(self.dir, ADMIN_ENV)
        self.state = read_state(self.dir) or {}
        return self

    def stop(self) -> None:
        if self._proc is not None:
            down(self.dir)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=10)
            self._proc = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> Environment:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    # where things are
    @property
    def kubeconfig(self) -> str:
        """The functions' kubeconfig (what the product runs with)."""
        return self.env[names.KUBECONFIG]

    @property
    def admin_kubeconfig(self) -> str:
        """The administrator's kubeconfig (system:masters): seeding, fixtures, assertions."""
        return self.admin_env[names.KUBECONFIG]

    @property
    def rbac_applier_kubeconfig(self) -> str:
        """The stack's RBAC function's kubeconfig (`-c applyRbac=true`): its EKS access policy, no RBAC."""
        return str(self.dir / RBAC_APPLIER_KUBECONFIG)

    @property
    def aws_endpoint(self) -> str:
        return self.env[AWS_ENDPOINT_URL]

    @property
    def kube_url(self) -> str:
        return str(self.state["kube_url"])

    @property
    def control_url(self) -> str:
        return self.env[SIM_CONTROL]

    @property
    def aws_control_url(self) -> str:
        return self.env[SIM_AWS_CONTROL]

    @property
    def seed(self) -> dict[str, Any]:
        return json.loads((self.dir / "seed.json").read_text())

    def boto3_client(self, service: str, retries: int | None = None) -> Any:
        """An administrator's boto3 client (seeding, tests); `retries=0` makes injected errors surface at once."""
        return self._boto3_client(service, self.admin_env, retries)

    def functions_boto3_client(self, service: str, retries: int | None = None) -> Any:
        """A boto3 client with DIR/env's credentials: what the product runs as."""
        return self._boto3_client(service, self.env, retries)

    def _boto3_client(self, service: str, env: dict[str, str], retries: int | None) -> Any:
        import boto3
        from botocore.config import Config

        config = Config(retries={"total_max_attempts": retries + 1, "mode": "standard"}) if retries is not None else None
        return boto3.client(
            service, endpoint_url=self.aws_endpoint, region_name=self.region, config=config,
            aws_access_key_id=env["AWS_ACCESS_KEY_ID"], aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
        )

    def kube_api_client(self) -> Any:
        """An official `kubernetes` ApiClient as the administrator (seeding, fixtures, assertions)."""
        from kubernetes import config

        return config.new_client_from_config(config_file=self.admin_kubeconfig)

    def functions_kube_api_client(self) -> Any:
        """An official `kubernetes` ApiClient from DIR/env's kubeconfig: what the product runs as."""
        from kubernetes import config

        return config.new_client_from_config(config_file=self.kubeconfig)

    # control APIs (HTTP only: tests see the environment the way the product does)
    def _call(self, method: str, url: str, body: Any = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as exc:
            raise SimEnvironmentError(f"{method} {url} -> {exc.code}: {exc.read().decode(errors='replace')}") from None

    def clock(self) -> dict[str, Any]:
        return self._call("GET", f"{self.control_url}/clock")

    def advance(self, seconds: float) -> dict[str, Any]:
        """Move simulated time forward (Ready delays, grace periods, TTLs in the sim)."""
        return self._call("POST", f"{self.control_url}/clock/advance", {"seconds": seconds})

    def add_aws_fault(self, **rule: Any) -> dict[str, Any]:
        """E.g. `add_aws_fault(kind="capacity", instanceType="m5.large", zone="us-east-1a")`."""
        return self._call("POST", f"{self.aws_control_url}/aws-faults", rule)["rules"][0]

    def aws_faults(self) -> list[dict[str, Any]]:
        return self._call("GET", f"{self.aws_control_url}/aws-faults")["rules"]

    def clear_aws_faults(self) -> None:
        self._call("DELETE", f"{self.aws_control_url}/aws-faults")

    def aws_calls(self, service: str | None = None, action: str | None = None) -> list[dict[str, Any]]:
        query = "&".join(f"{k}={v}" for k, v in (("service", service), ("action", action)) if v)
        return self._call("GET", f"{self.aws_control_url}/aws-calls" + (f"?{query}" if query else ""))["calls"]

    def spot_interruptions(self, instance_ids: list[str], notice_seconds: float | None = None) -> list[dict[str, Any]]:
        """EC2 reclaims these running spot instances: each warned now and terminated when its notice (two
        minutes unless ``notice_seconds``) runs out. Per instance: its node and the warning's time."""
        body: dict[str, Any] = {"instanceIds": instance_ids}
        if notice_seconds is not None:
            body["noticeSeconds"] = notice_seconds
        return self._call("POST", f"{self.control_url}/spot-interruptions", body)["warnings"]

    def spot_interruption_record(self) -> list[dict[str, Any]]:
        """Every warning so far, node by node on the simulated clock (``sim/nodes/spot.py``)."""
        return self._call("GET", f"{self.control_url}/spot-interruptions")["interruptions"]

    def spot_notices_run_out(self, timeout: float = 60.0) -> list[dict[str, Any]]:
        """Move the clock past every spot notice still running and wait until sim has ended those instances;
        the record then (each node's figure against its instance's end)."""
        record = self.spot_interruption_record()
        left = [e["noticeEndsAt"] for e in record if e["endedAt"] is None]
        if left:
            self.advance(max(0.0, max(left) - self.clock()["elapsedSeconds"]) + 1)
        deadline = time.monotonic() + timeout
        while any(e["endedAt"] is None for e in record) and time.monotonic() < deadline:
            time.sleep(0.2)
            record = self.spot_interruption_record()
        return record

    def spot_notices_ended(self, timeout: float = 180.0) -> list[dict[str, Any]]:
        """Wait, with the simulated clock running on its own, while a warned node still holds evictable pods
        and its notice runs (nothing moves the clock ahead of a drain under way); once every such node is
        empty or ended (or past ``timeout``) the clock is moved past the notices left. The record then."""
        def draining(entry: dict[str, Any]) -> bool:
            return (entry["endedAt"] is None and bool(entry["evictablePods"])
                    and entry.get("lastEvictablePodGoneAt") is None)

        deadline = time.monotonic() + timeout
        while any(draining(e) for e in self.spot_interruption_record()) and time.monotonic() < deadline:
            time.sleep(1.0)
        return self.spot_notices_run_out()

    def lambda_invocations(self, take: bool = False) -> list[dict[str, Any]]:
        """The asynchronous Lambda invocations the functions asked for and nobody ran yet, oldest first
        (sim/aws/lambda_service.py); ``take``: also remove them from the queue, to run them."""
        return self._call("DELETE" if take else "GET", f"{self.aws_control_url}/lambda-invocations")["invocations"]

    def clear_aws_calls(self) -> None:
        self._call("DELETE", f"{self.aws_control_url}/aws-calls")

    def add_kube_fault(self, **fault: Any) -> Any:
        return self._call("POST", f"{self.control_url}/faults", fault)

    def clear_kube_faults(self) -> None:
        self._call("DELETE", f"{self.control_url}/faults")

    def kubelet(self) -> dict[str, Any]:
        """Which instances joined as which Nodes, and why others never did."""
        return self._call("GET", f"{self.aws_control_url}/kubelet")

    def publish_release(self, images: list[Image]) -> Any:
        """Publish new public AMIs and point their `/aws/service/...` parameters at them, e.g.
        `publish_release(sim.aws.amis.eks_release("1.31", "v20241201"))`: a new EKS AMI release."""
        body = {"images": [i.moto_ami() for i in images], "parameters": public_parameters(images)}
        return self._call("POST", f"{self.aws_control_url}/public-release", body)

    def create_capacity_block(self, instance_type: str, zone: str, count: int, end: datetime,
                              tags: dict[str, str] | None = None) -> str:
        """A capacity block (reservationType capacity-block) ending at ``end``, as one bought with
        PurchaseCapacityBlock would be; returns its cr- id (sim/aws/capacity_reservations.py)."""
        body = {"instanceType": instance_type, "availabilityZone": zone, "instanceCount": count,
                "endDate": end.isoformat(), "tags": tags or {}}
        return str(self._call("POST", f"{self.aws_control_url}/capacity-block", body)["capacityReservationId"])

    def reset_faults(self) -> None:
        self.clear_aws_faults()
        self.clear_kube_faults()
