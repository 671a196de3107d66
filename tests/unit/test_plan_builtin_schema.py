"""#28.4: `nodescale plan -f` checks built-in kinds against Kubernetes' OpenAPI schema, strictly, as
`kubectl apply --validate=strict` does, and refuses a file with no objects in it. A Deployment with
`requets:` and an empty file were planned with exit 0: the first as a pod asking for nothing, the second
as nothing at all.

Upstream behaviour restated: kubectl's strict validation says `unknown field
"spec.template.spec.containers[0].resources.requets"`; kube-apiserver refuses a string for an integer
field and a missing required field (`Required value`); `kubectl apply -f` of an empty file says "no
objects passed to apply".
"""

from __future__ import annotations

import builtins
import json
from pathlib import Path

import pytest

from nodescale.cli import main

EXAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "examples"
POOL = EXAMPLES / "karpenter-v1alpha5" / "default-spot.yaml"
INFLATE = EXAMPLES / "workloads" / "inflate.yaml"


def plan(capsys: pytest.CaptureFixture, *args: str) -> tuple[int, str, list[str]]:
    code = main(["plan", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err.splitlines()


def test_a_misspelled_field_of_a_deployment_exits_2_naming_file_document_and_path(capsys, tmp_path):
    typo = tmp_path / "inflate.yaml"
    typo.write_text(INFLATE.read_text().replace("requests:", "requets:", 1))
    code, out, err = plan(capsys, "-f", str(POOL), "-f", str(typo))
    assert code == 2 and out == ""
    assert err == [
        f"nodescale plan: {typo}#0: Deployment default/inflate: unknown field "
        '"spec.template.spec.containers[0].resources.requets"; did you mean requests?'
    ]


def test_wrong_types_missing_fields_and_far_off_names_are_each_one_line(capsys, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ok}\n---\n"
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n"
        "spec:\n  replicas: three\n  selector: {matchLabels: {app: web}}\n  template:\n"
        "    metadata: {labels: {app: web}}\n"
        "    spec:\n      containers: [{image: nginx, zzz: 1}]\n"
    )
    code, _, err = plan(capsys, "-f", str(POOL), "-f", str(bad))
    assert code == 2
    where = f"nodescale plan: {bad}#1: Deployment web"
    assert err[0].startswith(f'{where}: unknown field "spec.template.spec.containers[0].zzz"; allowed are ')
    assert "image" in err[0] and "resources" in err[0]
    assert err[1:] == [
        f"{where}: spec.replicas: \"three\" is not allowed; expected an integer",
        f"{where}: spec.template.spec.containers[0].name: Required value",
    ]


def test_an_empty_file_exits_2_naming_it(capsys, tmp_path):
    empty = tmp_path / "empty.yaml"
    empty.write_text("# nothing yet\n---\n")
    code, _, err = plan(capsys, "-f", str(POOL), "-f", str(INFLATE), "-f", str(empty))
    assert code == 2
    assert err == [f"nodescale plan: {empty}: no Kubernetes objects in the file (it is empty, or holds only "
                   "comments and ---); give a file with at least one object"]
    folder = tmp_path / "none"
    folder.mkdir()
    code, _, err = plan(capsys, "-f", str(POOL), "-f", str(folder))
    assert code == 2 and err == [f"nodescale plan: {folder}: no .yaml, .yml, .json files in the folder"]


def test_json_output_is_one_document_and_errors_stay_on_stderr(capsys, tmp_path):
    code, out, err = plan(capsys, "-f", str(POOL), "-f", str(INFLATE), "-o", "json")
    assert code == 0 and json.loads(out)["stats"]["pods"] == 5 and err == []
    typo = tmp_path / "inflate.yaml"
    typo.write_text(INFLATE.read_text().replace("replicas: 5", "replica: 5"))
    code, out, err = plan(capsys, "-f", str(POOL), "-f", str(typo), "-o", "json")
    assert code == 2 and out == "" and len(err) == 1 and "did you mean replicas?" in err[0]


def test_without_the_schemas_package_it_says_what_to_install_and_ignore_skips_the_check(capsys, monkeypatch, tmp_path):
    real_import = builtins.__import__

    def no_schemas(name, *args, **kwargs):
        if name.startswith("kubernetes_validate"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_schemas)
    code, _, err = plan(capsys, "-f", str(POOL), "-f", str(INFLATE))
    assert code == 2 and len(err) == 1
    assert "pip install 'kubernetes-validate==" in err[0] and "--validate=ignore" in err[0]
    typo = tmp_path / "inflate.yaml"
    typo.write_text(INFLATE.read_text().replace("requests:", "requets:", 1))
    code, _, err = plan(capsys, "-f", str(POOL), "-f", str(typo), "--validate", "ignore")
    assert code == 0 and err == []


def test_the_pinned_schemas_package_is_a_plan_extra_and_stays_out_of_the_lambda_layer():
    """The layer is built from requirements.txt; the CLI's extra and the dev environment pin the package."""
    from nodescale.k8s.builtin_schema import PIN

    root = Path(__file__).resolve().parents[2]
    assert "kubernetes-validate" not in (root / "requirements.txt").read_text()
    assert PIN in (root / "requirements-dev.txt").read_text().splitlines()
    assert f'plan = ["{PIN}"]' in (root / "pyproject.toml").read_text()
