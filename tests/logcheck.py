"""pytest plugin: every log line the suite reaches runs and is formatted, and one that cannot be fails its test.

The functions log at INFO in the stack; a line that only breaks when its level is enabled (an ``extra=``
key that LogRecord refuses, a %-format string that does not match its arguments) would otherwise reach
production untested. So under pytest:

- the root logger and the Powertools Logger (``POWERTOOLS_LOG_LEVEL``, read when the functions build it)
  log at DEBUG, so every ``log.debug(...)`` and above builds its record: a refused ``extra=`` key raises
  ``KeyError`` at the call, as it would in the Lambda;
- a handler on the root logger formats each record as the functions' handler does (Powertools' JSON
  formatter) and as plain text. Logging swallows a formatting error (``Handler.handleError`` prints it
  and carries on), so errors are recorded instead, from this handler and from any other handler, and the
  test that was running fails at teardown naming the line.

Libraries' own loggers stay at WARNING: their lines are not ours to fix, and botocore's DEBUG output alone
(every request and response body) would slow every integration test.
"""

from __future__ import annotations

import logging
import os
import threading
import traceback
from collections.abc import Iterator

import pytest
from aws_lambda_powertools.logging.formatter import LambdaPowertoolsFormatter

LEVEL = "DEBUG"
# Read by Powertools when a Logger is built (telemetry.logger() builds it on first use, after this module).
os.environ["POWERTOOLS_LOG_LEVEL"] = LEVEL
os.environ["LOG_LEVEL"] = LEVEL

THIRD_PARTY = (
    "botocore", "boto3", "s3transfer", "urllib3", "kubernetes", "moto", "werkzeug", "asyncio", "filelock",
    "aws_lambda_powertools", "jsii", "markdown_it", "httpx", "httpcore", "charset_normalizer", "docker",
)

_errors: list[str] = []
_errors_lock = threading.Lock()


def _origin(record: logging.LogRecord) -> str:
    return f"{record.pathname}:{record.lineno} ({record.name}, {record.levelname}, msg={record.msg!r:.120})"


def record_error(record: logging.LogRecord, detail: str) -> None:
    with _errors_lock:
        _errors.append(f"{_origin(record)}: {detail}")


def take_errors() -> list[str]:
    with _errors_lock:
        taken = list(dict.fromkeys(_errors))
        _errors.clear()
    return taken


class FormatEveryRecord(logging.Handler):
    """Formats every record as the functions' Powertools handler and as plain text; records what fails."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.formatters = (LambdaPowertoolsFormatter(), logging.Formatter("%(levelname)s %(name)s %(message)s"))

    def filter(self, record: logging.LogRecord) -> bool:  # noqa: A003 - logging's name
        # Powertools adds a filter to every root handler that hides its own service's records (against
        # duplicates in its output); this handler must see every record, so it ignores filters.
        return True

    def emit(self, record: logging.LogRecord) -> None:
        for formatter in self.formatters:
            try:
                formatter.format(record)
            except Exception as exc:  # noqa: BLE001 - any failure to format is the finding
                record_error(record, f"{type(formatter).__name__} failed: {type(exc).__name__}: {exc}")
                return


_HANDLER = FormatEveryRecord()
_original_handle_error = logging.Handler.handleError


def _handle_error(self: logging.Handler, record: logging.LogRecord) -> None:
    """Any handler's swallowed error (another formatter, pytest's capture) counts as a failure too."""
    record_error(record, f"{type(self).__name__}: " + "".join(traceback.format_exc(limit=3)).strip())


def pytest_configure(config: pytest.Config) -> None:
    logging.Handler.handleError = _handle_error  # type: ignore[method-assign]
    root = logging.getLogger()
    root.setLevel(logging.DEBUG)
    root.addHandler(_HANDLER)
    for name in THIRD_PARTY:
        logging.getLogger(name).setLevel(logging.WARNING)


def pytest_unconfigure(config: pytest.Config) -> None:
    logging.getLogger().removeHandler(_HANDLER)
    logging.Handler.handleError = _original_handle_error  # type: ignore[method-assign]


def _attach_to_isolated_loggers() -> None:
    # A logger that does not propagate never reaches the root handler: it gets the handler itself.
    for logger in list(logging.Logger.manager.loggerDict.values()):
        if isinstance(logger, logging.Logger) and not logger.propagate and _HANDLER not in logger.handlers:
            logger.addHandler(_HANDLER)


@pytest.fixture(autouse=True)
def every_log_line_formats() -> Iterator[None]:
    _attach_to_isolated_loggers()
    yield
    errors = take_errors()
    if errors:
        pytest.fail("log lines that could not be emitted:\n  " + "\n  ".join(errors), pytrace=False)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    # Errors logged outside any test (a session fixture's teardown) still fail the run.
    errors = take_errors()
    if errors:
        print("\nlog lines that could not be emitted:\n  " + "\n  ".join(errors))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
