"""The bundled EC2 catalog: labels as Karpenter sets them, capacity and allocatable as EKS nodes report."""

from __future__ import annotations

import gzip
import json
import time
from pathlib import Path

import moto
import pytest

from nodescale.aws import catalog, pricing
from nodescale.model import labels as wk
from nodescale.model import nodecapacity
from nodescale.model import resources as res
from nodescale.model.catalog_facts import TypeFacts, facts_from_describe
from nodescale.model.instancetype import WindowsFamilyError, windows_build
from nodescale.model.nodepool import KubeletSettings
from nodescale.model.requirements import Requirement, Requirements

MIB = 2**20
GIB = 2**30
K = "karpenter.k8s.aws/"
MOTO_EC2 = Path(moto.__file__).parent / "ec2" / "resources"
DATA = Path(catalog.__file__).resolve().parent.parent / "data"


@pytest.fixture(scope="module")
def us_east_1() -> dict:
    # Measure a cold load even when another test in this process already filled the caches.
    for cached in (catalog._bundle, catalog._bundled_facts, catalog._bundled_catalog, pricing._bundled_table):
        cached.cache_clear()
    start = time.perf_counter()
    types = catalog.bundled_catalog("us-east-1")
    # Reported, not asserted: a Lambda cold start pays this once (it was about 0.05 s when written).
    print(
        f"\nbundled_catalog('us-east-1') first load: {time.perf_counter() - start:.3f} s for {len(types)} types"
    )
    return {it.name: it for it in types}


def _labels(it) -> dict[str, str]:
    return {k.removeprefix(K): v for k, v in it.labels.items() if k.startswith(K)}


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (
            "m5.large",
            {
                "instance-category": "m",
                "instance-family": "m5",
                "instance-generation": "5",
                "instance-size": "large",
                "instance-cpu": "2",
                "instance-memory": "8192",
                "instance-cpu-manufacturer": "intel",
                "instance-hypervisor": "nitro",
                "instance-network-bandwidth": "750",
                "instance-encryption-in-transit-supported": "false",
            },
        ),
        (
            "m6g.16xlarge",
            {
                "instance-category": "m",
                "instance-family": "m6g",
                "instance-generation": "6",
                "instance-size": "16xlarge",
                "instance-cpu": "64",
                "instance-memory": "262144",
                "instance-cpu-manufacturer": "aws",
                "instance-network-bandwidth": "25000",
            },
        ),
        (
            "p3.8xlarge",
            {
                "instance-family": "p3",
                "instance-generation": "3",
                "instance-gpu-name": "v100",
                "instance-gpu-manufacturer": "nvidia",
                "instance-gpu-count": "4",
                "instance-gpu-memory": "16384",
                "instance-hypervisor": "xen",
            },
        ),
        (
            "g4dn.xlarge",
            {
                "instance-category": "g",
                "instance-family": "g4dn",
                "instance-generation": "4",
                "instance-gpu-name": "t4",
                "instance-gpu-count": "1",
                "instance-local-nvme": "125",
                "instance-network-bandwidth": "5000",
            },
        ),
        (
            "c5a.large",
            {"instance-category": "c", "instance-family": "c5a", "instance-cpu-manufacturer": "amd"},
        ),
        ("t3.micro", {"instance-family": "t3", "instance-size": "micro", "instance-memory": "1024"}),
        ("inf2.xlarge", {"instance-category": "inf", "instance-family": "inf2", "instance-generation": "2"}),
        ("m5.metal", {"instance-size": "metal", "instance-hypervisor": "", "instance-cpu": "96"}),
        (
            "u-6tb1.112xlarge",
            {
                "instance-category": "u",
                "instance-family": "u-6tb1",
                "instance-generation": "1",
                "instance-size": "112xlarge",
            },
        ),
        (
            "p6-b200.48xlarge",
            {"instance-category": "p", "instance-family": "p6-b200", "instance-generation": "6"},
        ),
        ("g7.2xlarge", {"instance-gpu-name": "rtx-pro-4500", "instance-gpu-manufacturer": "nvidia"}),
    ],
)
def test_labels_derived_like_karpenter(us_east_1, name, expected):
    labels = _labels(us_east_1[name])
    assert {k: labels.get(k) for k in expected} == expected
    assert us_east_1[name].labels[wk.INSTANCE_TYPE] == name
    assert us_east_1[name].labels[wk.REGION] == "us-east-1"


def test_types_without_a_gpu_have_no_gpu_labels(us_east_1):
    assert not any(k.startswith(K + "instance-gpu") for k in us_east_1["m5.large"].labels)
    assert K + "instance-local-nvme" not in us_east_1["m5.large"].labels


def test_architecture_label(us_east_1):
    assert us_east_1["m5.large"].labels[wk.ARCH] == "amd64"
    assert us_east_1["m6g.16xlarge"].labels[wk.ARCH] == "arm64"


def test_mac_name_scheme_and_exclusion(us_east_1):
    # mac2-m2 follows the category/generation scheme (mac, 2) but no Kubernetes node runs macOS.
    facts = catalog.bundled_facts_by_name()["mac2-m2.metal"]
    labels = catalog.ec2_labels(facts)
    assert (labels[K + "instance-category"], labels[K + "instance-generation"]) == ("mac", "2")
    assert labels[K + "instance-family"] == "mac2-m2"
    assert not any(n.startswith("mac") for n in us_east_1)


def test_pod_requiring_a_gpu_is_incompatible_with_a_type_without_one(us_east_1):
    wants_t4 = Requirements([Requirement.create(K + "instance-gpu-name", "In", ["t4"])])
    assert us_east_1["g4dn.xlarge"].requirements.compatible(wants_t4)
    assert not us_east_1["m5.large"].requirements.compatible(wants_t4)
    avoids_t4 = Requirements([Requirement.create(K + "instance-gpu-name", "NotIn", ["t4"])])
    assert us_east_1["m5.large"].requirements.compatible(avoids_t4)


def test_m5_large_allocatable_matches_an_eks_al2_node(us_east_1):
    """m5.large on the EKS AL2 AMI, as Karpenter computes it:
    - pods: 3 ENIs x (10 IPv4 - 1) + 2 = 29 (eni-max-pods.txt says 29)
    - cpu: 2000m - kube-reserved (60m for core 1 + 10m for core 2) = 1930m (what the node reports)
    - memory: 8192Mi - 615Mi VM overhead (7.5 %) = 7577Mi capacity;
      minus kube-reserved 11 x 29 + 255 = 574Mi and the 100Mi eviction threshold = 6903Mi
    - ephemeral-storage: 20Gi root volume - 1Gi kube-reserved - 2Gi (nodefs.available 10 %) = 17Gi
    - vpc.amazonaws.com/pod-eni: 9 branch interfaces (the VPC resource controller's table; #31.3)
    """
    m5 = us_east_1["m5.large"]
    assert m5.capacity == {
        res.CPU: 2000,
        res.MEMORY: 7577 * MIB,
        res.EPHEMERAL_STORAGE: 20 * GIB,
        res.PODS: 29,
        res.POD_ENI: 9,
    }
    assert m5.allocatable == {
        res.CPU: 1930,
        res.MEMORY: 6903 * MIB,
        res.EPHEMERAL_STORAGE: 17 * GIB,
        res.PODS: 29,
        res.POD_ENI: 9,
    }


def test_graviton_loses_cma_memory(us_east_1):
    # 262144Mi - 64Mi CMA = 262080Mi, minus ceil(7.5 %) = 19656Mi -> 242424Mi
    assert us_east_1["m6g.16xlarge"].capacity[res.MEMORY] == 242424 * MIB


def test_accelerators_are_resources(us_east_1):
    assert us_east_1["p3.8xlarge"].capacity[res.NVIDIA_GPU] == 4
    assert us_east_1["p3.8xlarge"].allocatable[res.NVIDIA_GPU] == 4
    assert us_east_1["g4dn.xlarge"].capacity[res.NVIDIA_GPU] == 1
    assert us_east_1["inf2.xlarge"].capacity[res.NEURON] == 1
    assert res.NVIDIA_GPU not in us_east_1["m5.large"].capacity


def test_max_pods_from_enis_is_not_capped(us_east_1):
    # m5.24xlarge: 15 ENIs x 49 + 2 = 737, as in eni-max-pods.txt (Karpenter passes it to the kubelet).
    assert us_east_1["m5.24xlarge"].capacity[res.PODS] == 737
    assert us_east_1["t3.micro"].capacity[res.PODS] == 4


def test_windows_support(us_east_1):
    assert us_east_1["m5.large"].operating_systems == {"linux", "windows"}
    assert us_east_1["m5.metal"].operating_systems == {"linux", "windows"}
    assert us_east_1["m6g.16xlarge"].operating_systems == {"linux"}
    assert us_east_1["m6g.16xlarge"].requirements[wk.OS].values == {"linux"}


def test_windows_build_is_a_property_of_the_ami_family():
    assert windows_build("Windows2019") == "10.0.17763"
    assert windows_build("Windows2022") == "10.0.20348"
    assert windows_build("AL2023") is None
    assert windows_build(None) is None
    with pytest.raises(WindowsFamilyError, match="Windows2016"):
        windows_build("Windows2016")


class TestWithKubelet:
    def test_no_settings_returns_the_same_types(self, us_east_1):
        types = [us_east_1["m5.large"]]
        assert nodecapacity.with_kubelet(types, None, None)[0] is types[0]

    def test_max_pods_keeps_eni_memory_reservation_on_al2(self, us_east_1):
        m5 = nodecapacity.with_kubelet([us_east_1["m5.large"]], KubeletSettings(max_pods=110), None, "AL2")[0]
        assert m5.capacity[res.PODS] == 110
        # AL2's bootstrap reserves memory for the ENI-limited 29 pods whatever maxPods says.
        assert m5.allocatable[res.MEMORY] == 6903 * MIB

    def test_max_pods_drives_memory_reservation_on_bottlerocket(self, us_east_1):
        m5 = nodecapacity.with_kubelet(
            [us_east_1["m5.large"]], KubeletSettings(max_pods=110), None, "Bottlerocket"
        )[0]
        assert m5.allocatable[res.MEMORY] == (7577 - (11 * 110 + 255) - 100) * MIB

    def test_pods_per_core(self, us_east_1):
        m5 = nodecapacity.with_kubelet([us_east_1["m5.large"]], KubeletSettings(pods_per_core=4), None)[0]
        assert m5.capacity[res.PODS] == 8

    def test_reservations_and_eviction(self, us_east_1):
        kubelet = KubeletSettings(
            system_reserved={res.CPU: 100, res.MEMORY: 100 * MIB},
            kube_reserved={res.CPU: 200},
            eviction_hard={"memory.available": "10%", "nodefs.available": "15%"},
        )
        m5 = nodecapacity.with_kubelet([us_east_1["m5.large"]], kubelet, 100 * GIB)[0]
        assert m5.capacity[res.EPHEMERAL_STORAGE] == 100 * GIB
        assert m5.allocatable[res.CPU] == 2000 - 200 - 100
        evict = -(-7577 * MIB // 10)  # ceil(10 % of the memory capacity)
        assert m5.allocatable[res.MEMORY] == 7577 * MIB - 574 * MIB - 100 * MIB - evict
        assert m5.allocatable[res.EPHEMERAL_STORAGE] == 100 * GIB - GIB - 15 * GIB

    def test_eviction_soft_is_ignored_by_bottlerocket(self, us_east_1):
        kubelet = KubeletSettings(eviction_soft={"memory.available": "1Gi"})
        al2 = nodecapacity.with_kubelet([us_east_1["m5.large"]], kubelet, None, "AL2")[0]
        br = nodecapacity.with_kubelet([us_east_1["m5.large"]], kubelet, None, "Bottlerocket")[0]
        assert al2.overhead[res.MEMORY] - br.overhead[res.MEMORY] == GIB - 100 * MIB

    def test_bad_eviction_threshold_names_the_field(self, us_east_1):
        kubelet = KubeletSettings(eviction_hard={"memory.available": "lots"})
        with pytest.raises(ValueError, match=r"kubelet\.evictionHard\.memory\.available: 'lots'"):
            nodecapacity.with_kubelet([us_east_1["m5.large"]], kubelet, None)

    def test_windows_family(self, us_east_1):
        m5, m6g = nodecapacity.with_kubelet(
            [us_east_1["m5.large"], us_east_1["m6g.16xlarge"]], None, None, "Windows2022"
        )
        assert m5.labels[wk.OS] == "windows"
        assert m5.labels[wk.WINDOWS_BUILD] == "10.0.20348"
        assert m5.operating_systems == {"windows"}
        # EKS Windows: pods take the primary interface's addresses (m5.large: 10 IPv4 per interface, one the
        # node's), advertised as vpc.amazonaws.com/PrivateIPv4Address; not the Linux ENI formula, not 110.
        assert m5.capacity[res.PODS] == 9
        assert m5.capacity[res.PRIVATE_IPV4] == 9
        assert m5.capacity[res.EPHEMERAL_STORAGE] == 50 * GIB
        assert m6g.operating_systems == frozenset()
        # The shared bundled type is untouched.
        assert us_east_1["m5.large"].labels[wk.OS] == "linux"


    def test_linux_nodes_advertise_no_private_ipv4_addresses(self, us_east_1):
        (m5,) = nodecapacity.with_kubelet([us_east_1["m5.large"]], None, None, "AL2023")
        assert res.PRIVATE_IPV4 not in m5.capacity
        assert m5.capacity[res.PODS] == 29  # 3 ENIs x (10 - 1) + 2

    def test_windows_max_pods_setting_still_wins(self, us_east_1):
        (m5,) = nodecapacity.with_kubelet([us_east_1["m5.large"]], KubeletSettings(max_pods=5), None, "Windows2022")
        assert m5.capacity[res.PODS] == 5
        assert m5.capacity[res.PRIVATE_IPV4] == 9


class TestBundledData:
    @pytest.mark.parametrize("region", ["us-east-1", "us-west-2", "eu-west-1", "cn-north-1", "us-gov-west-1"])
    def test_regions_have_priced_offerings(self, region):
        types = catalog.bundled_catalog(region)
        assert len(types) > 200
        zones = {o.zone for it in types for o in it.offerings}
        assert zones and all(z.startswith(region) for z in zones)
        assert any(o.available and o.price > 0 for it in types for o in it.offerings)

    def test_zones_match_the_recorded_offerings(self):
        with gzip.open(
            MOTO_EC2 / "instance_type_offerings" / "availability-zone" / "us-east-1.json.gz", "rt"
        ) as fh:
            recorded = sorted(o["Location"] for o in json.load(fh) if o["InstanceType"] == "m5.large")
        assert catalog.bundled_zones("us-east-1")["m5.large"] == recorded

    def test_facts_match_the_recording(self):
        with gzip.open(MOTO_EC2 / "instance_types.json.gz", "rt") as fh:
            recorded = json.load(fh)
        bundled = catalog.bundled_facts_by_name()
        for name in ("m5.large", "g4dn.xlarge", "inf2.xlarge", "m6g.16xlarge"):
            assert bundled[name] == facts_from_describe(recorded[name])

    def test_unknown_region_is_a_clear_error(self):
        with pytest.raises(
            catalog.CatalogError, match="'mars-east-1' is not in the bundled catalog.*us-east-1"
        ):
            catalog.bundled_catalog("mars-east-1")

    def test_bundle_is_small(self):
        size = (DATA / catalog.BUNDLE_FILE).stat().st_size
        print(f"\n{catalog.BUNDLE_FILE}: {size} bytes")
        assert size < 2 * 2**20

    def test_row_round_trip(self):
        facts = catalog.bundled_facts_by_name()["p3.8xlarge"]
        assert TypeFacts.from_row(json.loads(json.dumps(facts.to_row()))) == facts


class TestUnavailableOfferings:
    def test_marked_until_expiry(self, us_east_1):
        now = time.time()
        unavailable = {
            ("m5.large", "us-east-1a", "spot"): now + 180,
            ("m5.large", "us-east-1b", "spot"): now - 1,  # expired: available again
        }
        m5 = next(it for it in catalog.bundled_catalog("us-east-1", unavailable) if it.name == "m5.large")
        state = {(o.zone, o.capacity_type): o.available for o in m5.offerings}
        assert state[("us-east-1a", "spot")] is False
        assert state[("us-east-1b", "spot")] is True
        assert state[("us-east-1a", "on-demand")] is True
        spot_a = Requirements(
            [Requirement.exactly(wk.ZONE, "us-east-1a"), Requirement.exactly(wk.CAPACITY_TYPE, "spot")]
        )
        assert m5.cheapest(spot_a) is None
        assert m5.cheapest().available
        # The cached catalog is not changed for other callers.
        assert all(o.available for o in us_east_1["m5.large"].offerings)

    def test_unpriced_types_are_not_available(self, us_east_1):
        # r9g is in the recording but not in the price table: it cannot be compared, so not offered.
        assert not any(o.available for o in us_east_1["r9g.large"].offerings)
        assert us_east_1["r9g.large"].requirements[wk.ZONE].values == frozenset()
