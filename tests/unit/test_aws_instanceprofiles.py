"""Which instance profile a node class launches with; Windows node classes never take the Linux one."""

from __future__ import annotations

import pytest

from nodescale.aws import instanceprofiles
from nodescale.aws.instanceprofiles import InstanceProfileError
from nodescale.model.nodepool import NodeClass


class FakeIam:
    def __init__(self, profiles: dict[str, list[str]]) -> None:
        self.profiles = profiles

    def list_instance_profiles_for_role(self, RoleName: str) -> dict:  # noqa: N803 - boto3's spelling
        return {"InstanceProfiles": [{"InstanceProfileName": n} for n in self.profiles.get(RoleName, [])]}


def node_class(**fields: object) -> NodeClass:
    return NodeClass(name="win", ami_family="Windows2022", source="test:EC2NodeClass/win", **fields)


def test_a_windows_node_class_takes_the_stacks_windows_profile() -> None:
    got = instanceprofiles.resolve(FakeIam({}), node_class(), "linux-profile", "windows-profile", windows=True)
    assert got == "windows-profile"


def test_a_linux_node_class_takes_the_linux_profile() -> None:
    got = instanceprofiles.resolve(FakeIam({}), node_class(), "linux-profile", "windows-profile", windows=False)
    assert got == "linux-profile"


def test_a_windows_node_class_without_a_windows_profile_is_refused_not_given_the_linux_one() -> None:
    # The Linux role's access entry is EC2_LINUX: a Windows node launched with it would not join as Windows.
    with pytest.raises(InstanceProfileError, match=r"test:EC2NodeClass/win: a Windows node class needs .*-c windows=true"):
        instanceprofiles.resolve(FakeIam({}), node_class(), "linux-profile", None, windows=True)


def test_the_node_classs_own_profile_or_role_comes_first() -> None:
    own = instanceprofiles.resolve(FakeIam({}), node_class(instance_profile="own"), "l", "w", windows=True)
    assert own == "own"
    by_role = instanceprofiles.resolve(FakeIam({"WinRole": ["win-role-profile"]}), node_class(role="WinRole"),
                                       "l", "w", windows=True)
    assert by_role == "win-role-profile"
