"""`cdk synth` refuses what the functions would refuse, so a broken NodePool file or limit fails the deploy
instead of being written to SSM and refused at run time.

The NodePool files go through the layer's own validator (nodescale.config.loader.validate: Karpenter's CRD
schemas as `kubectl apply --validate=strict` applies them, plus nodescale's value checks); the cluster
limits through the functions' own parse_limits.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from infra.config import ConfigError, StackConfig
from tests.cdk.conftest import FIXTURES


def _config(tmp_path: Path, text: str, **context: str) -> StackConfig:
    (tmp_path / "pools.yaml").write_text(text)
    values = {"clusterName": "c", "nodePoolFiles": "pools.yaml", **context}
    return StackConfig.from_context(values.get, base_dir=tmp_path)


def _fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_the_fixture_files_are_accepted(tmp_path: Path) -> None:
    for name in ("default.yaml", "windows.yaml"):
        assert _config(tmp_path, _fixture(name)).nodepool_files


def test_a_provisioner_without_a_name_fails_the_synth(tmp_path: Path) -> None:
    # Karpenter's CRD (like every object) requires metadata.name; the functions refuse the pool.
    text = "apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nspec:\n  providerRef: {name: default}\n"
    with pytest.raises(ConfigError) as error:
        _config(tmp_path, text)
    message = str(error.value)
    assert message.startswith(f"nodePoolFiles: {tmp_path / 'pools.yaml'}#0: metadata.name: is required")
    assert "\n" not in message


def test_a_misspelled_field_fails_the_synth_naming_file_path_and_the_valid_name(tmp_path: Path) -> None:
    text = _fixture("default.yaml").replace("requirements:", "requirments:", 1)
    assert text != _fixture("default.yaml")
    with pytest.raises(ConfigError) as error:
        _config(tmp_path, text)
    assert str(error.value) == (
        f"nodePoolFiles: {tmp_path / 'pools.yaml'}#0: spec.template.spec.requirments: unknown field; "
        "did you mean requirements?"
    )


def test_a_misspelled_kind_fails_the_synth_suggesting_the_kind(tmp_path: Path) -> None:
    text = _fixture("default.yaml").replace("kind: NodePool", "kind: NodePol", 1)
    with pytest.raises(ConfigError, match=r"document 0 has kind 'NodePol'; did you mean NodePool\?"):
        _config(tmp_path, text)


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        ('{"cpu": "-1"}', "clusterLimits: cpu='-1' must not be negative"),
        ('{"pricePerHour": "-5"}', "clusterLimits: pricePerHour='-5' must not be negative"),
        ('{"memory": "lots"}', "clusterLimits: memory='lots' is not a valid amount"),
    ],
)
def test_a_cluster_limit_the_functions_refuse_fails_the_synth(limits: str, message: str) -> None:
    with pytest.raises(ConfigError) as error:
        StackConfig.from_context({"clusterName": "c", "clusterLimits": limits}.get)
    assert str(error.value).startswith(message)


def test_the_cluster_limits_the_functions_accept_are_accepted() -> None:
    config = StackConfig.from_context({"clusterName": "c", "clusterLimits": '{"cpu": "2000", "memory": "4Ti", '
                                       '"nodes": 0, "pricePerHour": "50.5"}'}.get)
    assert config.cluster_limits == {"cpu": "2000", "memory": "4Ti", "nodes": "0", "pricePerHour": "50.5"}


def test_an_alias_bomb_fails_the_synth_at_once_naming_the_file_and_the_limit(tmp_path: Path) -> None:
    """#27.2: nine levels of nine aliases kept the synth (and every function) busy for minutes."""
    import time

    from tests.unit.test_config_bounded_yaml import alias_bomb

    start = time.monotonic()
    with pytest.raises(ConfigError) as error:
        _config(tmp_path, _fixture("default.yaml") + "---\n" + alias_bomb())
    assert time.monotonic() - start < 1
    message = str(error.value)
    assert message.startswith(f"nodePoolFiles: {tmp_path / 'pools.yaml'}#2: line ")
    assert "document contains excessive aliasing" in message and "\n" not in message


def test_a_key_given_twice_fails_the_synth_naming_it(tmp_path: Path) -> None:
    """#27.2: the last `weight:` used to win silently."""
    text = _fixture("default.yaml").replace("spec:\n", "spec:\n  weight: 1\n  weight: 2\n", 1)
    with pytest.raises(ConfigError, match=r"#0: line \d+, column 3: key 'weight' given again in the same mapping"):
        _config(tmp_path, text)


_OVERLAY = """apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata:
  name: cheap-m5
spec:
  requirements:
    - {{key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}}
  {setting}
"""


def test_two_overlays_of_one_name_fail_the_synth_naming_both(tmp_path: Path) -> None:
    """#29.5: the synth check never collected NodeOverlays, so both passed and were dropped at run time."""
    text = _fixture("default.yaml") + "---\n" + _OVERLAY.format(setting="price: '0.01'") + "---\n" \
        + _OVERLAY.format(setting="priceAdjustment: -10%")
    assert _config(tmp_path, _fixture("default.yaml") + "---\n" + _OVERLAY.format(setting="price: '0.01'"))
    with pytest.raises(ConfigError) as error:
        _config(tmp_path, text)
    file = tmp_path / "pools.yaml"
    assert str(error.value) == (
        f'nodePoolFiles: {file}#3: metadata.name: NodeOverlay "cheap-m5" is also defined at {file}#2; '
        "a name may be defined once, so neither definition is used"
    )


def test_an_overlay_for_windows_types_asks_for_no_windows_nodes(tmp_path: Path) -> None:
    """#29.5: NodeOverlays now reach the synth; one pricing Windows types is no Windows NodePool."""
    windows = "requirements:\n    - {key: kubernetes.io/os, operator: In, values: [windows]}\n  price: '0.01'"
    text = _fixture("default.yaml") + "---\n" + _OVERLAY.format(setting="weight: 1").replace(
        "requirements:\n    - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}", windows)
    assert "windows" in text
    assert not _config(tmp_path, text).windows_nodes


_NODE_CLASS = """apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: workers
spec:
  {identity}
  amiSelectorTerms:
    - alias: al2023@latest
  subnetSelectorTerms:
    - tags: {{karpenter.sh/discovery: c}}
  securityGroupSelectorTerms:
    - tags: {{karpenter.sh/discovery: c}}
"""


@pytest.mark.parametrize("role, why", [
    ("nodescale-c-provisioner", "is a nodescale function's role"),
    ("arn:aws:iam::111122223333:user/KarpenterNodeRole-c", "is not an IAM role name"),
    ("Karpenter Node Role", "is not an IAM role name"),
])
def test_a_node_class_naming_a_role_the_stack_will_not_pass_fails_the_synth(tmp_path: Path, role: str, why: str) -> None:
    """#28.1: one line naming the file, the node class and the role."""
    with pytest.raises(ConfigError) as error:
        _config(tmp_path, _NODE_CLASS.format(identity=f"role: {role}"))
    message = str(error.value)
    assert message.startswith(f"nodePoolFiles: {tmp_path / 'pools.yaml'}: EC2NodeClass workers: role {role!r} {why}")
    assert "\n" not in message


def test_a_node_class_naming_a_role_is_granted_that_role(tmp_path: Path) -> None:
    """#28.1: the roles the files name, then -c nodeRoles', are what the stack lets the functions pass."""
    config = _config(tmp_path, _NODE_CLASS.format(identity="role: KarpenterNodeRole-c"), nodeRoles="FromTheCluster")
    assert config.named_node_roles == ("KarpenterNodeRole-c", "FromTheCluster")


def test_an_instance_profile_not_the_stacks_needs_its_role_in_context(tmp_path: Path) -> None:
    """#28.1: a node class naming an instance profile (every v1alpha5 AWSNodeTemplate that names one) launches
    with that profile's role, which the stack cannot read at synth: without -c nodeRoles the synth refuses,
    naming the file, the node class and the profile; with it, that role is granted."""
    text = _NODE_CLASS.format(identity="instanceProfile: KarpenterNodeInstanceProfile-c")
    with pytest.raises(ConfigError) as error:
        _config(tmp_path, text)
    message = str(error.value)
    assert message.startswith(f"nodePoolFiles: {tmp_path / 'pools.yaml'}: EC2NodeClass workers: instanceProfile "
                              "'KarpenterNodeInstanceProfile-c' is not the stack's")
    assert "-c nodeRoles=" in message and "\n" not in message
    assert _config(tmp_path, text, nodeRoles="KarpenterNodeRole-c").named_node_roles == ("KarpenterNodeRole-c",)
    # The stack's own profile needs nothing more.
    assert _config(tmp_path, _NODE_CLASS.format(identity="instanceProfile: nodescale-c-node")).named_node_roles == ()


def test_a_bad_node_role_in_context_is_named() -> None:
    with pytest.raises(ConfigError, match=r"^nodeRoles: 'nodescale-c-disruption' is a nodescale function's role"):
        StackConfig.from_context({"clusterName": "c", "nodeRoles": "nodescale-c-disruption"}.get)
