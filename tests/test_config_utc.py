"""A `spark.conf` that moves the session time zone off UTC is refused — by
`freshet validate` and by the config loading of `freshet run` — with an error naming the field.
Partition columns follow the session zone while pruning and replaceWhere use UTC: rows were missed."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from test_config import BASE, _validate, _with

from warehouse.config import load_config, parse_config
from warehouse.errors import ConfigError
from warehouse.lake.session import DEFAULT_CONF, UTC

PARIS = _with(spark={"master": "local[2]", "conf": {"spark.sql.session.timeZone": "Europe/Paris"}})


def test_validate_refuses_a_session_time_zone_other_than_utc(tmp_path: Path) -> None:
    r = _validate(tmp_path, PARIS)
    assert r.returncode == 2 and r.stdout == "", r.stdout + r.stderr
    assert "w.yaml: spark.conf: spark.sql.session.timeZone is 'Europe/Paris': Freshet needs UTC" in r.stderr
    assert "Traceback" not in r.stderr


def test_run_loads_the_config_through_the_same_check(tmp_path: Path) -> None:
    f = tmp_path / "w.yaml"
    f.write_text(yaml.safe_dump(PARIS))
    with pytest.raises(ConfigError, match=r"spark\.conf: spark\.sql\.session\.timeZone is 'Europe/Paris'"):
        load_config(f)  # what `freshet run` (ops/run.py) and a SIGHUP reload read the file with


@pytest.mark.parametrize("zone", ["UTC", "Etc/UTC", "utc", "+00:00", "GMT"])
def test_utc_by_any_name_is_accepted(zone: str) -> None:
    cfg = parse_config(_with(spark={"conf": {"spark.sql.session.timeZone": zone}}))
    assert cfg.spark.conf["spark.sql.session.timeZone"] == zone
    assert {**DEFAULT_CONF, **cfg.spark.conf, **UTC}["spark.sql.session.timeZone"] == "UTC"  # the session's


@pytest.mark.parametrize("zone", ["America/New_York", "+01:00", "PST", ""])
def test_any_other_zone_is_refused(zone: str) -> None:
    with pytest.raises(ConfigError, match="spark.conf: spark.sql.session.timeZone is"):
        parse_config(_with(spark={"conf": {"spark.sql.session.timeZone": zone}}))
    assert parse_config(BASE).spark.conf == {}
