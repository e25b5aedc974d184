"""The daemon's log formats: one JSON object per line (`--log-format json`) or one human line.

Structured fields go in `extra=`; both formats print every one of them.

`freshet run` also routes everything else written to its standard error through the same format
(`capture_stderr`): file descriptor 2 becomes a pipe read by a thread, and the log handler
writes to a duplicate of the original stderr. So the JVM's log4j lines (Spark writes them
straight to fd 2, past Python), Ivy's output and any library's print become log records:
log4j-formatted lines as logger `spark` with their level and log4j category (`source`), other
lines as logger `stderr`. Lines that continue a record join it: a Java exception and its stack
trace under a log4j line, indented lines, and a Python traceback down to its last line. Uncaught exceptions, in any thread, are one record with their traceback.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import re
import select
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from warehouse.times import iso

__all__ = ["HumanFormatter", "JsonFormatter", "RepeatedFailure", "StderrCapture", "setup_logging"]

_STD = set(vars(logging.LogRecord("", 0, "", 0, "", (), None)).keys()) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, msg and the structured fields."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {"time": iso(record.created, "seconds"), "level": record.levelname.lower(),
                               "logger": record.name, "msg": record.getMessage()}
        out.update({k: v for k, v in vars(record).items() if k not in _STD and not k.startswith("_")})
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


class HumanFormatter(logging.Formatter):
    """`2026-01-01T00:00:00Z INFO  job finished table=cpu_raw job=3 track=1 duration=2.10s ...`"""

    def format(self, record: logging.LogRecord) -> str:
        fields = {k: v for k, v in vars(record).items() if k not in _STD and not k.startswith("_")}
        parts = []
        blocks = []  # lists of several or multi-line strings (a config's problems): one per line below
        for k, v in fields.items():
            if isinstance(v, list) and v and all(isinstance(x, str) for x in v) and (
                    len(v) > 1 or "\n" in v[0]):
                blocks.append(f"  {k}:" + "".join("\n    - " + x.replace("\n", "\n      ") for x in v))
                continue
            if isinstance(v, float):
                v = f"{v:.3f}" if k in ("duration", "estimate") else f"{v:g}"
            parts.append(f"{k}={v}")
        line = f"{iso(record.created, 'seconds')} {record.levelname:<5} {record.getMessage()}"
        if parts:
            line += " " + " ".join(parts)
        for b in blocks:
            line += "\n" + b
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def _py4j_without_traceback(record: logging.LogRecord) -> bool:
    """Py4J logs a failed call through the root logger with its traceback (`logging.exception`);
    the caller gets the error too and says what failed (a job, the liveness check), so the record
    keeps its message and error and loses the traceback, at warning level."""
    if record.exc_info and f"{os.sep}py4j{os.sep}" in record.pathname:
        exc = record.exc_info[1]
        record.msg = f"py4j: {record.getMessage()} ({type(exc).__name__}: {exc})"
        record.args, record.exc_info, record.exc_text = (), None, None
        record.levelno, record.levelname = logging.WARNING, "WARNING"
    return True


def setup_logging(fmt: str, level: str = "INFO", *, capture_stderr: bool = False) -> None:
    """One handler on the root logger, in `fmt` ("human" | "json"), writing to stderr.

    With `capture_stderr`, whatever else is written to fd 2 (the JVM, libraries) is turned into
    log records too (`StderrCapture`), and uncaught exceptions are logged as one record each.
    """
    global _capture
    stream: Any = sys.stderr
    if capture_stderr and _capture is None:
        _capture = StderrCapture()
        stream = _capture.stream
    elif _capture is not None:
        stream = _capture.stream
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter() if fmt == "json" else HumanFormatter())
    handler.addFilter(_py4j_without_traceback)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in ("py4j", "uvicorn.access", "httpx"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    if capture_stderr:
        sys.excepthook = _log_uncaught
        threading.excepthook = lambda a: _log_uncaught(a.exc_type, a.exc_value, a.exc_traceback,
                                                       thread=a.thread.name if a.thread else None)
        assert _capture is not None
        _capture.start()


def _log_uncaught(exc_type: Any, exc: Any, tb: Any, thread: str | None = None) -> None:
    if exc_type is not None and issubclass(exc_type, KeyboardInterrupt):
        return
    logging.getLogger("freshet").critical("uncaught exception", exc_info=(exc_type, exc, tb),
                                          extra={"in_thread": thread} if thread else {})


_capture: StderrCapture | None = None

# Spark's log4j2 console layout: `25/11/26 05:10:00 WARN NativeCodeLoader: Unable to load …`
_LOG4J = re.compile(r"^(?:\d\d/\d\d/\d\d \d\d:\d\d:\d\d(?:[.,]\d+)?|\d{4}-\d\d-\d\d[ T][\d:.,]+) "
                    r"(TRACE|DEBUG|INFO|WARN|WARNING|ERROR|FATAL) +([^\s:]+): ?(.*)$")
_LEVELS = {"TRACE": logging.DEBUG, "DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING,
           "WARNING": logging.WARNING, "ERROR": logging.ERROR, "FATAL": logging.CRITICAL}
_CONTINUATION = re.compile(r"^(?:\s|Caused by:|\.\.\. \d+ more|Suppressed:)")
# what log4j prints under a record: a Java exception, stack frames (with or without `at`), and
# message lines that introduce them ("This stopped SparkContext was created at:")
_JAVA_MORE = re.compile(r"^(?:(?:[A-Za-z_$][\w$]*\.)+[\w$]*(?:Exception|Error|Throwable)\b"
                        r"|(?:[\w$<>/-]+\.)+[\w$<>]+\(.*\)$|.*:$)")


class StderrCapture:
    """Turns the lines written to file descriptor 2 into log records (see the module docstring).

    `stream` is a text stream on a duplicate of the original fd 2: the log handler writes there.
    A line waits up to `linger` seconds for continuation lines before it is logged.
    """

    def __init__(self, linger: float = 0.1) -> None:
        sys.stderr.flush()
        self._orig = os.dup(2)
        self.stream = os.fdopen(self._orig, "w", buffering=1, encoding="utf-8", errors="replace")
        self._r, w = os.pipe()
        os.dup2(w, 2)
        os.close(w)
        self.linger = linger
        self._lock = threading.Lock()
        self._buf = b""
        self._pending: tuple[str, int, str | None, list[str]] | None = None  # logger, level, source, lines
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="freshet-stderr", daemon=True)

    def start(self) -> None:
        if not self._thread.is_alive():
            self._thread.start()
            atexit.register(self.close)

    def _run(self) -> None:
        while True:
            ready, _, _ = select.select([self._r], [], [], self.linger)
            with self._lock:
                if self._stopped:
                    return
                if ready:
                    data = os.read(self._r, 65536)
                    if not data:  # every writer closed fd 2
                        self._flush()
                        return
                    self._feed(data)
                else:
                    self._flush()

    def _feed(self, data: bytes) -> None:
        self._buf += data
        *lines, self._buf = self._buf.split(b"\n")
        for raw in lines:
            line = raw.decode("utf-8", "replace").rstrip("\r")
            if not line.strip():
                continue
            m = _LOG4J.match(line)
            pending = self._pending
            if pending is not None and m is None:
                if _CONTINUATION.match(line) or (pending[0] == "spark" and _JAVA_MORE.match(line)):
                    # log4j prints a multi-line message or an exception right after its record line
                    pending[3].append(line)
                    continue
                if pending[3][0].startswith("Traceback (most recent call last)"):
                    pending[3].append(line)  # a Python traceback ends with its unindented last line
                    self._flush()
                    continue
            self._flush()
            if m:
                self._pending = ("spark", _LEVELS[m.group(1)], m.group(2), [m.group(3)])
            else:
                self._pending = ("stderr", logging.INFO if not re.search(r"(?i)error|exception", line)
                                 else logging.WARNING, None, [line])

    def _flush(self) -> None:
        if self._pending is None:
            return
        name, level, source, lines = self._pending
        self._pending = None
        logging.getLogger(name).log(level, "\n".join(lines), extra={"source": source} if source else {})

    def close(self) -> None:
        """Log what is still in the pipe (at exit); fd 2 keeps pointing at the pipe, so a line
        written later by the JVM is lost rather than printed outside the log format."""
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            while select.select([self._r], [], [], 0.05)[0]:
                data = os.read(self._r, 65536)
                if not data:
                    break
                self._feed(data)
            if self._buf:
                self._feed(b"\n")
            self._flush()


class RepeatedFailure:
    """Logs a loop that fails on every poll without flooding the log, and counts every failure.

    The first failure is logged at once (with its traceback); while the loop keeps failing, at most
    one line every `every` seconds follows, saying how many failures it stands for (`repeats`)
    and the latest error. The first success after failures logs `recovered` with the total.
    `count` is called on every failure (a Prometheus counter's `inc`).
    """

    def __init__(self, logger: logging.Logger, msg: str, recovered: str, *, every: float = 60.0,
                 count: Callable[[], None] = lambda: None, clock: Callable[[], float] = time.monotonic,
                 **fields: Any) -> None:
        self.log, self.msg, self.recovered, self.every = logger, msg, recovered, every
        self.count, self.clock = count, clock
        self.fields = fields
        self.failures = 0  # in the current run of failures
        self._unlogged = 0
        self._last: float | None = None

    def failed(self, error: BaseException) -> None:
        self.count()
        self.failures += 1
        self._unlogged += 1
        now = self.clock()
        err = f"{type(error).__name__}: {error}"
        if self._last is None:
            self.log.error(self.msg, exc_info=error, extra={**self.fields, "error": err})
        elif now - self._last >= self.every:
            self.log.error(f"{self.msg} (still failing)", extra={
                **self.fields, "error": err, "repeats": self._unlogged, "failures": self.failures})
        else:
            return
        self._last, self._unlogged = now, 0

    def ok(self) -> None:
        if self.failures:
            self.log.info(self.recovered, extra={**self.fields, "failures": self.failures})
        self.failures, self._unlogged, self._last = 0, 0, None
