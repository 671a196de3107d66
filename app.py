#!/usr/bin/env python3
"""CDK entry point: `npx cdk synth -c clusterName=NAME` (or deploy); options are in docs/deploy.md."""

from __future__ import annotations

import sys

from aws_cdk import App

from infra.app import build
from infra.config import ConfigError
from infra.layers import LayerBuildError


def main() -> int:
    app = App()
    try:
        build(app)
    except (ConfigError, LayerBuildError) as exc:
        print(f"nodescale: {exc}", file=sys.stderr)
        return 2
    app.synth()
    return 0


if __name__ == "__main__":
    sys.exit(main())
