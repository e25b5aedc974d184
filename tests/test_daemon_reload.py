"""SIGHUP off the loop: a reload is prepared in a thread while the scheduler loop serves events and
systemd's watchdog, then switched in with one `Reconfigure`; what arrived meanwhile is kept; a
preparation made stale by a commit of a table it adds is made again; the trace file is decided
again for the new config; during start each table's Delta log read feeds the watchdog.

As in test_daemon_loop: the real loop in a thread, the real Scheduler, intake, landing zone and
Delta logs read from their files; Spark is left out (a stand-in executor whose reload check — in
the daemon, Spark's analysis of changed SQL — is held at a gate, to look at the loop meanwhile)."""

from __future__ import annotations

import logging
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import BUCKET_SQL, warehouse_dict, write_minutes

from ops.autotune import trace_file
from tests.helpers_live import wait_for
from tests.test_daemon_loop import NoSpark, Running, offline_daemon, samples
from warehouse.config import FreshetConfig
from warehouse.events import JobFinished, StartJob


class Gated(NoSpark):
    """NoSpark whose first reload check waits for `gate` (Spark analysing a changed SQL, slowly);
    with `finish`, its jobs finish."""

    def __init__(self, config: FreshetConfig, gate: threading.Event, finish: bool = False) -> None:
        super().__init__(config)
        self.gate, self.finish, self.checks = gate, finish, 0

    def evolution_problems(self, new: FreshetConfig) -> list[str]:
        self.checks += 1
        if self.checks == 1:
            assert self.gate.wait(60)
        return []

    def execute(self, job: StartJob) -> Any:
        if self.finish:
            return JobFinished(job_id=job.job_id, duration=0.01, rows=4)
        return super().execute(job)


class Notifications:
    """systemd's end of sd_notify(3): a datagram socket; `NOTIFY_SOCKET` points at it."""

    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.sock.settimeout(0.02)
        self.got: list[tuple[float, str]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while not self._stop.is_set():
            try:
                self.got.append((time.monotonic(), self.sock.recv(4096).decode()))
            except TimeoutError:
                continue

    def since(self, t: float, prefix: str = "") -> list[str]:
        return [m for at, m in list(self.got) if at >= t and m.startswith(prefix)]

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self.sock.close()


@pytest.fixture()
def systemd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Under a stand-in systemd: WatchdogSec=0.1s (a ping every 0.05 s)."""
    path = tmp_path / "notify.sock"
    n = Notifications(path)
    monkeypatch.setenv("NOTIFY_SOCKET", str(path))
    monkeypatch.setenv("WATCHDOG_USEC", "100000")
    monkeypatch.delenv("WATCHDOG_PID", raising=False)
    yield n
    n.close()


def _table(d: Any, name: str) -> Any:
    return next(t for t in d.holder.get().tables if t.name == name)


def test_a_reload_is_prepared_off_the_loop_which_serves_events_and_the_watchdog_meanwhile(
        tmp_path: Path, systemd: Notifications) -> None:
    """The loop stalled for the whole reload: reading the file, Spark's analysis of the SQL, every
    table's Delta log, the landing rescan; no event was served and no WATCHDOG=1 sent meanwhile.
    Now a partition that arrives while the preparation waits is handled at once, the watchdog is
    fed, and the switch keeps it (a_raw stays: its pending partition with it)."""
    path = tmp_path / "freshet.yaml"
    src = warehouse_dict(tmp_path)
    path.write_text(yaml.safe_dump(src))
    d = offline_daemon(path)
    old = d.config
    gate = threading.Event()
    d.parts.executor = Gated(d.config, gate)
    loop = Running(d)
    try:
        src["tables"].append({"name": "m_copy", "stream": "m", "cost": {"alpha": 1, "beta": 0.01}})
        path.write_text(yaml.safe_dump(src))
        write_minutes(d.config, "a", 0, 1)
        (arrival,) = d.intake.scan()
        d._hup = True  # what the SIGHUP handler sets
        wait_for("the reload being prepared", lambda: d.parts.executor.checks == 1, timeout=10, every=0.02)
        t0 = time.monotonic()
        d.events.put(arrival)
        wait_for("the partition handled while the reload is prepared", lambda: samples(
            d, "freshet_partitions_arrived").get((("stream", "a"),)) == 1, timeout=10, every=0.02)
        time.sleep(0.4)
        assert d.config is old and "m_copy" not in {t.name for t in d.holder.get().tables}  # not switched yet
        assert len(systemd.since(t0, "WATCHDOG=1")) >= 3  # fed all along
        assert systemd.since(0, "RELOADING=1")
        gate.set()
        wait_for("the reload applied", lambda: samples(d, "freshet_config_reloads").get(
            (("result", "ok"),)) == 1, timeout=20, every=0.05)
        wait_for("the switch published", lambda: "m_copy" in {t.name for t in d.holder.get().tables},
                 timeout=10, every=0.05)
        assert d.config is not old and d.intake.config is d.config and d.parts.executor.config is d.config
        a_raw = _table(d, "a_raw")  # the partition that arrived meanwhile is still a_raw's to load
        assert a_raw.pending_partitions == 1, a_raw
        wait_for("READY=1 after the reload", lambda: systemd.since(t0, "READY=1"), timeout=10, every=0.05)
        assert loop.alive(), loop.result
    finally:
        gate.set()
        assert loop.stop() == 0


def test_a_reload_made_stale_by_a_commit_of_a_table_it_reads_is_prepared_again(tmp_path: Path, caplog) -> None:
    """A job of m_raw finishes while a reload that adds a table reading m_raw is prepared: what
    the preparation read of the logs is behind, so it is prepared again before the switch."""
    path = tmp_path / "freshet.yaml"
    src = warehouse_dict(tmp_path)
    path.write_text(yaml.safe_dump(src))
    d = offline_daemon(path)
    gate = threading.Event()
    d.parts.executor = Gated(d.config, gate, finish=True)
    caplog.set_level(logging.INFO, logger="freshet")
    loop = Running(d)
    try:
        src["tables"].append({"name": "m_5m_again", "sources": ["m_raw"], "granularity": "5m", "sql": BUCKET_SQL,
                              "cost": {"alpha": 1, "beta": 0.01}})
        path.write_text(yaml.safe_dump(src))
        write_minutes(d.config, "m", 0, 1)
        (arrival,) = d.intake.scan()
        d._hup = True
        wait_for("the reload being prepared", lambda: d.parts.executor.checks == 1, timeout=10, every=0.02)
        d.events.put(arrival)
        wait_for("m_raw's job finished", lambda: _table(d, "m_raw").jobs_completed == 1, timeout=10, every=0.02)
        gate.set()
        wait_for("the reload applied", lambda: samples(d, "freshet_config_reloads").get(
            (("result", "ok"),)) == 1, timeout=20, every=0.05)
        assert d.parts.executor.checks == 2  # prepared twice
        (again,) = [r for r in caplog.records if r.getMessage().startswith("reload prepared again")]
        assert again.tables == ["m_raw"]
        assert "m_5m_again" in {t.name for t in d.config.tables}
        assert loop.alive(), loop.result
    finally:
        gate.set()
        assert loop.stop() == 0


def test_a_reload_that_turns_the_tuner_on_decides_the_trace_file_again(tmp_path: Path) -> None:
    """The trace file was decided once, at start: a daemon started with `autotune: off` and no
    trace, switched on by SIGHUP, kept no trace and its tuner reported `no_trace` for ever. Now
    the reload decides it again: the daemon appends to it and the tuner reads it."""
    path = tmp_path / "freshet.yaml"
    src = warehouse_dict(tmp_path)
    src["scheduler"]["autotune"] = "off"
    path.write_text(yaml.safe_dump(src))
    d = offline_daemon(path)
    assert d.config.scheduler.autotune == "off" and d.trace_path is None and d.tuner.trace is None
    loop = Running(d)
    try:
        src["scheduler"].update(autotune="apply", autotune_every=1)
        path.write_text(yaml.safe_dump(src))
        d._hup = True
        wait_for("the reload applied", lambda: samples(d, "freshet_config_reloads").get(
            (("result", "ok"),)) == 1, timeout=20, every=0.05)
        expected = trace_file(d.config, None)[0]
        assert expected is not None and d.config.scheduler.autotune == "apply"
        assert d.trace_path == expected and d.tuner.trace == expected
        write_minutes(d.config, "a", 0, 1)
        (arrival,) = d.intake.scan()
        d.events.put(arrival)
        wait_for("the arrival in the trace", lambda: arrival.partition_id in Path(expected).read_text(),
                 timeout=10, every=0.05)
        d.tuner.busy = None
        wait_for("an evaluation", lambda: d.tuner.last is not None or d.tuner.running, timeout=10, every=0.05)
        assert d.tuner.last is None or d.tuner.last["result"] != "no_trace", d.tuner.last
        assert samples(d, "freshet_autotune_runs").get((("result", "no_trace"),)) == 0
    finally:
        assert loop.stop() == 0
        d.tuner.close()
        if d._trace is not None:
            d._trace.close()


def test_the_start_feeds_the_watchdog_while_it_reads_the_delta_logs(tmp_path: Path, systemd: Notifications,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A long recovery at start (every table's Delta log replayed) sent nothing to systemd until
    READY=1: TimeoutStartSec killed a start that was making progress. Now each table read beats
    the watchdog and extends the start timeout (EXTEND_TIMEOUT_USEC), rate-limited."""
    import types

    import warehouse.lake.recovery as recovery
    from ops.daemon import Daemon, Options
    from warehouse.config import load_config

    src = warehouse_dict(tmp_path)
    src["tables"] += [{"name": f"x{i}", "stream": "a", "cost": {"alpha": 1, "beta": 0.01}} for i in range(30)]
    path = tmp_path / "freshet.yaml"
    path.write_text(yaml.safe_dump(src))
    read = recovery.read_table_state

    def slow(p: str, table: str) -> Any:  # a log on slow storage: 20 ms a table
        time.sleep(0.02)
        return read(p, table)

    monkeypatch.setattr(recovery, "read_table_state", slow)
    d = Daemon(load_config(path), Options(config_path=str(path)))
    d.spark = types.SimpleNamespace(spark=object(), remote=False)  # started: no JVM in this test
    t0 = time.monotonic()
    assert d._startup()
    beats = systemd.since(t0, "WATCHDOG=1")
    assert len(beats) >= 5, beats  # 34 tables × 20 ms, a beat every 50 ms at most
    assert all("EXTEND_TIMEOUT_USEC=300000000" in b and "STATUS=recovering" in b for b in beats)
    assert len(beats) <= 34 * 0.02 / 0.05 + 4


def test_a_reload_leaves_no_reference_cycle_behind(tmp_path: Path) -> None:
    """What a reload prepares is frozen out of the garbage collector (no full collection scans it),
    so it must be freed by reference counts alone: a reference cycle in it — the recovery's
    recursive closure over the config and every table's state — kept every config and Delta state
    a reload replaced for ever (30,000 objects a reload at 1,000 tables)."""
    import gc
    import types

    from warehouse.lake.recovery import TableState

    path = tmp_path / "freshet.yaml"
    src = warehouse_dict(tmp_path)
    path.write_text(yaml.safe_dump(src))
    d = offline_daemon(path)
    (tmp_path / "data" / "m_raw" / "_delta_log").mkdir(parents=True)  # a table's log Delta cleaned up:
    (tmp_path / "data" / "m_raw" / "_delta_log" / f"{3:020d}.json").write_text(  # its origin repaired
        '{"commitInfo":{"timestamp":1764000000000,"operation":"OPTIMIZE"}}\n')
    src["tables"].append({"name": "m_copy", "stream": "m", "cost": {"alpha": 1, "beta": 0.01}})
    path.write_text(yaml.safe_dump(src))
    gc.collect()
    gc.disable()  # as while a reload is prepared
    try:
        prepared = d.reloader.prepare(d.config, d.parts, time.time())
        assert prepared.result == "ok", prepared.reason
        del prepared
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        left = [type(o).__name__ for o in gc.garbage if isinstance(o, FreshetConfig | TableState)]
        left += [f.__qualname__ for f in gc.garbage if isinstance(f, types.FunctionType)
                 and f.__module__.split(".")[0] in ("warehouse", "ops")]  # a closure that calls itself
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert left == []


def test_a_reloads_preparation_gives_way_to_a_turn_of_the_loop(tmp_path: Path) -> None:
    """Between two tables' Delta logs the reload thread waits while the loop serves an event: two
    busy threads share the interpreter by 5 ms slices, so a turn of the loop (a snapshot of 10,000
    tables) lasted two to ten times its CPU time while a reload was prepared."""
    path = tmp_path / "freshet.yaml"
    path.write_text(yaml.safe_dump(warehouse_dict(tmp_path)))
    d = offline_daemon(path)
    reached = threading.Event()
    out: list[Any] = []

    def pause() -> None:
        reached.set()
        d._give_way()

    d._waiting.clear()  # the loop is in a turn
    thread = threading.Thread(target=lambda: out.append(d.reloader.prepare(d.config, d.parts, time.time(), pause=pause)))
    thread.start()
    assert reached.wait(30)  # the first table's log is read
    time.sleep(0.1)
    assert thread.is_alive() and not out  # it waits for the turn to end
    d._waiting.set()  # the loop waits for an event again
    thread.join(30)
    assert out and out[0].result == "ok", out
