"""User data for each AMI family, parsed back the way a node would read it."""

from __future__ import annotations

import email
import re
import shlex
import tomllib

import pytest
import yaml

from nodescale.aws import userdata
from nodescale.aws.cluster import ClusterInfo, dns_ip_for
from nodescale.model import labels as wk
from nodescale.model.instancetype import InstanceType
from nodescale.model.nodepool import KubeletSettings, NodeClass, NodePool, SelectorTerm
from nodescale.model.requirements import Requirement, Requirements
from nodescale.model.taints import Taint
from sim.nodes import userdata as node_reads

CLUSTER = ClusterInfo("demo-cluster", "1.31", "https://ABC.gr7.us-east-1.eks.amazonaws.com", "Q0EtREFUQQ==", "10.100.0.0/16")
POOL = NodePool(
    name="gpu",
    requirements=Requirements(
        [
            Requirement.exactly(wk.CAPACITY_TYPE, "on-demand"),
            Requirement.exactly(wk.INSTANCE_FAMILY, "p3"),
            Requirement.exactly(wk.ARCH, "amd64", "arm64"),  # two values: not a label
            Requirement.exactly("node-restriction.kubernetes.io/secret", "x"),  # the kubelet may not set it
        ]
    ),
    node_class="gpu",
    labels={"team": "ml"},
    taints=(Taint("nvidia.com/gpu", "NoSchedule", "true"),),
    startup_taints=(Taint("example.com/not-ready", "NoExecute"),),
    kubelet=KubeletSettings(
        max_pods=58,
        system_reserved={"cpu": 100, "memory": 100 * 2**20},
        eviction_hard={"memory.available": "5%"},
    ),
)
NODE_CLASS = NodeClass("gpu", "AL2")
NODE = userdata.bootstrap_for(POOL, NODE_CLASS)
EXPECTED_LABELS = {
    "karpenter.sh/capacity-type": "on-demand",
    "karpenter.k8s.aws/instance-family": "p3",
    "karpenter.sh/nodepool": "gpu",
    "karpenter.k8s.aws/ec2nodeclass": "gpu",
    "team": "ml",
}
EXPECTED_TAINTS = ["nvidia.com/gpu=true:NoSchedule", "example.com/not-ready:NoExecute", "karpenter.sh/unregistered:NoExecute"]


def mime_parts(text: str) -> list[tuple[str, str]]:
    msg = email.message_from_string(text)
    assert msg.is_multipart()
    return [(p.get_content_type(), p.get_payload()) for p in msg.walk() if not p.is_multipart()]


def flag_map(flags: list[str]) -> dict[str, str]:
    return dict(f.split("=", 1) for f in flags)


def kv(csv: str) -> dict[str, str]:
    return dict(item.split("=", 1) for item in csv.split(","))


def bootstrap_args(script: str) -> list[str]:
    line = next(ln for ln in script.splitlines() if ln.startswith("/etc/eks/bootstrap.sh"))
    return shlex.split(line)


def test_node_labels_keep_single_values_and_drop_what_the_kubelet_may_not_set():
    assert userdata.node_labels(POOL) == EXPECTED_LABELS


def test_al2_bootstrap_command_carries_labels_taints_and_max_pods():
    text = userdata.render("AL2", CLUSTER, NODE)
    parts = mime_parts(text)
    assert [ct for ct, _ in parts] == ["text/x-shellscript"]
    args = bootstrap_args(parts[-1][1])
    assert args[1] == "demo-cluster"
    opts = dict(zip(args[2::2], args[3::2], strict=False))
    assert opts["--apiserver-endpoint"] == CLUSTER.endpoint
    assert opts["--b64-cluster-ca"] == CLUSTER.ca_data
    assert opts["--dns-cluster-ip"] == "10.100.0.10"
    assert opts["--use-max-pods"] == "false"
    kubelet = flag_map(opts["--kubelet-extra-args"].split(" "))
    assert kv(kubelet["--node-labels"]) == EXPECTED_LABELS
    assert kubelet["--register-with-taints"].split(",") == EXPECTED_TAINTS
    assert kubelet["--max-pods"] == "58"
    assert kubelet["--system-reserved"] == "cpu=100m,memory=100Mi"
    assert kubelet["--eviction-hard"] == "memory.available<5%"


def test_al2_keeps_the_users_script_and_runs_it_first():
    user = '#!/bin/bash\necho "custom bootstrap step"\n'
    parts = mime_parts(userdata.render("AL2", CLUSTER, NODE, user))
    assert len(parts) == 2
    assert 'echo "custom bootstrap step"' in parts[0][1]
    assert "/etc/eks/bootstrap.sh" in parts[1][1]


def test_al2_merges_a_users_mime_document_part_by_part():
    user = (
        'MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="XYZ"\n\n'
        '--XYZ\nContent-Type: text/x-shellscript; charset="us-ascii"\n\n#!/bin/bash\necho one\n'
        '--XYZ\nContent-Type: text/cloud-config; charset="us-ascii"\n\n#cloud-config\npackages: [jq]\n'
        "--XYZ--\n"
    )
    parts = mime_parts(userdata.render("AL2", CLUSTER, NODE, user))
    assert [ct for ct, _ in parts] == ["text/x-shellscript", "text/cloud-config", "text/x-shellscript"]
    assert "echo one" in parts[0][1] and "packages: [jq]" in parts[1][1]


def test_al2_without_kubelet_settings_lets_bootstrap_compute_max_pods():
    node = userdata.NodeBootstrap(labels={"karpenter.sh/nodepool": "default"})
    args = bootstrap_args(mime_parts(userdata.render("AL2", CLUSTER, node))[-1][1])
    assert "--use-max-pods" not in args
    assert "--max-pods" not in " ".join(args)


def test_al2023_nodeconfig():
    parts = mime_parts(userdata.render("AL2023", CLUSTER, NODE))
    assert [ct for ct, _ in parts] == ["application/node.eks.aws"]
    doc = yaml.safe_load(parts[0][1])
    assert doc["apiVersion"] == "node.eks.aws/v1alpha1" and doc["kind"] == "NodeConfig"
    assert doc["spec"]["cluster"] == {
        "name": "demo-cluster",
        "apiServerEndpoint": CLUSTER.endpoint,
        "certificateAuthority": CLUSTER.ca_data,
        "cidr": "10.100.0.0/16",
    }
    config = doc["spec"]["kubelet"]["config"]
    assert config["maxPods"] == 58
    assert config["clusterDNS"] == ["10.100.0.10"]
    assert config["systemReserved"] == {"cpu": "100m", "memory": "100Mi"}
    assert config["evictionHard"] == {"memory.available": "5%"}
    flags = flag_map(doc["spec"]["kubelet"]["flags"])
    assert kv(flags["--node-labels"]) == EXPECTED_LABELS
    assert flags["--register-with-taints"].split(",") == EXPECTED_TAINTS


def test_al2023_keeps_the_users_nodeconfig_and_script_before_ours():
    user_config = (
        "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n"
        "  kubelet:\n    config:\n      shutdownGracePeriod: 30s\n"
    )
    parts = mime_parts(userdata.render("AL2023", CLUSTER, NODE, user_config))
    assert [ct for ct, _ in parts] == ["application/node.eks.aws", "application/node.eks.aws"]
    assert yaml.safe_load(parts[0][1])["spec"]["kubelet"]["config"] == {"shutdownGracePeriod": "30s"}
    assert yaml.safe_load(parts[1][1])["spec"]["cluster"]["name"] == "demo-cluster"
    script = userdata.render("AL2023", CLUSTER, NODE, "#!/bin/bash\necho hi\n")
    assert [ct for ct, _ in mime_parts(script)] == ["text/x-shellscript", "application/node.eks.aws"]


def test_bottlerocket_toml():
    settings = tomllib.loads(userdata.render("Bottlerocket", CLUSTER, NODE))["settings"]["kubernetes"]
    assert settings["cluster-name"] == "demo-cluster"
    assert settings["api-server"] == CLUSTER.endpoint
    assert settings["cluster-certificate"] == CLUSTER.ca_data
    assert settings["cluster-dns-ip"] == "10.100.0.10"
    assert settings["max-pods"] == 58
    assert settings["node-labels"] == EXPECTED_LABELS
    assert settings["node-taints"] == {
        "nvidia.com/gpu": ["true:NoSchedule"],
        "example.com/not-ready": [":NoExecute"],
        "karpenter.sh/unregistered": [":NoExecute"],
    }
    assert settings["eviction-hard"] == {"memory.available": "5%"}
    assert settings["system-reserved"] == {"cpu": "100m", "memory": "100Mi"}


def test_bottlerocket_merges_the_users_toml_with_ours_winning_on_our_keys():
    user = (
        '[settings.kubernetes]\ncluster-name = "someone-else"\nmax-pods = 5\n'
        '[settings.kubernetes.node-labels]\n"owner" = "me"\n"team" = "not-ml"\n'
        '[settings.host-containers.admin]\nenabled = true\n'
    )
    doc = tomllib.loads(userdata.render("Bottlerocket", CLUSTER, NODE, user))
    k8s = doc["settings"]["kubernetes"]
    assert k8s["cluster-name"] == "demo-cluster" and k8s["max-pods"] == 58
    assert k8s["node-labels"] == {**EXPECTED_LABELS, "owner": "me"}
    assert doc["settings"]["host-containers"]["admin"]["enabled"] is True


def test_bottlerocket_bad_toml_names_the_field():
    with pytest.raises(userdata.UserDataError, match="ssm:/x#1.userData: Bottlerocket user data must be TOML"):
        userdata.render("Bottlerocket", CLUSTER, NODE, "this is = = not toml", where="ssm:/x#1.userData")


def test_windows_powershell_with_the_users_commands_first():
    text = userdata.render("Windows2022", CLUSTER, NODE, "<powershell>\nWrite-Host 'mine'\n</powershell>")
    assert text.startswith("<powershell>\n") and text.rstrip().endswith("</powershell>")
    assert text.count("<powershell>") == 1
    lines = text.splitlines()
    mine = lines.index("Write-Host 'mine'")
    assert lines[mine + 1] == '[string]$EKSBootstrapScriptFile = "$env:ProgramFiles\\Amazon\\EKS\\Start-EKSBootstrap.ps1"'
    call = lines[mine + 2]
    assert call.startswith("& $EKSBootstrapScriptFile -EKSClusterName 'demo-cluster'")
    assert f"-APIServerEndpoint '{CLUSTER.endpoint}'" in call and f"-Base64ClusterCA '{CLUSTER.ca_data}'" in call
    extra = re.search(r"-KubeletExtraArgs '([^']*)'", call).group(1)
    flags = flag_map(extra.split(" "))
    assert kv(flags["--node-labels"]) == EXPECTED_LABELS
    assert flags["--register-with-taints"].split(",") == EXPECTED_TAINTS
    assert flags["--max-pods"] == "58"
    assert "-DNSClusterIP '10.100.0.10'" in call


def test_custom_family_passes_the_users_data_unchanged():
    raw = "#!/bin/bash\n/opt/my-own-join.sh\n"
    assert userdata.render("Custom", CLUSTER, NODE, raw) == raw


def test_cluster_dns_from_kubelet_settings_wins_over_the_service_range():
    node = userdata.NodeBootstrap(labels={"a": "b"}, kubelet=KubeletSettings(cluster_dns=("169.254.20.10",)))
    args = bootstrap_args(mime_parts(userdata.render("AL2", CLUSTER, node))[-1][1])
    assert args[args.index("--dns-cluster-ip") + 1] == "169.254.20.10"
    assert dns_ip_for("172.20.0.0/16") == "172.20.0.10"
    assert dns_ip_for("fd00:1234::/108") == "fd00:1234::a"


def test_rendering_is_deterministic():
    assert userdata.render("AL2023", CLUSTER, NODE, "#!/bin/bash\n") == userdata.render(
        "AL2023", CLUSTER, NODE, "#!/bin/bash\n"
    )


def test_raid0_instance_store_policy_reaches_al2_and_al2023():
    node = userdata.bootstrap_for(POOL, NodeClass("nvme", "AL2", instance_store_policy="RAID0"))
    args = bootstrap_args(mime_parts(userdata.render("AL2", CLUSTER, node))[-1][1])
    assert args[args.index("--local-disks") + 1] == "raid0"
    doc = yaml.safe_load(mime_parts(userdata.render("AL2023", CLUSTER, node))[-1][1])
    assert doc["spec"]["instance"] == {"localStorage": {"strategy": "RAID0"}}
    assert "--local-disks" not in userdata.render("AL2", CLUSTER, NODE)


def test_ubuntu_uses_the_bootstrap_script_and_unknown_families_are_refused():
    assert "/etc/eks/bootstrap.sh 'demo-cluster'" in userdata.render("Ubuntu", CLUSTER, NODE)
    with pytest.raises(userdata.UserDataError, match="no user data format for AMI family 'Flatcar'"):
        userdata.render("Flatcar", CLUSTER, NODE)


@pytest.mark.parametrize("family", ["AL2", "AL2023", "Bottlerocket", "Windows"])
def test_every_family_registers_with_the_unregistered_taint(family: str) -> None:
    """#30.4: every AMI family's user data makes the kubelet register with karpenter.sh/unregistered:NoExecute,
    also for a pool without taints of its own, and the pool's taints stay, once each. Restates the behaviour
    of aws/karpenter-provider-aws pkg/providers/amifamily/resolver.go (the unregistered taint added to every
    launch's taints) and its launchtemplate suite_test.go kubelet-taint checks per family; read back as the
    node reads it (sim/nodes/userdata)."""
    bare = NodePool(name="plain", requirements=Requirements([]), node_class="plain")
    for pool in (bare, POOL):
        node_class = NodeClass(pool.node_class, family)
        text = userdata.render(family, CLUSTER, userdata.bootstrap_for(pool, node_class), None)
        taints = node_reads.parse(text).taints
        assert {"key": "karpenter.sh/unregistered", "effect": "NoExecute"} in taints, (family, taints)
        keys = [(t["key"], t["effect"]) for t in taints]
        assert len(keys) == len(set(keys)) == len(pool.taints) + len(pool.startup_taints) + 1


def _bottlerocket_raid0(alias: str | None, user: str | None = None) -> dict:
    terms = (SelectorTerm(alias=alias),) if alias else (SelectorTerm(id="ami-0123456789abcdef0"),)
    nc = NodeClass("nvme", "Bottlerocket", instance_store_policy="RAID0", ami_selector_terms=terms)
    return tomllib.loads(userdata.render("Bottlerocket", CLUSTER, userdata.bootstrap_for(POOL, nc), user))["settings"]


def test_raid0_on_bottlerocket_mounts_the_instance_store():
    """#31.5. Restates aws/karpenter-provider-aws pkg/providers/launchtemplate/suite_test.go, It "should
    specify RAID0 bootstrap-command when instance-store policy is set on Bottlerocket": with
    ``bottlerocket@latest`` the bootstrap command initialises the instance store and binds the default
    directories onto it, on every boot, essential."""
    settings = _bottlerocket_raid0("bottlerocket@latest")
    assert settings["bootstrap-commands"] == {"000-mount-instance-storage": {
        "commands": [["apiclient", "ephemeral-storage", "init"], ["apiclient", "ephemeral-storage", "bind"]],
        "mode": "always", "essential": True}}
    assert "bootstrap-commands" not in tomllib.loads(userdata.render("Bottlerocket", CLUSTER, NODE))["settings"]


def test_raid0_on_an_older_or_unknown_bottlerocket_names_the_directories():
    """#31.5. As the provider's Bottlerocket user data (pkg/providers/amifamily/bootstrap/bottlerocket.go, and
    version.SupportsDefaultBind: v1.46.0 and later bind default directories): an older alias, or no alias
    (version unknown), binds /var/lib/containerd, /var/lib/kubelet and /var/log/pods by name."""
    named = ["apiclient", "ephemeral-storage", "bind", "--dirs", "/var/lib/containerd", "/var/lib/kubelet",
             "/var/log/pods"]
    for alias in ("bottlerocket@v1.45.0", None):
        assert _bottlerocket_raid0(alias)["bootstrap-commands"]["000-mount-instance-storage"]["commands"][1] == named
    newer = _bottlerocket_raid0("bottlerocket@v1.46.0")["bootstrap-commands"]["000-mount-instance-storage"]
    assert newer["commands"][1] == ["apiclient", "ephemeral-storage", "bind"]


def test_the_bottlerocket_version_comes_from_the_images_name_without_an_alias():
    """#31.5 (Bottlerocket version). Restates aws/karpenter-provider-aws pkg/providers/amifamily/
    bottlerocket_test.go, Describe "resolveAMIVersion", It "should resolve version from name", "should resolve
    version from ID with resolved AMI", "should resolve version from resolved AMI fallback", "should return
    empty when no version found" and "should resolve version from alias": an alias wins, else the release in
    the image's name, else unknown (the directories named)."""
    by_id = userdata.bootstrap_for(POOL, NodeClass("nvme", "Bottlerocket", instance_store_policy="RAID0",
                                                   ami_selector_terms=(SelectorTerm(id="ami-12345"),)))

    def bind(node: userdata.NodeBootstrap) -> list[str]:
        settings = tomllib.loads(userdata.render("Bottlerocket", CLUSTER, node))["settings"]
        return settings["bootstrap-commands"]["000-mount-instance-storage"]["commands"][1]

    named = ["apiclient", "ephemeral-storage", "bind", "--dirs", "/var/lib/containerd", "/var/lib/kubelet",
             "/var/log/pods"]
    assert bind(userdata.for_image(by_id, "bottlerocket-aws-k8s-1.33-x86_64-v1.46.0-431fe75a")) == named[:3]
    assert bind(userdata.for_image(by_id, "bottlerocket-aws-k8s-1.30-arm64-v2.0.1-def456")) == named[:3]
    assert bind(userdata.for_image(by_id, "bottlerocket-aws-k8s-1.33-x86_64-v1.45.2-431fe75a")) == named
    for unparsable in ("some-other-ami", "bottlerocket-aws-k8s-1.33-x86_64-v1.46-beta", ""):
        assert bind(userdata.for_image(by_id, unparsable)) == named
    old_alias = userdata.bootstrap_for(POOL, NodeClass("nvme", "Bottlerocket", instance_store_policy="RAID0",
                                                       ami_selector_terms=(SelectorTerm(alias="bottlerocket@v1.45.0"),)))
    assert bind(userdata.for_image(old_alias, "bottlerocket-aws-k8s-1.33-x86_64-v1.46.0-431fe75a")) == named


def test_raid0_on_bottlerocket_keeps_the_users_bootstrap_commands():
    """#31.5. Restates aws/karpenter-provider-aws pkg/providers/launchtemplate/suite_test.go, It "should merge
    bootstrap-commands when instance-store policy is set on Bottlerocket"."""
    user = "[settings.bootstrap-commands.111-say-hello]\ncommands = [['echo', 'hello']]\nmode = 'always'\nessential = true\n"
    commands = _bottlerocket_raid0("bottlerocket@latest", user)["bootstrap-commands"]
    assert sorted(commands) == ["000-mount-instance-storage", "111-say-hello"]
    assert commands["111-say-hello"] == {"commands": [["echo", "hello"]], "mode": "always", "essential": True}


def _typed(name: str, pods: int) -> InstanceType:
    return InstanceType(name, {}, {"cpu": 2000, "pods": pods}, {}, ())


ENI_TYPES = [_typed("m5.large", 29), _typed("t3.small", 11), _typed("m5a.large", 29)]
PLAIN = userdata.NodeBootstrap(labels={"karpenter.sh/nodepool": "default"})


def test_types_are_grouped_by_the_pods_the_planner_counted_unless_the_kubelet_sets_max_pods():
    """#31.5: aws/karpenter-provider-aws pkg/providers/launchtemplate (resolver.go groups the instance types by
    their pods capacity, one launch template per distinct max-pods); suite_test.go's tests with a user
    kubelet maxPods: the user's maxPods is written as given, one group."""
    groups = userdata.max_pods_groups(PLAIN, "AL2023", ENI_TYPES)
    assert [(n, [t.name for t in ts]) for n, ts in groups] == [(11, ["t3.small"]), (29, ["m5.large", "m5a.large"])]
    user = userdata.NodeBootstrap(kubelet=KubeletSettings(max_pods=58))
    assert userdata.max_pods_groups(user, "AL2023", ENI_TYPES) == [(None, tuple(ENI_TYPES))]
    assert userdata.max_pods_groups(PLAIN, "Custom", ENI_TYPES) == [(None, tuple(ENI_TYPES))]


def test_al2_writes_the_eni_limited_max_pods_and_turns_the_scripts_own_off():
    """#31.5: aws/karpenter-provider-aws pkg/providers/launchtemplate/suite_test.go "should specify
    --use-max-pods=false when using ENI-based pod density" and "should specify --max-pods" (ENI-limited):
    bootstrap.sh is told not to compute its own, and the kubelet gets the type's count."""
    args = bootstrap_args(mime_parts(userdata.render("AL2", CLUSTER, userdata.with_max_pods(PLAIN, 29)))[-1][1])
    assert args[args.index("--use-max-pods") + 1] == "false"
    assert "--max-pods=29" in args[args.index("--kubelet-extra-args") + 1].split()


def test_al2023_bottlerocket_and_windows_write_the_types_max_pods_in_their_own_formats():
    """#31.5: the same count in nodeadm's NodeConfig (kubelet config maxPods), Bottlerocket's
    settings.kubernetes.max-pods and the Windows bootstrap's -KubeletExtraArgs, as Karpenter writes each."""
    node = userdata.with_max_pods(PLAIN, 11)
    (config,) = [yaml.safe_load(b) for t, b in mime_parts(userdata.render("AL2023", CLUSTER, node))
                 if t == "application/node.eks.aws"]
    assert config["spec"]["kubelet"]["config"]["maxPods"] == 11
    assert tomllib.loads(userdata.render("Bottlerocket", CLUSTER, node))["settings"]["kubernetes"]["max-pods"] == 11
    assert re.search(r"-KubeletExtraArgs '[^']*--max-pods=11", userdata.render("Windows2022", CLUSTER, node))
    assert userdata.with_max_pods(PLAIN, None) is PLAIN
