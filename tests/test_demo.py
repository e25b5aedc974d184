"""The demo producer restarted in the same directory continues each stream (defect 6)."""

from __future__ import annotations

from pathlib import Path

from ops.demo import Producer, resume_points
from warehouse.config import load_config, parse_config
from warehouse.lake.recovery import RecoveryState, TableState
from warehouse.landing.intake import Intake

T0 = 1_764_000_000.0
ROOT = Path(__file__).resolve().parents[1]


def netmon(tmp_path: Path):
    raw = load_config(ROOT / "examples" / "netmon.yaml").model_dump(by_alias=True)
    raw["warehouse"] = {"root": str(tmp_path / "data"), "landing": str(tmp_path / "landing")}
    return parse_config(raw)


def test_a_restarted_producer_continues_after_the_delta_log_and_the_landing_zone(tmp_path):
    cfg = netmon(tmp_path)
    now = [T0]
    first = Producer(cfg, speed=600.0, start=T0 - 3600.0, clock=lambda: now[0])
    first.step()
    now[0] += 3.0  # 30 warehouse minutes
    first.step()
    intake = Intake(cfg)
    arrived = intake.scan()
    ends = {s.name: max(e.end for e in arrived if e.stream == s.name) for s in cfg.streams}
    # the daemon loaded syslog up to its newest partition; router_cpu's newest is still pending;
    # the Delta log holds cpu_raw up to 10 minutes before that
    state = RecoveryState(tables={t.name: TableState() for t in cfg.tables}, loaded={})
    state.tables["syslog_raw"].freshness = ends["syslog"]
    state.tables["cpu_raw"].freshness = ends["router_cpu"] - 600
    for e in arrived:  # loaded partitions leave the landing zone (archived to _loaded)
        if e.stream == "syslog":
            intake.mark_loaded("syslog_raw", "syslog", {e.partition_id: intake.partition("syslog", e.partition_id).fingerprint})
    after = resume_points(cfg, state)
    assert after["syslog"] == ends["syslog"] and after["router_cpu"] == ends["router_cpu"]

    # the restart: a new producer (other random content) a minute of wall time later
    now[0] += 60.0
    second = Producer(cfg, speed=600.0, start=now[0] - 3600.0, clock=lambda: now[0], seed=1, after=after)
    second.step()
    now[0] += 1.0  # 10 warehouse minutes
    assert second.step() > 0
    restarted = Intake(cfg)
    got = restarted.scan()
    assert sum(restarted.quarantined.values()) == 0, dict(restarted.last_rejection)
    new = [e for e in got if e.partition_id not in {a.partition_id for a in arrived}]
    for s in cfg.streams:
        mine = sorted((e for e in new if e.stream == s.name), key=lambda e: e.end)
        if s.name in after and mine:
            assert mine[0].start == after[s.name], s.name  # right after, no gap and no overlap
    assert {e.stream for e in new} >= {"syslog", "router_cpu", "link_alerts"}


def test_resume_points_read_the_delta_log_when_no_state_is_given(tmp_path):
    cfg = netmon(tmp_path)
    assert resume_points(cfg) == {}  # nothing anywhere: the producer starts --backfill ago


def test_the_demo_refuses_a_landing_zone_on_a_bucket(tmp_path):
    """It writes local files: given `s3a://…` it would write them under a directory named `s3a:`
    in the current one, which no intake reads."""
    import pytest

    from warehouse.errors import ConfigError

    raw = netmon(tmp_path).model_dump(by_alias=True)
    raw["warehouse"] = {"root": str(tmp_path / "data"), "landing": "s3a://lake/landing"}
    cfg = parse_config(raw)
    with pytest.raises(ConfigError, match="the demo producer writes into a local landing zone"):
        Producer(cfg, speed=600.0, start=T0)
