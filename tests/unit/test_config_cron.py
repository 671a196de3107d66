"""Budget schedules: standard cron fields, names, macros, and the day-of-month/day-of-week rule."""

from __future__ import annotations

from datetime import datetime

import pytest

from nodescale.config.cron import CronError, parse_cron


def test_weekday_business_hours():
    s = parse_cron("0 9 * * mon-fri")
    assert s.matches(datetime(2024, 8, 5, 9, 0))  # a Monday
    assert s.matches(datetime(2024, 8, 9, 9, 0))  # a Friday
    assert not s.matches(datetime(2024, 8, 10, 9, 0))  # a Saturday
    assert not s.matches(datetime(2024, 8, 5, 9, 1))


def test_lists_ranges_steps_and_names():
    s = parse_cron("*/20 1,3-4 * JAN-mar,dec *")
    assert s.minutes == {0, 20, 40}
    assert s.hours == {1, 3, 4}
    assert s.months == {1, 2, 3, 12}
    assert parse_cron("5/30 * * * *").minutes == {5, 35}


def test_day_of_month_or_day_of_week():
    s = parse_cron("0 0 1 * sun")  # the 1st, and every Sunday, as cron ORs the two
    assert s.matches(datetime(2024, 8, 1))  # a Thursday, the 1st
    assert s.matches(datetime(2024, 8, 4))  # a Sunday
    assert not s.matches(datetime(2024, 8, 2))


@pytest.mark.parametrize(
    ("macro", "same_as"),
    [("@daily", "0 0 * * *"), ("@midnight", "0 0 * * *"), ("@hourly", "0 * * * *"), ("@weekly", "0 0 * * 0"),
     ("@monthly", "0 0 1 * *"), ("@yearly", "0 0 1 1 *"), ("@annually", "0 0 1 1 *")],
)
def test_macros(macro, same_as):
    assert parse_cron(macro) == parse_cron(same_as)


@pytest.mark.parametrize(
    ("expr", "text"),
    [
        ("60 * * * *", "minute field '60': '60' is not allowed; allowed are 0-59"),
        ("* * 0 * *", "allowed are 1-31"),
        ("* * * 13 *", "allowed are 1-12 or jan..dec"),
        ("* * * * 7", "allowed are 0-6 or sun..sat"),
        ("* * * * mon-sun", "runs backwards"),
        ("*/0 * * * *", "step '0' must be a positive whole number"),
        ("? * * * *", "'?' is only allowed"),
        ("* * * *", "4 fields given"),
        ("", "five fields"),
        ("@every 5m", "unknown macro"),
    ],
)
def test_bad_schedules(expr, text):
    with pytest.raises(CronError, match=text.replace("?", r"\?").replace("*", r"\*")):
        parse_cron(expr)
