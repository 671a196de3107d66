"""The EKS bearer token: presigned STS GetCallerIdentity per partition, cached and refreshed."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import boto3
import pytest

import nodescale.k8s.token as token_module
from nodescale.k8s.token import (
    TOKEN_LIFETIME_SECONDS,
    TOKEN_PREFIX,
    TokenError,
    TokenSource,
    decode_token,
    encode_token,
    presigned_caller_identity_url,
)


def _session() -> boto3.Session:
    return boto3.Session(aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="secret", aws_session_token="tok")


@pytest.mark.parametrize(
    ("region", "host"),
    [
        ("us-east-1", "sts.us-east-1.amazonaws.com"),
        ("cn-north-1", "sts.cn-north-1.amazonaws.com.cn"),
        ("us-gov-west-1", "sts.us-gov-west-1.amazonaws.com"),
    ],
)
def test_token_names_the_partitions_regional_sts_and_signs_the_cluster_header(region, host, monkeypatch):
    # A local endpoint override (how sim/ is reached) must not end up in a token EKS has to verify.
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
    token = TokenSource("demo-cluster", region, _session()).token()
    assert token.startswith(TOKEN_PREFIX)
    assert "=" not in token
    url = urlsplit(decode_token(token))
    query = parse_qs(url.query)
    assert url.scheme == "https"
    assert url.netloc == host
    assert query["Action"] == ["GetCallerIdentity"]
    assert query["X-Amz-Expires"] == ["60"]
    assert query["X-Amz-SignedHeaders"] == ["host;x-k8s-aws-id"]
    assert query["X-Amz-Credential"][0].split("/")[2] == region
    assert query["X-Amz-Security-Token"] == ["tok"]


def test_legacy_global_sts_setting_still_gives_the_regional_host(monkeypatch):
    monkeypatch.setenv("AWS_STS_REGIONAL_ENDPOINTS", "legacy")
    url = urlsplit(presigned_caller_identity_url("demo", "us-east-1", _session()))
    assert url.netloc == "sts.us-east-1.amazonaws.com"


def test_token_is_cached_and_re_signed_before_eks_stops_accepting_it(monkeypatch):
    signed = []
    real = token_module.presigned_caller_identity_url

    def counting(*args, **kwargs):
        signed.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(token_module, "presigned_caller_identity_url", counting)
    now = [1000.0]
    source = TokenSource("demo", "us-east-1", _session(), clock=lambda: now[0])
    source.token()
    now[0] += 600
    source.token()
    assert len(signed) == 1
    now[0] = 1000.0 + TOKEN_LIFETIME_SECONDS - 30  # inside the refresh margin
    second = source.token()
    assert len(signed) == 2
    assert decode_token(second).startswith("https://sts.us-east-1.amazonaws.com/")


def test_round_trip_of_encoding_without_padding():
    url = "https://sts.us-east-1.amazonaws.com/?Action=GetCallerIdentity&x=1"
    token = encode_token(url)
    assert not token.endswith("=")
    assert decode_token(token) == url


def test_missing_credentials_is_a_clear_error(monkeypatch):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with pytest.raises(TokenError, match="no AWS credentials"):
        presigned_caller_identity_url("demo", "us-east-1", boto3.Session())


@pytest.mark.parametrize(("cluster", "region", "what"), [("", "us-east-1", "cluster name"), ("demo", "", "region")])
def test_empty_cluster_or_region_is_refused(cluster, region, what):
    with pytest.raises(TokenError, match=what):
        presigned_caller_identity_url(cluster, region, _session())


def test_decoding_something_else_is_refused():
    with pytest.raises(TokenError, match="k8s-aws-v1"):
        decode_token("Bearer abc")
