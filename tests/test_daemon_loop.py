"""The scheduler loop keeps running (docs/architecture.md: only a bug in Freshet may stop it): a SIGHUP
whose preparation fails keeps the old config and says why (defect 4); a disk error in a step of
the loop is logged, counted and retried (defect 8).

The loop runs for real in a thread with the real Scheduler, the real intake on a real landing
zone, real Delta logs read from their files and the real HTTP API; only Spark is left out (the
track workers' executor is a stand-in: these tests are about the loop, not the jobs)."""

from __future__ import annotations

import logging
import shutil
import signal
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import yaml
from conftest import warehouse_dict, write_minutes
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from ops.daemon import Daemon, Options
from ops.reload import Parts
from tests.helpers_live import wait_for
from warehouse.config import FreshetConfig, load_config
from warehouse.events import JobFailed, StartJob
from warehouse.lake.recovery import TableState, recover
from warehouse.landing.intake import Intake
from warehouse.scheduler import Scheduler


class NoSpark:
    """The executor's part the loop uses, without Spark: every job fails (a file went missing)."""

    def __init__(self, config: FreshetConfig) -> None:
        self.config = config
        from warehouse.lake.recovery import LocalLog

        self.log = LocalLog()

    def execute(self, job: StartJob) -> JobFailed:
        return JobFailed(job_id=job.job_id, reason="FileNotFoundError: a data file is gone")

    def table_state(self, table: str) -> TableState:
        return TableState()

    def evolution_problems(self, new: FreshetConfig) -> list[str]:
        return []

    def reconfigure(self, config: FreshetConfig, state: Any = None) -> None:
        self.config = config


def offline_daemon(path: Path, **opts: Any) -> Daemon:
    """A daemon on the config at `path` with its parts built as at start, minus Spark."""
    from ops.actions import ActionStore, OperatorActions, store_path

    cfg = load_config(path)
    d = Daemon(cfg, Options(config_path=str(path), **opts))
    state = recover(cfg)
    d.parts = Parts(state, Intake(cfg, state, on_count=d.metrics.intake_counted), NoSpark(cfg), Scheduler(cfg, now=time.time(), recovered=state.recovered))
    d.actions = OperatorActions(ActionStore(store_path(cfg)), lambda: d.config, d.holder.get, d.events.put,
                                lambda table, action: None, time.time)
    d.holder.publish(d.sched.stats(time.time()))
    d.accepting = True
    return d


class Running:
    """`d._loop()` in a thread, as `Daemon.run` calls it; `stop()` sends it SIGTERM's flag."""

    def __init__(self, d: Daemon) -> None:
        self.d = d
        self.result: list[Any] = []
        self.thread = threading.Thread(target=self._run, name="test-loop", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.result.append(self.d._loop())
        except BaseException as e:  # the defect: the loop died
            self.result.append(e)

    def alive(self) -> bool:
        return self.thread.is_alive()

    def stop(self) -> Any:
        self.d._term = signal.SIGTERM
        self.thread.join(10)
        self.d.workers.stop()
        return self.result[0] if self.result else None


def samples(d: Daemon, family: str) -> dict[tuple[tuple[str, str], ...], float]:
    fams = {f.name: f for f in text_string_to_metric_families(generate_latest(d.registry).decode())}
    return {tuple(sorted(s.labels.items())): s.value for s in fams[family].samples if s.name.endswith("_total")}


def test_a_reload_whose_recovery_raises_keeps_the_old_config_and_says_why(tmp_path: Path, caplog) -> None:
    """Defect 4: a new table over a half-written commit JSON made recovery raise out of the reload
    and stopped the loop. Now nothing switches, the loop goes on, the reason is logged, counted
    and in /v1/status; once the log is sound the next SIGHUP applies the config."""
    from ops.api import ApiServer, create_app
    from ops.backend import DaemonBackend

    path = tmp_path / "freshet.yaml"
    src = warehouse_dict(tmp_path)
    path.write_text(yaml.safe_dump(src))
    d = offline_daemon(path)
    old = d.config
    srv = ApiServer(create_app(DaemonBackend(d), d.registry), "127.0.0.1", 0)
    client = httpx.Client(base_url=f"http://127.0.0.1:{srv.start()}", timeout=5)
    loop = Running(d)
    try:
        src["tables"].append({"name": "m_copy", "stream": "m", "cost": {"alpha": 1, "beta": 0.01}})
        path.write_text(yaml.safe_dump(src))
        log_dir = tmp_path / "data" / "m_copy" / "_delta_log"
        log_dir.mkdir(parents=True)
        (log_dir / f"{0:020d}.json").write_text('{"commitInfo":{"timestamp":1764000000000,"userMeta')  # torn
        caplog.set_level(logging.INFO, logger="freshet")
        d._hup = True  # what the SIGHUP handler sets
        wait_for("the reload counted", lambda: samples(d, "freshet_config_reloads").get(
            (("result", "failed"),)) == 1, timeout=10, every=0.05)
        time.sleep(0.3)
        assert loop.alive(), loop.result
        assert d.config is old and d.intake.config is old and d.parts.executor.config is old
        assert "m_copy" not in {t.name for t in d.sched.stats(time.time()).tables}
        (rec,) = [r for r in caplog.records if r.getMessage().startswith("config reload failed")]
        assert "m_copy" in rec.reason and "JSONDecodeError" in rec.reason
        status = client.get("/v1/status").json()
        assert status["reload"]["result"] == "failed" and "m_copy" in status["reload"]["reason"]
        assert status["config"] == str(path) and status["tables"] == len(old.tables)

        shutil.rmtree(tmp_path / "data" / "m_copy")  # the log is sound again (an empty table)
        d._hup = True
        wait_for("the reload applied", lambda: samples(d, "freshet_config_reloads").get(
            (("result", "ok"),)) == 1, timeout=10, every=0.05)
        assert "m_copy" in {t.name for t in d.config.tables}
        assert d.intake.config is d.config and d.parts.executor.config is d.config
        status = client.get("/v1/status").json()
        assert status["reload"]["result"] == "ok" and status["reload"]["added"] == ["m_copy"]
    finally:
        assert loop.stop() == 0
        srv.stop()


def test_a_disk_error_in_a_step_of_the_loop_is_logged_counted_and_retried(tmp_path: Path, caplog) -> None:
    """Defect 8: a partition found unloadable after a failed job is quarantined from the loop; the
    quarantine cannot be written (landing/_quarantine is a file, not a directory). The OSError
    used to stop the loop. Now it is logged, counted in freshet_loop_errors_total{loop="quarantine"}
    and retried by the intake's next scan once the disk lets it: the partition ends in quarantine,
    the loop never stopped."""
    path = tmp_path / "freshet.yaml"
    path.write_text(yaml.safe_dump(warehouse_dict(tmp_path)))
    d = offline_daemon(path, retry_every=0.1)
    (pid,) = write_minutes(d.config, "a", 0, 1)
    events = d.intake.scan()
    assert [e.partition_id for e in events] == [pid]
    partition = Path(d.config.warehouse.landing) / "a" / pid
    for f in partition.glob("*.parquet"):
        f.unlink()  # accepted, then its data file went missing: the recheck finds it unloadable
    blocker = Path(d.config.warehouse.landing) / "_quarantine"
    blocker.write_text("not a directory")
    caplog.set_level(logging.INFO, logger="freshet")
    loop = Running(d)
    try:
        d.events.put(events[0])
        wait_for("the failed quarantine counted", lambda: samples(d, "freshet_loop_errors").get(
            (("loop", "quarantine"),), 0) >= 1, timeout=10, every=0.05)
        assert loop.alive(), loop.result
        assert any(r.getMessage().startswith(f"cannot quarantine partition a/{pid} yet") for r in caplog.records)
        assert partition.is_dir()  # not lost: still where it was
        blocker.unlink()  # the disk lets us again
        assert d.intake.scan() == []  # the intake thread's next scan finishes the quarantine
        assert "file missing" in (blocker / "a" / pid / "reason").read_text()
        assert d.intake.quarantined["a"] == 1
        assert samples(d, "freshet_partitions_quarantined").get((("stream", "a"),)) == 1
        assert loop.alive()
    finally:
        assert loop.stop() == 0


