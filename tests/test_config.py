"""The configuration schema (docs/warehouse.md) and `freshet validate`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from warehouse.config import parse_config, parse_duration
from warehouse.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
BASE = {
    "streams": [{"name": "router_cpu", "period": "5m", "lateness": "1m", "schema": {"ts": "timestamp", "cpu": "double"}}],
    "tables": [
        {"name": "cpu_raw", "stream": "router_cpu", "priority": 1},
        {"name": "cpu_5min", "sources": ["cpu_raw"], "priority": 10, "granularity": "5m", "sql": "SELECT 1"},
    ],
}


def _with(**changes):
    d = json.loads(json.dumps(BASE))
    for k, v in changes.items():
        d[k] = v
    return d


@pytest.mark.parametrize(
    ("text", "seconds"), [("90s", 90), ("5m", 300), ("1h", 3600), ("1d", 86400), ("250ms", 0.25), (12, 12), ("7", 7)]
)
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("bad", ["5x", "-1s", "", "m5", True, -3, float("inf"), float("nan"), 1e308, "9" * 40 + "d", 10**400])
def test_bad_durations(bad):
    with pytest.raises(ValueError, match="bad duration"):
        parse_duration(bad)


def test_a_negative_duration_is_named_as_such_in_either_spelling():
    for bad in ("-5m", -300, "-1.5h"):
        with pytest.raises(ValueError, match=r"negative \(must be from 0 to 100 years\)"):
            parse_duration(bad)
    assert str(parse_duration("-0")) == "0.0"


def test_valid_config_round_trip():
    cfg = parse_config(BASE)
    assert cfg.stream("router_cpu").period == 300 and cfg.stream("router_cpu").lateness == 60
    assert cfg.table("cpu_5min").granularity == 300
    assert cfg.scheduler.tracks == 4 and cfg.scheduler.partitioner == "auto"
    # `chop: none` as the CLI and `sim tune` write it is null: no chopping
    # (one parser with the CLI's --chop: warehouse.config.parse_chop)
    chops = ("none", "None", "off", None, 3, "3", "2.5", "auto", "AUTO")
    assert [parse_config(_with(scheduler={"chop": c})).scheduler.chop for c in chops] == \
        [None, None, None, None, 3.0, 3.0, 2.5, "auto", "auto"]
    # and the tuner's default follows the value read, not its spelling: `AUTO` is auto, so it tunes
    assert [parse_config(_with(scheduler={"chop": c})).scheduler.autotune for c in ("AUTO", "auto", "none")] == \
        ["apply", "apply", "off"]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (_with(tables=[{"name": "a", "stream": "router_cpu"}, {"name": "d", "sources": ["cpu_rw"]}]),
         "table 'd' reads unknown source 'cpu_rw'"),
        (_with(tables=[{"name": "cpu_raw", "stream": "router_cpu"}, {"name": "d", "sources": ["cpu_rw"]}]),
         "did you mean 'cpu_raw'"),
        (_with(tables=[{"name": "a", "stream": "nope"}]), "table 'a' reads unknown stream 'nope'"),
        (_with(tables=[{"name": "a", "stream": "router_cpu"}, {"name": "x", "sources": ["y"]},
                       {"name": "y", "sources": ["z"]}, {"name": "z", "sources": ["x", "a"]}]),
         "cycle in the table DAG: x -> y -> z -> x"),
        (_with(tables=[{"name": "a", "stream": "router_cpu"}, {"name": "a", "stream": "router_cpu"}]),
         "duplicate table name 'a'"),
        (_with(tables=[{"name": "a", "stream": "router_cpu", "sources": ["a"]}]),
         "table 'a' is a base table (stream 'router_cpu') and must not have sources"),
        (_with(streams=[{"name": "s", "period": "5 minutes"}], tables=[{"name": "a", "stream": "s"}]),
         "streams[s].period: bad duration '5 minutes'"),
        (_with(tables=[{"name": "a", "stream": "router_cpu", "priority": 0}]), "tables[a].priority: Input should be greater than 0"),
        (_with(tables=[{"name": "a", "stream": "router_cpu", "priority": -2}]), "tables[a].priority"),
        (_with(scheduler={"tracks": 0}), "scheduler.tracks: Input should be greater than or equal to 1"),
        (_with(scheduler={"policy": "shortest"}), "scheduler.policy"),
        (_with(scheduler={"trakcs": 2}), "scheduler.trakcs: Extra inputs are not permitted — did you mean 'tracks'?"),
        (_with(scheduler={"rollout": {"horizn": 60}}), "scheduler.rollout.horizn: Extra inputs are not permitted — "
                                                      "did you mean 'horizon'?"),
        (_with(tables=[{"name": "a", "stream": "router_cpu", "priorty": 2}]),
         "tables[a].priorty: Extra inputs are not permitted — did you mean 'priority'?"),
        (_with(schedular={"tracks": 2}), "schedular: Extra inputs are not permitted — did you mean 'scheduler'?"),
        (_with(scheduler={"zzz": 1}), "scheduler.zzz: Extra inputs are not permitted (got 1)"),  # nothing close
        (_with(tables=[{"name": "a", "sources": []}]), "needs either a stream (base) or sources (derived)"),
        (_with(spark={"master": "local[2]", "remote": "sc://127.0.0.1:15002"}),
         "spark: set either master ('local[2]') or remote ('sc://127.0.0.1:15002'), not both"),
        (_with(spark={"remote": "http://spark:15002"}), "spark: remote 'http://spark:15002' is not a Spark Connect URL"),
        (_with(streams=[{"name": "router_cpu", "period": "5m"}, {"name": "orphan", "period": "1m"}],
               tables=[{"name": "a", "stream": "router_cpu"}]),
         "streams[orphan]: stream 'orphan' is read by no table — add a base table with `stream: orphan` or "
         "remove the stream"),
        (_with(streams=[{"name": "s", "period": "1m", "max_future_skew": "soon"}], tables=[{"name": "a", "stream": "s"}]),
         "streams[s].max_future_skew: bad duration 'soon'"),
        # found by the hostile-config property test: each once reached the planner as inf or NaN
        (_with(streams=[{"name": "router_cpu", "period": float("inf")}]), "streams[router_cpu].period: bad duration"),
        (_with(tables=[{"name": "a", "stream": "router_cpu", "cost": {"alpha": float("nan")}}]),
         "tables[a].cost.alpha: bad duration"),
        (_with(tables=[{"name": "a", "stream": "router_cpu", "cost": {"beta": float("inf")}}]), "tables[a].cost.beta"),
        (_with(tables=[{"name": "a", "stream": "router_cpu", "cost": {"beta": 1e308}}]),
         "tables[a].cost.beta: Input should be less than or equal to 1000000"),
        (_with(tables=[{"name": "a", "stream": "router_cpu", "priority": 1e308}]), "tables[a].priority"),
        (_with(scheduler={"k": float("inf")}), "scheduler.k"),
        (_with(scheduler={"chop": "sometimes"}),
         "scheduler.chop: expected a number c ≥ 1, `auto` or `none` (got 'sometimes')"),
        (_with(scheduler={"chop": True}), "write `none` for no chopping"),  # YAML's unquoted `on`
        (_with(scheduler={"chop": 0.5}), "scheduler.chop"),
        # c < 1 and inf are named as chop's own error (both once read "Input should be 'auto'")
        (_with(scheduler={"chop": "0.5"}), "scheduler.chop: expected a number c ≥ 1"),
        (_with(scheduler={"chop": "inf"}), "scheduler.chop: expected a number c ≥ 1"),
    ],
)
def test_errors_name_the_field_and_problem(data, message):
    with pytest.raises(ConfigError) as err:
        parse_config(data, source="w.yaml")
    assert message in str(err.value)
    assert str(err.value).startswith("w.yaml: ")


def _validate(tmp_path: Path, data, *extra: str) -> subprocess.CompletedProcess:
    f = tmp_path / "w.yaml"
    f.write_text(yaml.safe_dump(data) if not isinstance(data, str) else data)
    return subprocess.run(
        [sys.executable, "-m", "ops.cli", "validate", "--config", str(f), *extra],
        capture_output=True, text=True, cwd=ROOT, timeout=60,
    )


def test_validate_prints_dag_priorities_and_plan(tmp_path):
    r = _validate(tmp_path, BASE)
    assert r.returncode == 0, r.stderr
    assert "cpu_5min" in r.stdout and "Ip=10" in r.stdout and "Track plan: proportional" in r.stdout


def test_validate_json(tmp_path):
    r = _validate(tmp_path, BASE, "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["order"] == ["cpu_raw", "cpu_5min"]
    raw = d["tables"][0]
    assert raw["period_seconds"] == 300 and raw["priority"] == 1 and raw["inherited_priority"] == 10  # max
    assert d["plan"]["partitioner"] == "proportional" and d["plan"]["tracks"] == 4
    assert sum(len(c["tables"]) for c in d["plan"]["clusters"]) == 2


def test_spark_is_master_or_remote():
    assert parse_config(BASE).spark.master == "local[*]" and parse_config(BASE).spark.remote is None
    cfg = parse_config(_with(spark={"remote": "sc://spark-connect.spark:15002"}))
    assert cfg.spark.remote == "sc://spark-connect.spark:15002" and cfg.spark.master is None
    assert parse_config(_with(spark={"remote": "sc://h:15002/;token=abc;use_ssl=true"})).spark.remote


def test_validate_says_which_spark(tmp_path):
    r = _validate(tmp_path, BASE)
    assert r.returncode == 0 and "Spark: master local[*] (embedded" in r.stdout, r.stdout + r.stderr
    r = _validate(tmp_path, _with(spark={"remote": "sc://127.0.0.1:15002"}), "--json")
    assert r.returncode == 0, r.stderr
    sp = json.loads(r.stdout)["spark"]
    assert sp["mode"] == "remote" and sp["remote"] == "sc://127.0.0.1:15002" and sp["master"] is None
    r = _validate(tmp_path, _with(spark={"remote": "sc://127.0.0.1:15002"}))
    assert "Spark: remote sc://127.0.0.1:15002 (Spark Connect server" in r.stdout


def test_validate_rejects_with_file_field_and_exit_code(tmp_path):
    r = _validate(tmp_path, _with(tables=[{"name": "a", "stream": "router_cpu"}, {"name": "d", "sources": ["cpu_rw"]}]))
    assert r.returncode == 2
    assert r.stdout == "" and "w.yaml: table 'd' reads unknown source 'cpu_rw'" in r.stderr
    assert "Traceback" not in r.stderr
    r = _validate(tmp_path, "tables: [a, b\n")
    assert r.returncode == 2 and "not valid YAML" in r.stderr


def test_validate_names_a_stream_no_table_reads(tmp_path):
    """Such a config was accepted, and the stream's first partition killed the daemon."""
    r = _validate(tmp_path, _with(streams=[{"name": "router_cpu", "period": "5m"}, {"name": "orphan", "period": "1m"}],
                                  tables=[{"name": "a", "stream": "router_cpu"}]))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "w.yaml: streams[orphan]: stream 'orphan' is read by no table — add a base table" in r.stderr


def test_stream_landing_options_default_and_parse():
    cfg = parse_config(_with(streams=[{"name": "s", "period": "1m"}, {"name": "t", "period": "1m",
                                      "max_future_skew": "1h", "allow_overlap": True}],
                             tables=[{"name": "a", "stream": "s"}, {"name": "b", "stream": "t"}]))
    assert (cfg.stream("s").max_future_skew, cfg.stream("s").allow_overlap) == (300.0, False)
    assert (cfg.stream("t").max_future_skew, cfg.stream("t").allow_overlap) == (3600.0, True)


def test_validate_the_shipped_examples(tmp_path):
    for example in sorted((ROOT / "examples").glob("*.yaml")):
        r = subprocess.run([sys.executable, "-m", "ops.cli", "validate", "--config", str(example)],
                           capture_output=True, text=True, cwd=ROOT, timeout=60)
        assert r.returncode == 0, (example, r.stderr)


def pure_modules() -> list[str]:
    """Every module of the pure engine (docs/architecture.md): warehouse's top level, policies/, tracks/."""
    mods = [f"warehouse.{p.stem}" for p in (ROOT / "warehouse").glob("*.py") if p.stem != "__init__"]
    for pkg in ("policies", "tracks"):
        mods += [f"{pkg}.{p.stem}" for p in (ROOT / pkg).glob("*.py") if p.stem != "__init__"]
    return sorted(mods)


def test_engine_imports_nothing_heavy():
    """The core stays pure: importing any of its modules loads no Spark, SimPy, Prometheus, HTTP
    or pyarrow, and none of the I/O rooms. New modules are covered by the glob."""
    mods = pure_modules()
    assert {"warehouse.scheduler", "warehouse.freshness", "policies.basic", "tracks.plan"} <= set(mods)
    code = (
        f"import importlib, sys\nfor m in {mods!r}: importlib.import_module(m)\n"
        "heavy = ('pyspark', 'simpy', 'prometheus_client', 'fastapi', 'httpx', 'uvicorn', 'pyarrow',\n"
        "         'warehouse.lake', 'warehouse.landing', 'sim', 'ops')\n"
        "bad = [m for m in heavy if m in sys.modules]\n"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


def test_validate_imports_no_spark():
    """`freshet validate` checks a config on a machine without Java: no Spark, no SimPy."""
    code = ("import sys, ops.validate\nbad = [m for m in ('pyspark', 'simpy') if m in sys.modules]\n"
            "print(bad); sys.exit(1 if bad else 0)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
