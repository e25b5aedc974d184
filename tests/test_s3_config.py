"""`warehouse.s3` (the S3A connector for an s3a:// root) in the config, and the Spark settings and
jars the daemon derives from it (warehouse.lake.s3a). No Spark, no server: the settings as data."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from warehouse.config import parse_config
from warehouse.errors import ConfigError
from warehouse.lake.s3a import (
    DEFAULT_PROVIDER,
    ENV_PROVIDER,
    S3A_EXCLUDES,
    hadoop_version,
    s3a_packages,
    spark_config,
)
from warehouse.lake.session import package_cache_dir

BASE: dict[str, Any] = {"streams": [{"name": "s", "period": "1m"}], "tables": [{"name": "t", "stream": "s"}]}
ENV = {"AWS_ACCESS_KEY_ID": "id", "AWS_SECRET_ACCESS_KEY": "secret"}
S3A = "spark.hadoop.fs.s3a."


def config(warehouse: dict[str, Any], spark: dict[str, Any] | None = None) -> Any:
    return parse_config({**BASE, "warehouse": {"landing": "/tmp/in", **warehouse}, **({"spark": spark} if spark else {})})


def error(warehouse: dict[str, Any], spark: dict[str, Any] | None = None) -> str:
    with pytest.raises(ConfigError) as exc:
        config(warehouse, spark)
    return str(exc.value)


def test_bad_s3_settings_are_refused_naming_the_field() -> None:
    assert "warehouse.s3.endpoint" in error({"root": "s3a://b/wh", "s3": {"endpoint": "127.0.0.1:9000"}})
    assert "warehouse.s3.endpoint" in error({"root": "s3a://b/wh", "s3": {"endpoint": "http://h:9000/b/wh"}})
    assert "warehouse.s3.region" in error({"root": "s3a://b/wh", "s3": {"region": "EU West 1"}})
    assert "warehouse.s3.credentials" in error({"root": "s3a://b/wh", "s3": {"credentials": "inline"}})
    assert "warehouse.s3.secret" in error({"root": "s3a://b/wh", "s3": {"secret": "x"}})
    assert "not an s3a:// URI" in error({"root": "/srv/wh", "s3": {}})
    assert "write s3a://b/wh" in error({"root": "s3://b/wh", "s3": {}})


def test_no_credentials_in_the_config_file() -> None:
    for key in ("spark.hadoop.fs.s3a.secret.key", "spark.hadoop.fs.s3a.access.key",
                "spark.hadoop.fs.s3a.bucket.wh.secret.key", "spark.hadoop.fs.s3a.session.token"):
        msg = error({"root": "s3a://b/wh"}, {"conf": {key: "x"}})
        assert key in msg and "AWS_ACCESS_KEY_ID" in msg, msg


def test_an_s3a_root_gets_the_connector_and_its_settings() -> None:
    cfg = config({"root": "s3a://b/wh", "s3": {"endpoint": "http://127.0.0.1:9000/", "path_style": True,
                                                 "credentials": "env"}},
                 {"master": "local[2]", "conf": {S3A + "path.style.access": "false", "spark.ui.enabled": "false"}})
    conf = spark_config(cfg, ENV).conf
    assert conf[S3A + "endpoint"] == "http://127.0.0.1:9000"
    assert conf[S3A + "connection.ssl.enabled"] == "false"
    assert conf[S3A + "endpoint.region"] == "us-east-1"
    assert conf[S3A + "aws.credentials.provider"] == ENV_PROVIDER
    assert conf[S3A + "input.stream.type"] == "classic"
    assert conf[S3A + "create.performance"] == "true"
    assert conf[S3A + "path.style.access"] == "false"  # the config's own spark.conf wins
    assert conf["spark.ui.enabled"] == "false"
    assert conf["freshet.jars.packages"] == s3a_packages()
    assert "software.amazon.awssdk:bundle" in conf["freshet.jars.excludes"].split(",")
    assert not any("secret" in v or v == "id" for v in conf.values())  # the credentials stay in the environment


def test_the_default_chain_needs_no_environment_and_aws_needs_no_endpoint() -> None:
    conf = spark_config(config({"root": "s3a://b/wh", "s3": {"region": "eu-west-1"}}), {}).conf
    assert conf[S3A + "aws.credentials.provider"] == DEFAULT_PROVIDER
    assert conf[S3A + "endpoint.region"] == "eu-west-1" and S3A + "endpoint" not in conf
    # an s3a root without an s3 section: the connector with its defaults
    assert spark_config(config({"root": "s3a://b/wh"}), {}).conf[S3A + "path.style.access"] == "false"


def test_env_credentials_missing_from_the_environment_is_a_config_error() -> None:
    cfg = config({"root": "s3a://b/wh", "s3": {"credentials": "env"}})
    with pytest.raises(ConfigError, match="AWS_SECRET_ACCESS_KEY is not set"):
        spark_config(cfg, {"AWS_ACCESS_KEY_ID": "id"})


def test_a_local_root_or_a_remote_spark_gets_no_jars() -> None:
    local = config({"root": "/srv/wh"})
    assert spark_config(local, {}) is local.spark
    remote = spark_config(config({"root": "s3a://b/wh"}, {"remote": "sc://127.0.0.1:15002"}), {})
    assert "freshet.jars.packages" not in remote.conf and remote.conf[S3A + "input.stream.type"] == "classic"


def test_a_landing_zone_on_a_bucket_gets_the_connector_beside_a_local_root() -> None:
    """The base jobs read a bucket's partitions as s3a:// URIs: the connector is set up for them
    even when the tables are local, and `warehouse.s3` is accepted for the landing zone alone."""
    cfg = config({"root": "/srv/wh", "landing": "s3a://b/in", "s3": {"endpoint": "http://127.0.0.1:9000",
                                                                     "path_style": True}})
    conf = spark_config(cfg, {}).conf
    assert conf[S3A + "endpoint"] == "http://127.0.0.1:9000" and conf[S3A + "path.style.access"] == "true"
    assert conf["freshet.jars.packages"] == s3a_packages()
    s3 = spark_config(config({"root": "/srv/wh", "landing": "s3://b/in"}), {})  # s3:// is the same bucket
    assert s3.conf[S3A + "path.style.access"] == "false"
    assert "names no bucket" in error({"landing": "s3a:///in"})


def test_a_warehouse_and_a_landing_zone_both_in_a_bucket_need_a_local_state_directory() -> None:
    """The daemon's own files (operator actions, lineage runs, the tuner's trace) live on this
    machine: with the root and the landing zone both in a bucket the daemon failed at its start
    (the actions store had nowhere to go); the config now asks for `warehouse.state`."""
    from ops.actions import store_path
    from warehouse.paths import state_dir

    both = {"root": "s3a://b/wh", "landing": "s3a://b/in", "s3": {}}
    assert "warehouse.state" in error(both) and "both URIs" in error(both)
    assert "must be a local directory" in error({**both, "state": "s3a://b/state"})
    cfg = config({**both, "state": "/srv/freshet"})
    assert store_path(cfg) == Path("/srv/freshet/actions.json")
    assert state_dir("/srv/wh", "/srv/in") == Path("/srv/wh/_freshet")  # the default is unchanged
    assert state_dir("s3a://b/wh", "/srv/in") == Path("/srv/in/_freshet")


def test_the_connector_matches_the_hadoop_client_pyspark_ships() -> None:
    hadoop = hadoop_version()
    coordinates = s3a_packages().split(",")
    assert coordinates[0] == f"org.apache.hadoop:hadoop-aws:{hadoop}"
    assert all(c.startswith("software.amazon.awssdk:") for c in coordinates[1:])
    assert all(x.count(":") == 1 for x in S3A_EXCLUDES)
    folder = package_cache_dir(Path("/c"), "io.delta:delta-spark_4.2_2.13:4.4.0," + s3a_packages("3.5.0"))
    assert folder.name.startswith("delta-spark_4.2_2.13-4.4.0+hadoop-aws-3.5.0+s3-2.35.4+")
    assert package_cache_dir(Path("/c"), "io.delta:delta-spark_4.2_2.13:4.4.0").name == "delta-spark_4.2_2.13-4.4.0"
