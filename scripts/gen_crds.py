"""Write infra/manifests/crds/ from nodescale's field table (nodescale/config/schema.py via config/crds.py).

Run after changing schema.py; tests/unit/test_crd_schemas.py fails while the files are out of date:

    PYTHONPATH=layers/nodescale/python .venv/bin/python scripts/gen_crds.py
"""

from __future__ import annotations

from pathlib import Path

from nodescale.config import crds

OUT = Path(__file__).resolve().parents[1] / "infra" / "manifests" / "crds"


def main() -> None:
    for manifest in crds.all_crds():
        path = OUT / crds.file_name(manifest)
        path.write_text(crds.manifest_text(manifest))
        print(path)


if __name__ == "__main__":
    main()
