"""One long-lived SparkSession per process, with Delta Lake (DESIGN.md §5).

The tracks bound concurrency (§3.2); Spark's default FIFO scheduler serves them. The session is
built from the config's `spark` section (`master`, `app_name`, `conf`) on top of the defaults
below, with Delta's SQL extension and catalog.

Delta's jars come from Maven Central, the way delta-spark documents it (`spark.jars.packages`),
resolved by Ivy into a cache directory Freshet controls:

1. the cache is `spark.jars.ivy` from the config, else `$FRESHET_JARS_DIR`, else
   `~/.cache/freshet/ivy`;
2. the first run resolves `io.delta:delta-spark_2.12:<delta-spark version>` there (it says so on
   stderr) and records the resolved jar files in `freshet-jars.txt`;
3. later runs put exactly those files on `spark.jars` and never touch the network.

`scripts/fetch_jars.py` does step 2 alone (CI pre-fetch).
"""

from __future__ import annotations

import os
import sys
import threading
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING

from warehouse.config import SparkConfig

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["DEFAULT_CONF", "delta_package", "get_spark", "jar_cache_dir", "stop_spark"]

DEFAULT_CONF: dict[str, str] = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "4",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.memory": "2g",
    # Delta replays its log with this many tasks; the default (50) costs ~1 s per snapshot here.
    "spark.databricks.delta.snapshotPartitions": "2",
    # Small local appends: no need for Delta to collect per-file stats on every column.
    "spark.databricks.delta.stats.collect": "true",
    "spark.sql.parquet.compression.codec": "snappy",
}

MANIFEST = "freshet-jars.txt"
_lock = threading.Lock()
_session: SparkSession | None = None


def delta_package() -> str:
    """The Maven coordinate matching the installed delta-spark (Scala 2.12, as pyspark ships)."""
    return f"io.delta:delta-spark_2.12:{version('delta-spark')}"


def jar_cache_dir(conf: dict[str, str] | None = None) -> Path:
    """Where Ivy keeps Delta's jars (see the module docstring)."""
    conf = conf or {}
    if "spark.jars.ivy" in conf:
        return Path(conf["spark.jars.ivy"]).expanduser().resolve()
    env = os.environ.get("FRESHET_JARS_DIR")
    if env:
        return Path(env).expanduser().resolve()
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return (base / "freshet" / "ivy").resolve()


def _cached_jars(cache: Path, package: str) -> list[str] | None:
    """The jar files recorded for `package` on a previous run, if they are all still there."""
    manifest = cache / MANIFEST
    if not manifest.is_file():
        return None
    lines = manifest.read_text().splitlines()
    if not lines or lines[0] != package:
        return None
    jars = [str(cache / "jars" / name) for name in lines[1:] if name]
    return jars if jars and all(Path(j).is_file() for j in jars) else None


def _record_jars(cache: Path, package: str) -> None:
    jars = sorted(p.name for p in (cache / "jars").glob("*.jar"))
    if jars:
        tmp = cache / (MANIFEST + ".tmp")
        tmp.write_text("\n".join([package, *jars]) + "\n")
        tmp.replace(cache / MANIFEST)


def get_spark(cfg: SparkConfig | None = None) -> SparkSession:
    """The process's SparkSession, built on first call from `cfg` (later calls return it)."""
    global _session
    with _lock:
        if _session is not None:
            return _session
        from pyspark.sql import SparkSession

        cfg = cfg or SparkConfig()
        conf = {**DEFAULT_CONF, **cfg.conf}
        package = delta_package()
        cache = jar_cache_dir(conf)
        cache.mkdir(parents=True, exist_ok=True)
        builder = SparkSession.builder.master(cfg.master).appName(cfg.app_name)
        jars = _cached_jars(cache, package)
        fetched = False
        if jars and "spark.jars.packages" not in conf:
            extra = [j for j in conf.pop("spark.jars", "").split(",") if j]
            conf["spark.jars"] = ",".join(jars + extra)
            conf.pop("spark.jars.ivy", None)
        else:
            print(f"freshet: fetching {package} and its dependencies from Maven Central into {cache} "
                  f"(once; later runs use the cache offline)", file=sys.stderr, flush=True)
            extra = [p for p in conf.get("spark.jars.packages", "").split(",") if p]
            conf["spark.jars.packages"] = ",".join([package, *[p for p in extra if p != package]])
            conf["spark.jars.ivy"] = str(cache)
            fetched = True
        for key, value in conf.items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel(conf.get("freshet.logLevel", "WARN"))
        if fetched:
            _record_jars(cache, package)
        _session = spark
        return spark


def stop_spark() -> None:
    """Stop the process's session (tests and shutdown)."""
    global _session
    with _lock:
        if _session is not None:
            _session.stop()
            _session = None
