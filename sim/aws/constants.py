"""Names shared by every part of the simulated AWS account (cheap to import: no boto3)."""

from __future__ import annotations

REGION = "us-east-1"
ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")
DISCOVERY_TAG = "karpenter.sh/discovery"
# Everything nodescale launches carries this tag; the kubelet only joins instances that have it.
OWNERSHIP_TAG = "nodescale.io/cluster"
DUMMY_CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}
