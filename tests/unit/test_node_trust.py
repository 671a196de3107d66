"""Which Node speaks for an instance (#27.5): named for it, and the only one so named."""

from __future__ import annotations

import pytest

from nodescale.model.node import ClusterNode, name_matches_instance, trust_nodes

IID = "i-0a1b2c3d4e5f60718"
DNS = "ip-10-0-0-1.ec2.internal"


def node(name: str, iid: str = IID) -> ClusterNode:
    return ClusterNode.from_dict({"metadata": {"name": name}, "spec": {"providerID": f"aws:///us-east-1a/{iid}"}})


@pytest.mark.parametrize(("name", "dns", "matches"), [
    (DNS, DNS, True),  # EKS's default: kubelet registers under EC2's PrivateDnsName
    ("IP-10-0-0-1.EC2.INTERNAL", DNS, True),  # DNS names are case-insensitive
    (f"{IID}.ec2.internal", f"{IID}.ec2.internal", True),  # a resource-name subnet's PrivateDnsName
    (f"{IID}.ec2.internal", DNS, True),  # resource-based hostname in the instance's domain
    (IID, DNS, True),  # named by the instance id (EKS Auto Mode)
    (IID, "", True),
    ("ip-10-0-0-2.ec2.internal", DNS, False),  # another instance's name
    ("impostor", DNS, False),
    (f"{IID}.evil.example", DNS, False),  # the id in a domain not the instance's
    ("i-0ffffffffffffffff", DNS, False),
    ("", DNS, False),
])
def test_a_nodes_name_matches_its_instance_only_as_eks_names_it(name: str, dns: str, matches: bool) -> None:
    """#27.5: the matching rule, for IP-based and resource-based hostnames."""
    assert name_matches_instance(name, IID, dns) is matches


def test_an_impostor_beside_the_real_node_is_untrusted_and_the_real_one_trusted() -> None:
    """#27.5: order does not matter: the last Node naming an instance no longer wins."""
    for nodes in ([node(DNS), node("impostor")], [node("impostor"), node(DNS)]):
        trust = trust_nodes(nodes, {IID: DNS})
        assert trust.trusted[IID] is nodes[0 if nodes[0].name == DNS else 1]  # the typed Node itself (#29.1)
        assert list(trust.untrusted) == ["impostor"] and IID in trust.untrusted["impostor"]


def test_an_impostor_alone_is_untrusted_and_nothing_speaks_for_the_instance() -> None:
    """#27.5"""
    trust = trust_nodes([node("impostor")], {IID: DNS})
    assert trust.trusted == {} and "not instance" in trust.untrusted["impostor"]


def test_two_nodes_both_named_for_the_instance_are_both_untrusted() -> None:
    """#27.5: one by its DNS name, one by its id: neither can be told to be the real one."""
    trust = trust_nodes([node(DNS), node(IID)], {IID: DNS})
    assert trust.trusted == {} and sorted(trust.untrusted) == sorted([DNS, IID])


def test_nodes_of_instances_not_known_are_neither_trusted_nor_warned_about() -> None:
    """#27.5: another cluster's or another system's instances are not ours to judge."""
    trust = trust_nodes([node("whatever", "i-0ffffffffffffffff"), ClusterNode.from_dict({"metadata": {"name": "x"}})],
                        {IID: DNS})
    assert trust.trusted == {} and trust.untrusted == {}
