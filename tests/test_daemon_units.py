"""The daemon's small parts without Spark: sd_notify, watchdog interval, log formats, trace file."""

from __future__ import annotations

import json
import logging
import os
import socket

import pytest

from ops.logs import HumanFormatter, JsonFormatter
from ops.notify import sd_notify, watchdog_interval
from sim.trace import Arrival, JobRecord, TraceWriter, read_trace


def _recv(sock: socket.socket) -> str:
    sock.settimeout(2)
    return sock.recv(4096).decode()


def test_sd_notify_path_and_abstract_sockets(tmp_path):
    path = tmp_path / "notify.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.bind(str(path))
        assert sd_notify("READY=1\nSTATUS=hi", {"NOTIFY_SOCKET": str(path)})
        assert _recv(s) == "READY=1\nSTATUS=hi"
    name = f"freshet-test-{os.getpid()}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.bind("\0" + name)
        assert sd_notify("WATCHDOG=1", {"NOTIFY_SOCKET": "@" + name})
        assert _recv(s) == "WATCHDOG=1"
    assert sd_notify("READY=1", {}) is False  # not under systemd: a no-op
    assert sd_notify("READY=1", {"NOTIFY_SOCKET": str(tmp_path / "missing.sock")}) is False


def test_watchdog_interval_is_half_the_period_for_this_pid():
    assert watchdog_interval({"WATCHDOG_USEC": "120000000"}) == 60.0
    assert watchdog_interval({"WATCHDOG_USEC": "120000000", "WATCHDOG_PID": str(os.getpid())}) == 60.0
    assert watchdog_interval({"WATCHDOG_USEC": "120000000", "WATCHDOG_PID": str(os.getpid() + 1)}) is None
    assert watchdog_interval({}) is None
    assert watchdog_interval({"WATCHDOG_USEC": "bogus"}) is None


def _record(**fields) -> logging.LogRecord:
    rec = logging.LogRecord("freshet", logging.INFO, __file__, 1, "job finished", (), None)
    rec.__dict__.update(fields)
    return rec


def test_log_lines_carry_the_job_fields():
    fields = {"table": "cpu_raw", "job": 3, "track": 1, "duration": 2.5, "rows": 120,
              "freshness": "2026-01-01T00:05:00Z"}
    obj = json.loads(JsonFormatter().format(_record(**fields)))
    assert obj["msg"] == "job finished" and obj["level"] == "info"
    assert {k: obj[k] for k in fields} == fields
    line = HumanFormatter().format(_record(**fields))
    assert "INFO  job finished" in line
    for part in ("table=cpu_raw", "job=3", "track=1", "duration=2.500", "rows=120", "freshness=2026-01-01T00:05:00Z"):
        assert part in line


def test_trace_file_appends_and_replays(tmp_path):
    path = tmp_path / "sub" / "trace.jsonl"
    tr = TraceWriter.append_to(path, {"source": "freshet run"})
    tr.arrival(Arrival(time=61.0, stream="s", partition="p1", start=0.0, end=60.0, rows=5))
    tr.job(JobRecord(time=70.0, table="t", start=0.0, end=60.0, duration=8.5, rows=5, track=0, cold=True))
    tr.job(JobRecord(time=80.0, table="t", start=0.0, end=60.0, duration=1.0, track=0, status="failed"))
    tr.close()
    # a restart appends to the same file without a second header
    tr2 = TraceWriter.append_to(path, {"source": "freshet run"})
    tr2.arrival(Arrival(time=121.0, stream="s", partition="p2", start=60.0, end=120.0, rows=7))
    tr2.close()
    lines = path.read_text().splitlines()
    assert sum("freshet_trace" in ln for ln in lines) == 1
    trace = read_trace(path)
    assert [a.partition for a in trace.arrivals["s"]] == ["p1", "p2"]
    assert trace.durations[("t", 0.0, 60.0)] == 8.5
    assert [j.status for j in trace.jobs] == ["ok", "failed"]
    assert [j.cold for j in trace.jobs] == [True, False]
    # the twin fits costs as the daemon did: a cold first job does not raise the prior's E(n) (§2.4)
    assert trace.fitted_costs({"t": (1.0, 0.01)})["t"] == pytest.approx((1.0, 0.01))


def test_the_replay_of_a_daemons_trace_learns_costs_as_the_daemon_did(tmp_path):
    """A daemon's trace (`source: freshet run`) is replayed by a Scheduler that learns α, β from its
    measured durations, a cold first job left out (§2.4), and a table with no recorded job is given
    its settled peers' medians (cost.Peers), not the config's default; a trace of no daemon is
    replayed with the true costs (§4.1)."""
    from sim.simulator import Simulation, prepare, simulate
    from warehouse.config import parse_config

    cfg = parse_config({"streams": [{"name": f"s{t}", "period": 10} for t in "abc"],
                        "tables": [{"name": t, "stream": f"s{t}"} for t in "abc"],
                        "scheduler": {"tracks": 1}})
    for live in (True, False):
        path = tmp_path / f"{live}.jsonl"
        tr = TraceWriter.append_to(path, {"source": "freshet run" if live else "a test"})
        for k in range(10):
            for t in "abc":
                tr.arrival(Arrival(time=10.0 * k + 10.5, stream=f"s{t}", partition=f"p{k}", start=10.0 * k,
                                   end=10.0 * k + 10.0, rows=100))
            for t in "ab":  # c never ran in the daemon
                tr.job(JobRecord(time=10.0 * k + 11.0, table=t, start=10.0 * k, end=10.0 * k + 10.0,
                                 duration=6.0 if k == 0 else 0.3, rows=100, track=0, work=10.0, cold=k == 0))
        tr.close()
        trace = read_trace(path)
        assert trace.live is live
        res = simulate(cfg, trace=trace, until=110.0)
        assert res.config.scheduler.learn_costs is live
    trace = read_trace(tmp_path / "True.jsonl")
    fitted = trace.fitted_costs({t: (1.0, 0.1) for t in "abc"}, [["a", "b", "c"]])
    e = {t: a + b * 10.0 for t, (a, b) in fitted.items()}
    assert e["a"] == pytest.approx(0.3, rel=0.05) and e["c"] == pytest.approx(e["a"])  # the default: 2.0
    assert "c" not in trace.fitted_costs({t: (1.0, 0.1) for t in "abc"})  # alone, no job: no estimate
    sim = Simulation(prepare(cfg, 0, learn=True), trace=trace)
    sim.run(until=110.0)
    learned = {t: sim.sched._tables[t].cost.estimate(10.0) for t in "abc"}
    assert learned["a"] == pytest.approx(0.3, rel=0.05) and 0.2 < learned["c"] < 0.4  # (the default: 2.0)


def test_run_rejects_bad_arguments(tmp_path):
    import argparse

    from ops import run
    from warehouse.errors import ConfigError

    cfg = tmp_path / "c.yaml"
    cfg.write_text("tables: [{name: t, stream: s}]\nstreams: [{name: s, period: 1m}]\n")
    p = argparse.ArgumentParser()
    run.add_arguments(p)
    with pytest.raises(ConfigError, match="--grace"):
        run._run(p.parse_args(["--config", str(cfg), "--grace", "-1"]))
    with pytest.raises(ConfigError, match="listen"):
        run._run(p.parse_args(["--config", str(cfg), "--listen", "nowhere"]))
    with pytest.raises(ConfigError, match="--demo-backfill"):
        run._run(p.parse_args(["--config", str(cfg), "--demo-backfill", "soon"]))


def test_a_loop_failing_on_every_poll_is_logged_rate_limited_and_counted(caplog):
    """The landing-zone scan failing on each poll: the first failure is logged with its traceback,
    then at most one line per `error_log_every` with a repeat count; every failure is counted."""
    import threading
    import time
    from pathlib import Path

    from prometheus_client import generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    from ops.daemon import Daemon, Options
    from warehouse.config import load_config

    root = Path(__file__).resolve().parents[1]
    cfg = load_config(root / "examples" / "netmon.yaml")

    class BrokenIntake:
        calls = 0
        unknown: dict[str, int] = {}  # no directory of no stream

        def scan(self):
            self.calls += 1
            if self.calls > 60:
                return []
            raise PermissionError(13, "Permission denied", "landing/router_cpu")

    from ops.reload import Parts

    d = Daemon(cfg, Options(config_path="x.yaml", poll=0.005, error_log_every=0.15))
    d.parts = Parts(state=None, intake=BrokenIntake(), executor=None, sched=None)
    caplog.set_level(logging.INFO, logger="freshet")
    t = threading.Thread(target=d._intake_loop)
    t.start()
    deadline = time.monotonic() + 20
    while d.intake.calls < 70 and time.monotonic() < deadline:
        time.sleep(0.01)
    d.stop_flag.set()
    t.join(5)
    recs = [r for r in caplog.records if r.getMessage().startswith("landing-zone scan")]
    failures = [r for r in recs if r.levelno == logging.ERROR]
    assert failures[0].exc_info and "Permission denied" in failures[0].error
    assert 1 < len(failures) < 20, len(failures)  # 60 failures, not 60 lines
    assert all(r.repeats > 1 for r in failures[1:])
    assert 1 + sum(r.repeats for r in failures[1:]) <= 60
    assert recs[-1].getMessage() == "landing-zone scan works again" and recs[-1].failures == 60
    fams = {f.name: f for f in text_string_to_metric_families(generate_latest(d.registry).decode())}
    (sample,) = [s for s in fams["freshet_loop_errors"].samples
                 if s.name.endswith("_total") and s.labels == {"loop": "intake_scan"}]
    assert sample.value == 60


CAPTURE_SCRIPT = r"""
import os, subprocess, sys, threading
from ops.logs import setup_logging
setup_logging(sys.argv[1], capture_stderr=True)
# what Spark's JVM does: log4j lines straight to fd 2, a record with an exception under it
os.write(2, b"25/11/26 05:10:00 WARN NativeCodeLoader: Unable to load native-hadoop library\n")
os.write(2, b"25/11/26 05:10:01 ERROR DeltaFileFormatWriter: Aborting job 42.\n"
            b"java.lang.IllegalStateException: SparkContext has been shutdown\n"
            b"\tat org.apache.spark.SparkContext.runJob(SparkContext.scala:2385)\n"
            b"\tat py4j.Gateway.invoke(Gateway.java:282)\n")
subprocess.run(["sh", "-c", "echo 'a child process writes to stderr' >&2"])
print("a library prints to sys.stderr", file=sys.stderr)
t = threading.Thread(target=lambda: 1 / 0, name="worker")
t.start(); t.join()
raise ValueError("several\nlines")
"""


@pytest.mark.parametrize("fmt", ["json", "human"])
def test_everything_on_stderr_goes_through_the_log_format(tmp_path, fmt):
    """fd 2 is a pipe read by a thread: the JVM's log4j lines, child processes, prints and uncaught
    exceptions become log records, each multi-line one a single record (one JSON object)."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    r = subprocess.run([sys.executable, "-c", CAPTURE_SCRIPT, fmt], capture_output=True, text=True, timeout=60,
                       cwd=root, env={**os.environ, "PYTHONPATH": str(root)})
    assert r.returncode == 1 and r.stdout == ""
    if fmt == "human":
        assert "WARNING Unable to load native-hadoop library source=NativeCodeLoader" in r.stderr
        assert "ERROR Aborting job 42.\njava.lang.IllegalStateException" in r.stderr
        return
    recs = [json.loads(line) for line in r.stderr.splitlines()]  # every line is one JSON object
    by_msg = {rec["msg"].split("\n")[0]: rec for rec in recs}
    warn = by_msg["Unable to load native-hadoop library"]
    assert (warn["logger"], warn["level"], warn["source"]) == ("spark", "warning", "NativeCodeLoader")
    err = by_msg["Aborting job 42."]
    assert err["level"] == "error" and err["msg"].count("\n") == 3 and "SparkContext.runJob" in err["msg"]
    assert by_msg["a child process writes to stderr"]["logger"] == "stderr"
    assert by_msg["a library prints to sys.stderr"]["logger"] == "stderr"
    uncaught = [rec for rec in recs if rec["msg"] == "uncaught exception"]
    assert len(uncaught) == 2 and "ZeroDivisionError" in uncaught[0]["exc"] and uncaught[0]["in_thread"] == "worker"
    assert "ValueError: several\nlines" in uncaught[1]["exc"]
    assert len(recs) == 6


def test_py4j_failures_lose_their_traceback_and_ours_keep_it(caplog):
    """Py4J logs a call into a dead JVM through the root logger with a traceback: the daemon's
    handler keeps the message and error, at warning level, without it (the caller logs what failed)."""
    import logging

    import py4j.java_gateway as gateway

    from ops.logs import _py4j_without_traceback

    def record_of(code: str, filename: str) -> logging.LogRecord:
        with caplog.at_level(logging.INFO):
            caplog.clear()
            exec(compile(code, filename, "exec"), {"logging": logging, "gateway": gateway})
        (rec,) = caplog.records
        assert _py4j_without_traceback(rec)
        return rec

    py4j = record_of("try:\n raise gateway.Py4JNetworkError('Answer from Java side is empty')\n"
                     "except Exception:\n logging.exception('Exception while sending command.')", gateway.__file__)
    line = json.loads(JsonFormatter().format(py4j))
    assert line["level"] == "warning" and "exc" not in line
    assert line["msg"] == "py4j: Exception while sending command. (Py4JNetworkError: Answer from Java side is empty)"
    ours = record_of("try:\n 1 / 0\nexcept Exception:\n logging.exception('a job failed')", __file__)
    assert ours.levelname == "ERROR" and "ZeroDivisionError" in json.loads(JsonFormatter().format(ours))["exc"]


@pytest.mark.parametrize("text, n", [
    ("streams:\n  - {name: s, period: 1m}\ntables:\n  - {name: x, stream: s, priority: -1}\n"
     "  - {name: y, stream: s, priority: 0, target_staleness: soon}\n", 3),
    ("streams: [\n  {name: s\n", 1),  # not YAML: the parser's message spans several lines
])
def test_an_invalid_config_is_one_log_record(tmp_path, text, n):
    """`freshet run --log-format json` with an invalid config: exit 2 and one JSON object listing
    every problem (it was a multi-line message outside the log format)."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    (tmp_path / "bad.yaml").write_text(text)
    r = subprocess.run([sys.executable, "-m", "ops.cli", "run", "--config", "bad.yaml", "--log-format", "json"],
                       capture_output=True, text=True, timeout=60, cwd=tmp_path,
                       env={**os.environ, "PYTHONPATH": str(root)})
    assert r.returncode == 2 and r.stdout == ""
    (line,) = r.stderr.splitlines()
    rec = json.loads(line)
    assert (rec["level"], rec["msg"], rec["config"]) == ("error", "invalid configuration", "bad.yaml")
    assert len(rec["problems"]) == n and (n > 1 or "\n" in rec["problems"][0])


def test_track_workers_report_real_durations_and_turn_exceptions_into_failures():
    """A failed job reports how long it really ran (it used to be 0), and an executor that raises
    never kills its track: the exception becomes a JobFailed."""
    import queue
    import time

    from ops.workers import TrackWorkers
    from warehouse.events import JobFailed, StartJob

    def run(job):
        time.sleep(0.3)
        if job.table == "boom":
            raise RuntimeError("executor bug")
        return JobFailed(job_id=job.job_id, reason="spark died")

    results: queue.Queue = queue.Queue()
    workers = TrackWorkers(run, results.put)
    for i, table in enumerate(("t", "boom")):
        workers.submit(StartJob(job_id=i + 1, table=table, track=i, kind="base", start=0.0, end=60.0,
                                new_freshness=60.0, new_safe_freshness=60.0))
    got = sorted((results.get(timeout=5) for _ in range(2)), key=lambda r: r.job.job_id)
    workers.stop()
    assert [type(r.event) for r in got] == [JobFailed, JobFailed]
    assert got[0].event.reason == "spark died" and "RuntimeError: executor bug" in got[1].event.reason
    assert all(r.ended - r.began >= 0.29 for r in got)


def test_a_failing_scan_after_a_reload_is_counted_not_fatal(caplog, monkeypatch):
    """SIGHUP rescans the landing zone for new tables; if that scan fails the daemon carries on
    (the intake loop retries) and the failure is counted."""
    import time
    import types
    from pathlib import Path

    from prometheus_client import generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    from ops.daemon import Daemon, Options
    from warehouse.config import load_config

    path = Path(__file__).resolve().parents[1] / "examples" / "netmon.yaml"
    d = Daemon(load_config(path), Options(config_path=str(path)))

    class BrokenIntake:
        def scan(self):
            raise PermissionError(13, "Permission denied", "landing")

    class Unchanged:  # the executor's part in a reload, without Spark
        log = None

        def evolution_problems(self, new):
            return []

        def reconfigure(self, new, state):
            pass

    class Intake(BrokenIntake):
        def reconfigure(self, new, state, readers=None):
            pass

    import warehouse.lake.recovery
    from ops.reload import Parts

    d.parts = Parts(state=None, intake=Intake(), executor=Unchanged(),
                    sched=types.SimpleNamespace(handle=lambda event, now: [], costs=dict, blueprint=None))
    monkeypatch.setattr(warehouse.lake.recovery, "recover",
                        lambda new, log, progress=None: types.SimpleNamespace(recovered={}, tables={}))
    caplog.set_level(logging.INFO, logger="freshet")
    d._begin_reload(time.time())  # prepared in a thread, switched in by the loop (here: by hand)
    d._switch(d.events.get(timeout=30), time.time())  # does not raise
    assert any(r.getMessage() == "config reloaded" for r in caplog.records)
    deadline = time.monotonic() + 10  # the rescan runs in a thread of its own
    while not any(r.getMessage().startswith("landing-zone scan after the reload failed") for r in caplog.records):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    fams = {f.name: f for f in text_string_to_metric_families(generate_latest(d.registry).decode())}
    (sample,) = [s for s in fams["freshet_loop_errors"].samples
                 if s.name.endswith("_total") and s.labels == {"loop": "intake_scan"}]
    assert sample.value == 1
