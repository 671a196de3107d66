"""Entry point of the moto child process: moto's server plus the public EKS images and parameters.

Run as `python -m sim.aws.moto_main`; it binds 127.0.0.1 on a free port and prints
`PORT <n>` on its first stdout line. It also answers `POST /sim/v1/public-release` with
`{"images": [...moto AMI dicts...], "parameters": {"/aws/service/...": "value"}}`, which is how a
test publishes a new EKS AMI release (the public API cannot write under `/aws`).
"""

from __future__ import annotations

import contextlib
import ctypes
import gzip
import json
import logging
import os
import signal
import sys
import tempfile
import threading
import time
from datetime import datetime
from importlib import resources
from typing import Any

from sim.aws import capacity_reservations, eventbridge, instance_types, launch_template_tags, moto_speedups
from sim.aws.amis import catalog, public_parameters
from sim.aws.constants import REGION

# Catalog plus anything published at run time; read by the SSM loader after every reset.
_PUBLIC_PARAMETERS: dict[str, str] = {}
_EXTRA_IMAGES: list[dict[str, Any]] = []
_PREFIXES = ("/aws/service/eks/", "/aws/service/bottlerocket/", "/aws/service/ami-windows-latest/")
_LOCK = threading.Lock()


def _die_with_parent() -> None:
    """Ask Linux to SIGTERM us when the environment process dies, so no moto outlives it."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    parent = os.getppid()

    def watch() -> None:
        while True:
            if os.getppid() != parent:
                os.kill(os.getpid(), signal.SIGTERM)
                return
            time.sleep(1.0)

    threading.Thread(target=watch, daemon=True, name="parent-watch").start()


def _write_amis_file() -> str:
    """moto reads its default AMIs from MOTO_AMIS_PATH at import: ours plus moto's own."""
    with resources.files("moto").joinpath("ec2/resources/amis.json.gz").open("rb") as raw:
        defaults = json.loads(gzip.decompress(raw.read()))
    images = catalog()
    ours = {image.image_id for image in images}
    merged = [ami for ami in defaults if ami["ami_id"] not in ours] + [image.moto_ami() for image in images]
    fd, path = tempfile.mkstemp(prefix="sim-amis-", suffix=".json")
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump(merged, out)
    _PUBLIC_PARAMETERS.update(public_parameters(images))
    return path


def _install_public_parameters() -> None:
    from moto.ssm import models as ssm_models

    original = ssm_models.ParameterDict._check_loading_status

    def check_loading_status(self: Any, key: str) -> None:
        original(self, key)
        key = str(key or "")
        if key.startswith(_PREFIXES) and not getattr(self, "sim_eks_loaded", False):
            self.sim_eks_loaded = True
            with _LOCK:
                for name, value in _PUBLIC_PARAMETERS.items():
                    _append_version(self, name, value)

    ssm_models.ParameterDict._check_loading_status = check_loading_status


def _append_version(params: Any, name: str, value: str) -> None:
    from moto.core.utils import utcnow
    from moto.ssm.models import Parameter

    versions = dict.__getitem__(params, name) if dict.__contains__(params, name) else []
    versions.append(
        Parameter(
            account_id=params.account_id,
            name=name,
            value=value,
            parameter_type="String",
            description=None,
            allowed_pattern=None,
            keyid=None,
            last_modified_date=utcnow(),
            version=len(versions) + 1,
            data_type="aws:ec2:image" if name.endswith("/image_id") else "text",
        )
    )
    dict.__setitem__(params, name, versions)


def _publish(body: dict[str, Any]) -> dict[str, Any]:
    """Add images to every live EC2 backend and new parameter versions to every loaded SSM backend."""
    from moto.ec2.models import ec2_backends
    from moto.ec2.models.amis import AMIS, Ami
    from moto.ssm.models import ssm_backends

    images = body.get("images") or []
    parameters = body.get("parameters") or {}
    if not isinstance(images, list) or not isinstance(parameters, dict):
        raise ValueError("body must be {'images': [moto AMI dicts], 'parameters': {name: value}}")
    with _LOCK:
        for ami in images:
            AMIS.append(dict(ami))
            _EXTRA_IMAGES.append(dict(ami))
        _PUBLIC_PARAMETERS.update({str(k): str(v) for k, v in parameters.items()})
    for account in ec2_backends.values():
        for backend in account.values():
            for ami in images:
                spec = dict(ami, owner_alias="amazon")
                if isinstance(spec.get("creation_date"), str):
                    spec["creation_date"] = datetime.fromisoformat(spec["creation_date"].replace("Z", "+00:00"))
                backend.amis[spec["ami_id"]] = Ami(backend, **spec)
    for account in ssm_backends.values():
        for backend in account.values():
            if getattr(backend._parameters, "sim_eks_loaded", False):
                for name, value in parameters.items():
                    _append_version(backend._parameters, str(name), str(value))
    return {"images": [ami["ami_id"] for ami in images], "parameters": sorted(parameters)}


def _set_cluster_endpoint(body: dict[str, Any]) -> dict[str, Any]:
    """Point an EKS cluster's endpoint at the local Kubernetes API (moto invents an unreachable one),
    so code that finds its cluster through DescribeCluster, as a Lambda does, reaches it too."""
    from moto.eks.models import eks_backends

    name, endpoint = body.get("cluster"), body.get("endpoint")
    if not isinstance(name, str) or not isinstance(endpoint, str):
        raise ValueError("body must be {'cluster': name, 'endpoint': url}")
    for account in eks_backends.values():
        for backend in account.values():
            if name in backend.clusters:
                backend.clusters[name].endpoint = endpoint
                return {"cluster": name, "endpoint": endpoint}
    raise ValueError(f"no EKS cluster named {name!r}")


def _instance_user_data(body: dict[str, Any]) -> dict[str, Any]:
    """What each instance's metadata service would hand its bootstrap: the user data, base64 as EC2
    returns it (None when there is none). One call for many instances, as many nodes booting at once
    each read their own; instances unknown in the region are left out."""
    from moto.ec2.models import ec2_backends

    region, wanted = body.get("region"), body.get("instanceIds")
    if not isinstance(region, str) or not isinstance(wanted, list):
        raise ValueError("body must be {'region': name, 'instanceIds': [ids]}")
    wanted_ids = {str(i) for i in wanted}
    found: dict[str, str | None] = {}
    backends = [b for account in ec2_backends.values() for b in account.values() if b.region_name == region]
    for backend in backends:
        for reservation in list(backend.reservations.values()):
            for instance in reservation.instances:
                if instance.id in wanted_ids:
                    data = instance.user_data
                    found[instance.id] = data.as_bytes().decode() if data is not None else None
    return {"userData": found}


def _instance_states(body: dict[str, Any]) -> dict[str, Any]:
    """Every instance's state in the region, for sim's kubelet: what DescribeInstanceStatus with
    IncludeAllInstances says, without serializing ten thousand statuses to XML every half second
    (a real node never asks EC2 this; only the simulation of many nodes does)."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.ec2.models import ec2_backends

    region, account = body.get("region"), body.get("account", DEFAULT_ACCOUNT_ID)
    if not isinstance(region, str) or not isinstance(account, str):
        raise ValueError("body must be {'region': name, 'account': id (default moto's)}")
    states: dict[str, str] = {}
    # Only the caller's account, as DescribeInstanceStatus answers.
    backend = ec2_backends[account][region] if account in ec2_backends and region in ec2_backends[account] else None
    for reservation in list(backend.reservations.values()) if backend is not None else []:
        for instance in list(reservation.instances):
            states[instance.id] = instance.state
    return {"states": states}


def _ebs_default_key(body: dict[str, Any]) -> dict[str, Any]:
    """The account's EBS encryption default in a region: moto keeps the key ModifyEbsDefaultKmsKeyId set but does
    not serve GetEbsDefaultKmsKeyId, which sim's IAM needs to know which key a launch's volumes use. An empty
    key is the AWS-managed aws/ebs key."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.ec2.models import ec2_backends

    region, account = body.get("region"), body.get("account", DEFAULT_ACCOUNT_ID)
    if not isinstance(region, str) or not isinstance(account, str):
        raise ValueError("body must be {'region': name, 'account': id (default moto's)}")
    backend = ec2_backends[account][region]
    return {"kmsKeyId": backend.default_kms_key_id or "", "encryptedByDefault": bool(backend.ebs_encryption_by_default)}


def _fail_launch(body: dict[str, Any]) -> dict[str, Any]:
    """Instances that die as they start: terminated with the StateReason EC2 gives (e.g. Client.InternalError when
    a volume's KMS key refused the launching caller), as AWS shows an instance that never came up."""
    from moto.ec2.models import ec2_backends
    from moto.ec2.models.instances import StateReason

    region, wanted, code, message = body.get("region"), body.get("instanceIds"), body.get("code"), body.get("message")
    if not isinstance(region, str) or not isinstance(wanted, list) or not isinstance(code, str) \
            or not isinstance(message, str):
        raise ValueError("body must be {'region': name, 'instanceIds': [ids], 'code': text, 'message': text}")
    failed = []
    for backend in [b for account in ec2_backends.values() for b in account.values() if b.region_name == region]:
        for reservation in list(backend.reservations.values()):
            for instance in reservation.instances:
                if instance.id in wanted:
                    instance.terminate()
                    instance._reason = ""
                    instance.state_reason = StateReason(f"{code}: {message}", code)
                    failed.append(instance.id)
    return {"instanceIds": sorted(failed)}


_CONTROL = {
    "/sim/v1/fail-launch": _fail_launch,
    "/sim/v1/ebs-default-key": _ebs_default_key,
    "/sim/v1/instance-states": _instance_states,
    "/sim/v1/public-release": _publish,
    "/sim/v1/eks-endpoint": _set_cluster_endpoint,
    "/sim/v1/instance-user-data": _instance_user_data,
    "/sim/v1/capacity-block": capacity_reservations.create_capacity_block,
    "/sim/v1/aws-events": eventbridge.emit,
    "/sim/v1/rule-deliveries": eventbridge.deliver_as_rule,
}


def _control_app(moto_app: Any) -> Any:
    def app(environ: dict[str, Any], start_response: Any) -> Any:
        handler = _CONTROL.get(environ.get("PATH_INFO", ""))
        if handler is not None and environ.get("REQUEST_METHOD") == "POST":
            length = int(environ.get("CONTENT_LENGTH") or 0)
            try:
                payload = handler(json.loads(environ["wsgi.input"].read(length) or b"{}"))
                status, body = "200 OK", json.dumps(payload)
            except (ValueError, KeyError, TypeError) as exc:
                status, body = "400 Bad Request", json.dumps({"error": str(exc)})
            start_response(status, [("Content-Type", "application/json")])
            return [body.encode()]
        return moto_app(environ, start_response)

    return app


def main() -> None:
    _die_with_parent()
    amis_path = _write_amis_file()
    os.environ["MOTO_AMIS_PATH"] = amis_path
    try:
        from moto.ec2.models import amis as _loaded_amis  # noqa: F401  (reads MOTO_AMIS_PATH now)
    finally:
        os.unlink(amis_path)
    _install_public_parameters()
    instance_types.install(REGION)
    moto_speedups.install()
    capacity_reservations.install()
    eventbridge.install()
    launch_template_tags.install()

    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import make_server

    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    app = _control_app(DomainDispatcherApplication(create_backend_app))
    server = make_server("127.0.0.1", 0, app, threaded=True, request_handler=MotoRequestHandler)

    def stop(_signum: int, _frame: Any) -> None:
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(f"PORT {server.server_address[1]}", flush=True)
    server.serve_forever(poll_interval=0.1)
    server.server_close()
    sys.stdout.flush()
    sys.stderr.flush()
    # moto keeps nothing worth flushing; skipping interpreter teardown of its large modules saves seconds.
    os._exit(0)


if __name__ == "__main__":
    main()
