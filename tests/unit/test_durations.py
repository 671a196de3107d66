"""Go durations read as Go's ``time.ParseDuration`` reads them, range included (#27.1).

The tables restate the cases of Go's own ``time`` package tests for ParseDuration (valid values, the
int64 boundary either way, and what it refuses); the rest is what the range buys the callers: a
tenant's "99999999999999999h" on a pod, or a NodePool's, no longer reaches date arithmetic.
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nodescale.config.fields import FieldError, duration
from nodescale.disruption import drain_policy
from nodescale.model.durations import (
    MAX_NANOSECONDS,
    MIN_NANOSECONDS,
    DurationError,
    go_duration_ns,
    go_duration_seconds,
    parse_nanoseconds,
)
from nodescale.model.node import ClusterNode
from nodescale.model.pod import DoNotDisruptProblem, DrainPod, do_not_disrupt, invalid_do_not_disrupt
from nodescale.model.timestamps import shifted
from nodescale.usecases.terminate import grace_deadline

NS, US, MS, S, M, H = 1, 1_000, 1_000_000, 1_000_000_000, 60_000_000_000, 3_600_000_000_000
NOW = datetime(2025, 1, 1, tzinfo=UTC)
HUGE = "99999999999999999h"  # the value: 3.6e20 seconds

VALID = [
    # simple
    ("0", 0), ("5s", 5 * S), ("30s", 30 * S), ("1478s", 1478 * S),
    # sign
    ("-5s", -5 * S), ("+5s", 5 * S), ("-0", 0), ("+0", 0),
    # decimal
    ("5.0s", 5 * S), ("5.6s", 5 * S + 600 * MS), ("5.s", 5 * S), (".5s", 500 * MS), ("1.0s", S),
    ("1.00s", S), ("1.004s", S + 4 * MS), ("1.0040s", S + 4 * MS), ("100.00100s", 100 * S + MS),
    # every unit, both spellings of micro
    ("10ns", 10 * NS), ("11us", 11 * US), ("12\u00b5s", 12 * US), ("12\u03bcs", 12 * US), ("13ms", 13 * MS),
    ("14s", 14 * S), ("15m", 15 * M), ("16h", 16 * H),
    # composite, in any order
    ("3h30m", 3 * H + 30 * M), ("10.5s4m", 4 * M + 10 * S + 500 * MS), ("-2m3.4s", -(2 * M + 3 * S + 400 * MS)),
    ("1h2m3s4ms5us6ns", H + 2 * M + 3 * S + 4 * MS + 5 * US + 6 * NS), ("39h9m14.425s", 39 * H + 9 * M + 14 * S + 425 * MS),
    ("52763797000ns", 52763797000),
    # more than nine digits after the point
    ("0.3333333333333333333h", 20 * M),
    # 2**53 + 1 is not a float64: the whole part stays an integer
    ("9007199254740993ns", 2**53 + 1),
    # the int64 boundary, reached three ways, either way
    ("9223372036854775807ns", MAX_NANOSECONDS), ("9223372036854775.807us", MAX_NANOSECONDS),
    ("9223372036s854ms775us807ns", MAX_NANOSECONDS), ("2562047h47m16.854775807s", MAX_NANOSECONDS),
    ("-9223372036854775808ns", MIN_NANOSECONDS), ("-9223372036854775.808us", MIN_NANOSECONDS),
    ("-9223372036s854ms775us808ns", MIN_NANOSECONDS), ("-2562047h47m16.854775808s", MIN_NANOSECONDS),
    # long fractions: digits past what an int64 holds are read and dropped
    ("0.100000000000000000000h", 6 * M), ("0.830103483285477580700h", 49 * M + 48 * S + 372539827 * NS),
    ("0000000000000000000000000000001s", S), ("1." + "0" * 1000 + "1s", S),
]

INVALID = [
    "", "3", "-", "s", ".", "-.", ".s", "+.s", "1d", "\x85\x85", "\xffff", "hello \xffff world", "00", "1s1",
    "1s.", "--1s", "+-1s", " 1s", "1s ", "1 s", "1S", "1sec", "true", "Never", "1hh", "١s",
    # out of range
    "9223372036854775810ns", "9223372036854775808ns", "-9223372036854775809ns", "9223372036854776us", "3000000h",
    "9223372036854775.808us", "9223372036854ms775us808ns", "2562047h47m16.854775808s", "2562048h", HUGE,
    "9" * 401 + "s", "1" + "0" * 400 + "h", "2562047h2562047h",
]


@pytest.mark.parametrize(("text", "ns"), VALID)
def test_what_go_accepts_and_its_value(text: str, ns: int) -> None:
    assert parse_nanoseconds(text) == ns
    assert go_duration_seconds(text) == ns / 1e9


@pytest.mark.parametrize("text", INVALID)
def test_what_go_refuses_is_refused_with_a_reason(text: str) -> None:
    with pytest.raises(DurationError):
        parse_nanoseconds(text)
    assert go_duration_ns(text) is None and go_duration_seconds(text) is None


def test_out_of_range_says_the_bound_and_a_long_value_is_cut_short_in_the_message() -> None:
    with pytest.raises(DurationError, match=r"out of range: a duration is at most 2562047h47m16\.854775807s"):
        parse_nanoseconds(HUGE)
    with pytest.raises(DurationError) as caught:
        parse_nanoseconds("9" * 100_000 + "s")
    assert len(str(caught.value)) < 200


def test_a_number_of_a_million_digits_is_refused_without_being_computed() -> None:
    # The old parser summed floats (inf for 401 digits, then OverflowError at the first timedelta);
    # converting the digits to an int would take seconds. The twentieth digit decides.
    texts = ["9" * 1_000_000 + "h", "1" + "0" * 1_000_000 + "ns", "0." + "9" * 1_000_000 + "h" + "9" * 1_000_000 + "h"]
    started = time.perf_counter()
    for text in texts:
        assert go_duration_ns(text) is None
    assert time.perf_counter() - started < 0.5


# ----------------------------------------------------------------------------- the range, in callers


def test_a_pod_annotation_beyond_the_range_is_ignored_and_says_why() -> None:
    started = NOW - timedelta(hours=1)
    annotations = {"karpenter.sh/do-not-disrupt": HUGE}
    # Used to raise OverflowError (timedelta of 3.6e20 seconds), from the planner and from every drain.
    assert do_not_disrupt(annotations, started, NOW) is None
    assert do_not_disrupt(annotations) is None
    invalid = invalid_do_not_disrupt(annotations)
    assert invalid is not None and invalid.problem is DoNotDisruptProblem.UNPARSABLE and "out of range" in invalid.why


@pytest.mark.parametrize("value", ["yes", "True", " true", "30", "1d", "0s", "-5m", "2562048h"])
def test_any_value_but_true_false_or_a_positive_duration_is_ignored_with_a_reason_as_karpenter_does(
    value: str,
) -> None:
    # Karpenter (pkg/utils/pod IsDoNotDisruptActive): an invalid value, zero or a negative duration is
    # ignored with an InvalidDoNotDisruptAnnotation Warning. This project used to treat a non-duration as "true".
    annotations = {"karpenter.sh/do-not-disrupt": value}
    assert do_not_disrupt(annotations, NOW - timedelta(minutes=1), NOW) is None
    assert do_not_disrupt(annotations) is None
    invalid = invalid_do_not_disrupt(annotations)
    # #29.3: a typed result, the value and what is wrong with it, besides the message.
    assert invalid is not None and invalid.value == value and value in str(invalid)
    assert invalid.problem is (DoNotDisruptProblem.NOT_POSITIVE if value in ("0s", "-5m") else DoNotDisruptProblem.UNPARSABLE)


@pytest.mark.parametrize("value", ["true", "false", "30m", "2562047h"])
def test_valid_values_carry_no_complaint(value: str) -> None:
    assert invalid_do_not_disrupt({"karpenter.sh/do-not-disrupt": value}) is None
    assert invalid_do_not_disrupt({}) is None


def test_the_longest_valid_duration_still_protects() -> None:
    annotations = {"karpenter.sh/do-not-disrupt": "2562047h47m16.854775807s"}
    assert do_not_disrupt(annotations, NOW - timedelta(days=365), NOW) is not None


def test_a_pods_own_int64_grace_period_means_delete_now_at_the_nodes_deadline() -> None:
    # The API server takes any int64 for terminationGracePeriodSeconds; a tenant's 2**63-1 used to raise
    # OverflowError in the drain (deadline minus the pod's own grace).
    pod = {"metadata": {"name": "p", "namespace": "default"},
           "spec": {"terminationGracePeriodSeconds": 2**63 - 1}}
    due = drain_policy.pod_delete_time(DrainPod.from_dict(pod), NOW)
    assert due is not None and due <= NOW


def test_date_arithmetic_holds_at_the_calendars_ends() -> None:
    assert shifted(NOW, 1e300) == datetime.max.replace(tzinfo=UTC)
    assert shifted(NOW, -1e300) == datetime.min.replace(tzinfo=UTC)
    assert shifted(NOW, 60) == NOW + timedelta(minutes=1)
    taint = {"key": "karpenter.sh/disrupted", "effect": "NoSchedule", "timeAdded": "2025-01-01T00:00:00Z"}
    node = ClusterNode.from_dict({"metadata": {"name": "n"}, "spec": {"taints": [taint]}})
    assert grace_deadline(node, 1e300) == datetime.max.replace(tzinfo=UTC)


@pytest.mark.parametrize(("value", "why"), [
    (HUGE, "out of range"), ("9" * 401 + "h", "out of range"), ("-5m", "not allowed"), ("1d", "unknown unit"),
    (10**30, "not allowed"), (float("nan"), "not allowed"), (float("inf"), "not allowed"), (-1, "not allowed"),
    ("2562048h", "out of range"),
])
def test_a_config_duration_outside_the_range_is_a_field_error_naming_what_is_allowed(value: object, why: str) -> None:
    with pytest.raises(FieldError) as caught:
        duration(value, "spec.template.spec.expireAfter")
    assert caught.value.path == "spec.template.spec.expireAfter"
    assert why in caught.value.message and "2562047h47m16.854775807s" in caught.value.message


def test_a_config_duration_inside_the_range_reads_as_before() -> None:
    assert duration("720h", "p") == 720 * 3600.0
    assert duration("1m0s", "p") == 60.0
    assert duration(90, "p") == 90.0
    assert duration("Never", "p") is None
    assert duration("2562047h47m16.854775807s", "p") == MAX_NANOSECONDS / 1e9


# --------------------------------------------------------------------------------------- properties


def _exact(text: str) -> Decimal | None:
    """The exact value in nanoseconds by decimal arithmetic, or None when the grammar refuses the text."""
    units = {"ns": 1, "us": US, "\u00b5s": US, "\u03bcs": US, "ms": MS, "s": S, "m": M, "h": H}
    body = text[1:] if text[:1] in "+-" and text else text
    if body == "0":
        return Decimal(0)
    parts = re.findall(r"([0-9]*(?:\.[0-9]*)?)(ns|us|\u00b5s|\u03bcs|ms|s|m|h)", body)
    if not body or "".join(n + u for n, u in parts) != body or any(n in ("", ".") for n, _ in parts):
        return None
    total = sum(Decimal(n if not n.endswith(".") else n[:-1]) * units[u] for n, u in parts)
    return -total if text.startswith("-") else total


_NUMBER = st.one_of(
    st.integers(0, 10**25).map(str),
    st.text("0123456789", min_size=1, max_size=450),
    st.tuples(st.text("0123456789", max_size=30), st.text("0123456789", max_size=400)).map(".".join),
)
_UNIT = st.sampled_from(["ns", "us", "\u00b5s", "\u03bcs", "ms", "s", "m", "h", "", "d", "S", "hs"])
_DURATIONS = st.one_of(
    st.tuples(st.sampled_from(["", "-", "+", "--"]), st.lists(st.tuples(_NUMBER, _UNIT), max_size=60)).map(
        lambda t: t[0] + "".join(n + u for n, u in t[1])),
    st.text(max_size=200),
    st.text("0123456789.+-nsuµμmh", max_size=300),
)


@settings(max_examples=400, deadline=1000)
@given(_DURATIONS)
def test_any_text_is_a_duration_within_the_range_or_refused_quickly_never_an_exception(text: str) -> None:
    started = time.perf_counter()
    try:
        ns = parse_nanoseconds(text)
    except DurationError:
        ns = None
    assert time.perf_counter() - started < 0.05
    exact = _exact(text)
    if ns is None:
        # Refused: not the grammar, or (past rounding of at most a nanosecond a part) out of the range.
        parts = max(1, text.count("s") + text.count("m") + text.count("h"))
        assert exact is None or not MIN_NANOSECONDS + parts <= exact <= MAX_NANOSECONDS - parts
        return
    assert isinstance(ns, int) and MIN_NANOSECONDS <= ns <= MAX_NANOSECONDS
    assert exact is not None
    # Go truncates each part's fraction to a nanosecond through a float64: never more than a part's worth.
    parts = max(1, len(re.findall(r"[0-9.]+", text)))
    assert abs(Decimal(ns) - exact) <= parts


@settings(max_examples=300, deadline=1000)
@given(st.one_of(_DURATIONS, st.integers(-(10**40), 10**40), st.floats(), st.booleans(), st.none(),
                 st.just("Never")))
def test_a_config_duration_is_seconds_in_range_or_a_field_error_never_another_exception(value: object) -> None:
    # NaN, infinities and 10**40 used to load (and NaN reached timedelta as a ValueError).
    try:
        seconds = duration(value, "spec.disruption.consolidateAfter")
    except FieldError as exc:
        assert exc.path == "spec.disruption.consolidateAfter" and "expected a duration" in exc.message
        return
    assert seconds is None or 0 <= seconds <= MAX_NANOSECONDS / 1e9
    assert seconds is not None or value == "Never"
