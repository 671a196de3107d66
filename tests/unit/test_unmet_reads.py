"""How many nominations a provisioner pass reads (issue 18: a light touch on the API server)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from nodescale.model.pod import Pod
from nodescale.usecases.provision import unmet


def waiting_pod(name: str, minute: int) -> Pod:
    return Pod.from_dict({
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}",
                     "creationTimestamp": f"2026-11-25T01:{minute:02d}:00Z"},
        "spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "1"}}}]},
        "status": {"phase": "Pending"},
    })


def test_a_pass_reads_the_nominations_of_the_longest_waiting_pods_only(monkeypatch: pytest.MonkeyPatch) -> None:
    read: list[str] = []
    monkeypatch.setattr(unmet, "READS_PER_PASS", 2)
    monkeypatch.setattr(unmet, "_newest_registration", lambda world: datetime(2026, 11, 25, 1, 30, tzinfo=UTC))
    monkeypatch.setattr(unmet, "nominated_instance", lambda rt, pod: read.append(pod.name))
    pods = [waiting_pod("p3", 3), waiting_pod("p1", 1), waiting_pod("p2", 2), waiting_pod("p0", 0),
            waiting_pod("fresh", 45)]  # began to wait after the newest node registered: nothing to read

    assert unmet.unmet_pods(None, None, pods) == {}  # type: ignore[arg-type]

    assert read == ["p0", "p1"]
