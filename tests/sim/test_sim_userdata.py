"""The sim kubelet reads node labels, taints and max pods from every real user data format."""

from __future__ import annotations

import base64

import pytest

from nodescale.aws import userdata as nodescale_userdata
from nodescale.aws.cluster import ClusterInfo
from nodescale.model.nodepool import NodeClass, NodePool, SelectorTerm
from nodescale.model.requirements import Requirements
from sim.nodes.userdata import UserDataError, decode, parse

AL2_SCRIPT = """#!/bin/bash
set -o xtrace
/etc/eks/bootstrap.sh 'demo-cluster' --apiserver-endpoint 'https://ABC.gr7.us-east-1.eks.amazonaws.com' \\
  --b64-cluster-ca 'LS0tLS1CRUdJTg==' --use-max-pods false \\
  --kubelet-extra-args '--node-labels="karpenter.sh/nodepool=default,karpenter.sh/capacity-type=spot" --register-with-taints="dedicated=gpu:NoSchedule,spot:PreferNoSchedule" --max-pods=58'
"""

AL2_MIME = """MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="//"

--//
Content-Type: text/x-shellscript; charset="us-ascii"

#!/bin/bash
echo "custom bootstrap step"

--//
Content-Type: text/x-shellscript; charset="us-ascii"

#!/bin/bash -xe
exec > >(tee /var/log/user-data.log|logger -t user-data -s 2>/dev/console) 2>&1
/etc/eks/bootstrap.sh demo-cluster --container-runtime containerd \\
--kubelet-extra-args '--node-labels=team=billing --register-with-taints=billing=true:NoExecute'
--//--
"""

AL2023_MIME = """MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="BOUNDARY"

--BOUNDARY
Content-Type: application/node.eks.aws

---
apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  cluster:
    name: demo-cluster
    apiServerEndpoint: https://ABC.gr7.us-east-1.eks.amazonaws.com
    certificateAuthority: LS0tLS1CRUdJTg==
    cidr: 10.100.0.0/16
  kubelet:
    config:
      maxPods: 110
      clusterDNS:
      - 10.100.0.10
    flags:
    - --node-labels=karpenter.sh/nodepool=general,node.kubernetes.io/lifecycle=spot
    - --register-with-taints=example.com/special=true:NoSchedule

--BOUNDARY--
"""

BOTTLEROCKET = """[settings.kubernetes]
api-server = "https://ABC.gr7.us-east-1.eks.amazonaws.com"
cluster-certificate = "LS0tLS1CRUdJTg=="
cluster-name = "demo-cluster"
max-pods = 42

[settings.kubernetes.node-labels]
"karpenter.sh/nodepool" = "bottlerocket"
team = "platform"

[settings.kubernetes.node-taints]
"nvidia.com/gpu" = ["true:NoSchedule", ":NoExecute"]
dedicated = "infra:PreferNoSchedule"
"""

WINDOWS = """<powershell>
[string]$EKSBootstrapScriptFile = "$env:ProgramFiles\\Amazon\\EKS\\Start-EKSBootstrap.ps1"
& $EKSBootstrapScriptFile -EKSClusterName 'demo-cluster' -APIServerEndpoint 'https://ABC.gr7.us-east-1.eks.amazonaws.com' -Base64ClusterCA 'LS0tLS1CRUdJTg==' -KubeletExtraArgs '--node-labels="karpenter.sh/nodepool=windows2022,kubernetes.io/os=windows" --register-with-taints="os=windows:NoSchedule" --max-pods=110' 3>&1 4>&1 5>&1 6>&1
</powershell>
"""


def test_al2_bootstrap_line_with_continuations_and_nested_quotes() -> None:
    boot = parse(AL2_SCRIPT)
    assert boot.cluster == "demo-cluster"
    assert boot.family == "AL2"
    assert boot.labels == {"karpenter.sh/nodepool": "default", "karpenter.sh/capacity-type": "spot"}
    assert boot.taints == [
        {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
        {"key": "spot", "effect": "PreferNoSchedule"},
    ]
    assert boot.max_pods == 58


def test_al2_mime_merged_with_custom_user_data_reads_the_bootstrap_part() -> None:
    boot = parse(AL2_MIME)
    assert boot.cluster == "demo-cluster"
    assert boot.labels == {"team": "billing"}
    assert boot.taints == [{"key": "billing", "value": "true", "effect": "NoExecute"}]
    assert boot.max_pods is None


def test_al2023_nodeconfig_flags_and_max_pods() -> None:
    boot = parse(AL2023_MIME)
    assert (boot.cluster, boot.family, boot.os) == ("demo-cluster", "AL2023", "linux")
    assert boot.labels == {"karpenter.sh/nodepool": "general", "node.kubernetes.io/lifecycle": "spot"}
    assert boot.taints == [{"key": "example.com/special", "value": "true", "effect": "NoSchedule"}]
    assert boot.max_pods == 110


def test_bottlerocket_toml_labels_taint_lists_and_max_pods() -> None:
    boot = parse(BOTTLEROCKET)
    assert (boot.cluster, boot.family) == ("demo-cluster", "Bottlerocket")
    assert boot.labels == {"karpenter.sh/nodepool": "bottlerocket", "team": "platform"}
    assert boot.taints == [
        {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"},
        {"key": "nvidia.com/gpu", "effect": "NoExecute"},
        {"key": "dedicated", "value": "infra", "effect": "PreferNoSchedule"},
    ]
    assert boot.max_pods == 42


def test_windows_powershell_bootstrap() -> None:
    boot = parse(WINDOWS)
    assert (boot.cluster, boot.os, boot.family) == ("demo-cluster", "windows", "Windows")
    assert boot.labels == {"karpenter.sh/nodepool": "windows2022", "kubernetes.io/os": "windows"}
    assert boot.taints == [{"key": "os", "value": "windows", "effect": "NoSchedule"}]
    assert boot.max_pods == 110


def test_decode_reads_base64_as_ec2_returns_it() -> None:
    assert parse(decode(base64.b64encode(BOTTLEROCKET.encode()).decode())).max_pods == 42


@pytest.mark.parametrize(
    ("user_data", "reason"),
    [
        ("#!/bin/bash\necho hello\n", "never calls /etc/eks/bootstrap.sh"),
        ("#!/bin/bash\n/etc/eks/bootstrap.sh --use-max-pods false\n", "without the cluster name"),
        (AL2_SCRIPT.replace("NoSchedule,", "Sometimes,"), "effect 'Sometimes'"),
        (AL2_SCRIPT.replace("karpenter.sh/nodepool=default", "bad key!=x"), "not a valid Kubernetes label key"),
        (AL2_SCRIPT.replace("--max-pods=58", "--max-pods=lots"), "not a whole number"),
        (AL2023_MIME.replace("    name: demo-cluster\n", ""), "spec.cluster.name is missing"),
        (AL2023_MIME.replace("node.eks.aws/v1alpha1", "node.eks.aws/v9"), "expected kind NodeConfig"),
        (BOTTLEROCKET.replace('cluster-name = "demo-cluster"\n', ""), "cluster-name is missing"),
        (BOTTLEROCKET.replace("max-pods = 42", "max-pods = "), "not valid TOML"),
        (BOTTLEROCKET.replace('"infra:PreferNoSchedule"', '"infra"'), 'expected "value:Effect"'),
        (WINDOWS.replace("-EKSClusterName 'demo-cluster' ", ""), "never given -EKSClusterName"),
        ("<powershell>\nWrite-Host hi\n</powershell>", "never runs Start-EKSBootstrap.ps1"),
        ("", "empty"),
    ],
)
def test_user_data_that_cannot_bootstrap_says_why(user_data: str, reason: str) -> None:
    with pytest.raises(UserDataError, match=reason.replace("(", r"\(").replace(".", r"\.")):
        parse(user_data)


@pytest.mark.parametrize(("raw", "reason"), [(None, "no user data"), ("%%%not-base64", "not valid base64")])
def test_undecodable_user_data_is_rejected(raw: str | None, reason: str) -> None:
    with pytest.raises(UserDataError, match=reason):
        decode(raw)


def _rendered(family: str, policy: str | None, alias: str = "") -> str:
    """nodescale's own user data for ``family``, as a launch template carries it."""
    terms = (SelectorTerm(alias=alias),) if alias else ()
    node_class = NodeClass("nvme", family, instance_store_policy=policy, ami_selector_terms=terms)
    node = nodescale_userdata.bootstrap_for(NodePool("default", Requirements([]), "nvme"), node_class)
    cluster = ClusterInfo("demo-cluster", "1.31", "https://ABC.gr7.us-east-1.eks.amazonaws.com", "Q0E=", "10.100.0.0/16")
    return nodescale_userdata.render(family, cluster, node)


@pytest.mark.parametrize(("family", "alias"), [("AL2", ""), ("AL2023", ""), ("Bottlerocket", ""),
                                               ("Bottlerocket", "bottlerocket@latest")])
def test_the_kubelet_sees_the_instance_store_raid0_set_up_of_every_family(family: str, alias: str) -> None:
    """#31.5 (instance store): AL2's ``--local-disks raid0``, nodeadm's ``localStorage: RAID0`` and
    Bottlerocket's ``ephemeral-storage init`` + ``bind`` (default or named directories, /var/lib/kubelet among
    them) move the kubelet's storage onto the instance store; without the policy it stays on the root volume.
    Restates aws/karpenter-provider-aws pkg/providers/launchtemplate/suite_test.go, It "should specify RAID0
    bootstrap-command when instance-store policy is set on Bottlerocket", from the node's side."""
    assert parse(_rendered(family, "RAID0", alias)).instance_store_raid0
    assert not parse(_rendered(family, None, alias)).instance_store_raid0


def test_a_bottlerocket_bind_that_leaves_the_kubelet_out_keeps_the_root_volume() -> None:
    """#31.5 (instance store): binding other directories only, or never initialising the array, leaves the
    kubelet's /var/lib/kubelet on the data volume."""
    base = '[settings.kubernetes]\ncluster-name = "demo-cluster"\n'
    init = '["apiclient", "ephemeral-storage", "init"]'
    for commands in (f'[{init}, ["apiclient", "ephemeral-storage", "bind", "--dirs", "/var/lib/containerd"]]',
                     '[["apiclient", "ephemeral-storage", "bind"]]'):
        text = base + f'[settings.bootstrap-commands.mount]\ncommands = {commands}\nmode = "always"\n'
        assert not parse(text).instance_store_raid0
