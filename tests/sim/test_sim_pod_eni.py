"""#31.2/#31.3: sim's nodes advertise ``vpc.amazonaws.com/pod-eni`` as the VPC resource controller does on EKS:
a Linux node of a trunk-compatible type offers its branch interfaces; Windows nodes offer none (security
groups for pods are Linux-only on EKS)."""

from __future__ import annotations

from sim.nodes.capacity import POD_ENI, node_resources
from tests.sim.test_sim_userdata_capacity import M5_LARGE


def test_a_linux_node_with_branch_interfaces_advertises_them() -> None:
    res = node_resources(M5_LARGE, branch_interfaces=9)
    assert res.capacity[POD_ENI] == res.allocatable[POD_ENI] == "9"


def test_a_node_without_branch_interfaces_or_on_windows_advertises_none() -> None:
    assert POD_ENI not in node_resources(M5_LARGE).capacity
    windows = node_resources(M5_LARGE, windows=True, branch_interfaces=9)
    assert POD_ENI not in windows.capacity and POD_ENI not in windows.allocatable
