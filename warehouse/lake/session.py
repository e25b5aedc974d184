"""One long-lived SparkSession per process, with Delta Lake (DESIGN.md §5).

The tracks bound concurrency (§3.2); Spark's default FIFO scheduler serves them. The session is
built from the config's `spark` section on top of the defaults below:

- `master` (`local[*]`, `spark://…`, `k8s://…`): this process is the Spark driver. It starts with
  `STATIC_CONF` (Delta's SQL extension and catalog, driver memory) and Delta's jars.
- `remote` (`sc://host:port`): a Spark Connect client. The server owns the static settings and
  Delta's jars (`scripts/connect_server.py` starts one with them); the daemon sets only the
  runtime `SESSION_CONF` and the runtime keys of `conf` on its session.

Delta's jars come from Maven Central, the way delta-spark documents it (`spark.jars.packages`),
resolved by Ivy into a cache directory Freshet controls:

1. the cache is `spark.jars.ivy` from the config, else `$FRESHET_JARS_DIR`, else
   `~/.cache/freshet/ivy`; each Delta package gets a folder of its own in it
   (`delta-spark_4.2_2.13-4.4.0/`), so two Freshet versions can share one cache;
2. the first run resolves `io.delta:delta-spark_<spark>_<scala>:<delta-spark version>` there (it
   says so on stderr) and records the resolved jar files in `freshet-jars.txt`;
3. later runs put exactly those files on `spark.jars` and never touch the network.

`scripts/fetch_jars.py` does step 2 alone (CI pre-fetch).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING

from warehouse.config import SparkConfig

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "DEFAULT_CONF",
    "SESSION_CONF",
    "STATIC_CONF",
    "delta_package",
    "get_spark",
    "is_connect",
    "job_description",
    "job_session",
    "jar_cache_dir",
    "package_cache_dir",
    "stop_spark",
]

# Fixed when the driver starts: set by Freshet's own driver (`master`), by the Connect server's
# command line otherwise (scripts/connect_server.py).
STATIC_CONF: dict[str, str] = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.memory": "2g",
}

# Runtime SQL settings of the daemon's session, locally and over Spark Connect. Measured with
# scripts/bench_delta.py (docs/warehouse.md §7): Freshet's appends are small, and Spark 4's
# defaults are sized for big jobs.
SESSION_CONF: dict[str, str] = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "4",
    # Delta replays its log with this many tasks; the default (50) costs ~1 s per snapshot here.
    "spark.databricks.delta.snapshotPartitions": "2",
    "spark.databricks.delta.stats.collect": "true",
    "spark.sql.parquet.compression.codec": "snappy",
    # Spark 4.1+ rejects named parameters bound through `spark.sql(sql, args={...})` (the
    # derived SQL's :window_start/:window_end) with UNBOUND_SQL_PARAMETER — apache/spark#55392;
    # the pre-4.1 substitution still works.
    "spark.sql.legacy.parameterSubstitution.constantsOnly": "true",
}

DEFAULT_CONF: dict[str, str] = {**STATIC_CONF, **SESSION_CONF}

MANIFEST = "freshet-jars.txt"
_lock = threading.Lock()
_session: SparkSession | None = None


def delta_package() -> str:
    """The Maven coordinate matching the installed pyspark and delta-spark.

    Delta 4.x publishes one artifact per Spark minor version, for Scala 2.13 (what pyspark 4
    ships): `io.delta:delta-spark_4.2_2.13:4.4.0` — the coordinate delta-spark's own
    `configure_spark_with_delta_pip` asks for.
    """
    spark = ".".join(version("pyspark").split(".")[:2])
    return f"io.delta:delta-spark_{spark}_2.13:{version('delta-spark')}"


def is_connect(spark: object) -> bool:
    """True for a Spark Connect session (no SparkContext, no JVM in this process)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


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


@contextlib.contextmanager
def job_session(spark: SparkSession) -> Iterator[SparkSession]:
    """A session of its own for one job: temp views are per session, so concurrent derived jobs
    never see each other's (DESIGN.md §5). Locally `newSession()` (shares the SparkContext);
    over Spark Connect a server-side clone (same settings), released when the job ends."""
    if not is_connect(spark):
        yield spark.newSession()
        return
    session = spark.cloneSession()  # type: ignore[attr-defined]
    try:
        yield session
    finally:
        with contextlib.suppress(Exception):
            session.stop()


@contextlib.contextmanager
def job_description(spark: SparkSession, text: str) -> Iterator[None]:
    """Name the Spark jobs run inside (the Spark UI's description); a no-op over Connect."""
    if is_connect(spark):
        yield
        return
    sc = spark.sparkContext
    sc.setLocalProperty("spark.job.description", text)
    try:
        yield
    finally:
        sc.setLocalProperty("spark.job.description", None)  # type: ignore[arg-type]


def package_cache_dir(cache: Path, package: str) -> Path:
    """`<cache>/<artifact>-<version>`: Ivy's folder for one Delta package."""
    _group, artifact, ver = package.split(":")
    return cache / f"{artifact}-{ver}"


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
        cfg = cfg or SparkConfig()
        _session = _connect(cfg) if cfg.remote else _local(cfg)
        return _session


def _connect(cfg: SparkConfig) -> SparkSession:
    """A Spark Connect session on `cfg.remote` with Freshet's runtime settings."""
    from pyspark.sql import SparkSession

    assert cfg.remote is not None
    conf = {k: v for k, v in {**SESSION_CONF, **cfg.conf}.items() if k not in STATIC_CONF}
    builder = SparkSession.builder.remote(cfg.remote)
    for key, value in conf.items():
        builder = builder.config(key, value)  # runtime keys only; the server ignores static ones
    return builder.getOrCreate()


def _local(cfg: SparkConfig) -> SparkSession:
    """This process as the Spark driver (`cfg.master`), with Delta's jars from the cache."""
    from pyspark.sql import SparkSession

    conf = {**DEFAULT_CONF, **cfg.conf}
    package = delta_package()
    cache = package_cache_dir(jar_cache_dir(conf), package)
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
    return spark


def stop_spark() -> None:
    """Stop the process's session (tests and shutdown)."""
    global _session
    with _lock:
        if _session is not None:
            _session.stop()
            _session = None
