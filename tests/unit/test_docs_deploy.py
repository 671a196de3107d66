"""#28.4: docs/deploy.md's commands work as written from the repository's root. Its Cluster Autoscaler
migration deployed `-c nodePoolFiles=migrated-from-cluster-autoscaler.yaml`, a file that is not there
(the stack's configuration refuses it), and it gave no command to move a CONFIG_MAP cluster to access
entries.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from infra.config import StackConfig

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = (ROOT / "docs" / "deploy.md").read_text()


def _commands(prefix: str) -> list[str]:
    """Every ``prefix ...`` command in the document, from a code block line or an inline code span."""
    found = [line.strip() for line in DEPLOY.splitlines() if line.strip().startswith(prefix)]
    found += re.findall(rf"`({re.escape(prefix)}[^`]*)`", DEPLOY)
    return sorted(set(found))


DEPLOYS = _commands("npx cdk deploy ")


def _context(command: str) -> dict[str, str]:
    words = shlex.split(command.split("#", 1)[0])
    return dict(words[i + 1].split("=", 1) for i, w in enumerate(words) if w == "-c")


def test_the_migration_commands_are_among_the_deploys_checked():
    assert any("migrated-from-cluster-autoscaler" in c for c in DEPLOYS)
    assert len(DEPLOYS) >= 3


@pytest.mark.parametrize("command", DEPLOYS)
def test_every_deploy_command_names_files_that_exist_and_the_stack_accepts(command):
    """The stack's own context parser (what `cdk synth` runs) reads each command's -c values, files included."""
    context = _context(command)
    for name in filter(None, context.get("nodePoolFiles", "").split(",")):
        assert (ROOT / name).is_file(), f"{command!r} names {name}, which is not in the repository"
    StackConfig.from_context(context.get, ROOT)


@pytest.mark.parametrize("command", _commands("kubectl apply -f ") + _commands("kubectl delete -f "))
def test_every_manifest_applied_from_the_repository_exists(command):
    path = shlex.split(command)[3]
    assert (ROOT / path).exists(), f"{command!r} names {path}, which is not in the repository"


def test_a_config_map_cluster_is_told_how_to_move_to_access_entries_and_what_it_does_not_need():
    assert ("aws eks update-cluster-config --name <cluster> --access-config "
            "authenticationMode=API_AND_CONFIG_MAP") in " ".join(DEPLOY.split())
    assert "No IAM OIDC provider, no IRSA and no Helm" in DEPLOY
