"""One long-lived SparkSession per process, with Delta Lake (docs/warehouse.md §2).

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
import time
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING, Any

from policies.bulk import BULK_POOL, pool_weights
from warehouse.config import SparkConfig

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "BIG_FILE_ROWS",
    "BULK_SPLIT_BYTES",
    "DEFAULT_CONF",
    "LISTING_TASKS",
    "SESSION_CONF",
    "STATIC_CONF",
    "delta_package",
    "fair_pools",
    "get_spark",
    "SparkLink",
    "connection_lost",
    "is_connect",
    "job_description",
    "job_session",
    "jar_cache_dir",
    "package_cache_dir",
    "read_session",
    "stop_spark",
]

# Fixed when the driver starts: set by Freshet's own driver (`master`), by the Connect server's
# command line otherwise (scripts/connect_server.py).
STATIC_CONF: dict[str, str] = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.memory": "2g",
    # Each job runs in a fair-scheduler pool weighted by its table's inherited priority, a bulk job
    # in the light bulk pool (`job_description`, policies.bulk): a valuable short job started beside
    # long ones gets task slots as soon as any task ends, ahead of them, instead of queueing behind
    # every task of the jobs started before it (Spark's FIFO default). The pools are declared in
    # `spark.scheduler.allocation.file` (`fair_pools`).
    "spark.scheduler.mode": "FAIR",
    # Delta's log commits (FileContext) through Hadoop's raw local file system: no `.<name>.crc`
    # sidecar to write and rename, each a `chmod`/`readlink` child process without Hadoop's native
    # library (docs/warehouse.md §2). The FileSystem API keeps its type (S3A's upload buffer casts
    # it); `_local` turns its checksum files off instead.
    "spark.hadoop.fs.AbstractFileSystem.file.impl": "org.apache.hadoop.fs.local.RawLocalFs",
    # Spark's LRU cache of the classes it compiles for generated code, 100 by default: one round of
    # a few tables' jobs compiled more (each window's time bounds are new literals), so every job
    # compiled again the code its shape shares (docs/benchmarks.md § Fixed cost).
    "spark.sql.codegen.cache.maxEntries": "4000",
}


LISTING_TASKS = "spark.sql.sources.parallelPartitionDiscovery.parallelism"

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
    # Delta's VACUUM lists a table's files in this many tasks, whatever the table's size; Spark's
    # default (10,000) made VACUUM of a 4-file table take 53 s on two cores, 4.7-5.3 s with 8-32.
    LISTING_TASKS: "32",
}

DEFAULT_CONF: dict[str, str] = {**STATIC_CONF, **SESSION_CONF}
# Always the session's time zone, whatever `spark.conf` says (the config refuses another zone:
# warehouse.config.SparkConfig): partition columns, pruning and replaceWhere are all in UTC.
UTC: dict[str, str] = {"spark.sql.session.timeZone": "UTC"}

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
    never see each other's (docs/warehouse.md §2). Locally `newSession()` (shares the SparkContext);
    over Spark Connect a server-side clone (same settings), released when the job ends."""
    if not is_connect(spark):
        yield spark.newSession()
        return
    session = spark.cloneSession()  # type: ignore[attr-defined]
    # pyspark 4.2's cloneSession() skips __init__, and stop() then fails on this missing
    # attribute without releasing the server-side session or closing the clone's channel
    session.release_session_on_close = True
    # the clone's client starts with pyspark's default retry policy (10+ minutes): use ours
    session.client.set_retry_policies(spark.client.get_retry_policies())  # type: ignore[attr-defined]
    try:
        yield session
    finally:
        with contextlib.suppress(Exception):
            session.stop()


# A bulk job (policies.bulk), or one reading a file of BIG_FILE_ROWS rows or more (counted, not
# estimated: contention raises the bulk threshold), reads its partitions in splits of this size
# (Spark's default: 128 MB), so the fair scheduler has task boundaries at which to hand a core to a
# valuable job (docs/operations.md, "Short tasks for bulk loads").
BULK_SPLIT_BYTES = str(16 * 1024 * 1024)
BIG_FILE_ROWS = 1_000_000


@contextlib.contextmanager
def read_session(spark: SparkSession, short: bool) -> Iterator[SparkSession]:
    """The session a base job reads and appends its partitions in: the daemon's own, or with
    `short` (bulk, or a big file) a session of its own (`job_session`) whose splits are BULK_SPLIT_BYTES."""
    if not short:
        yield spark
        return
    with job_session(spark) as session:
        session.conf.set("spark.sql.files.maxPartitionBytes", BULK_SPLIT_BYTES)
        yield session


@contextlib.contextmanager
def job_description(spark: SparkSession, text: str, pool: str | None = None) -> Iterator[None]:
    """Name the Spark jobs run inside (the Spark UI's description) and run them in the fair-scheduler
    pool `pool` (policies.bulk.pool_for); a no-op over Connect, whose server takes neither from a
    client (pyspark 4.2: it sets only the call site; SPARK-48040 proposed pools, not merged)."""
    if is_connect(spark):
        yield
        return
    sc = spark.sparkContext
    sc.setLocalProperty("spark.job.description", text)
    if pool is not None:
        sc.setLocalProperty("spark.scheduler.pool", pool)
    try:
        yield
    finally:
        sc.setLocalProperty("spark.job.description", None)  # type: ignore[arg-type]
        if pool is not None:
            sc.setLocalProperty("spark.scheduler.pool", None)  # type: ignore[arg-type]


def package_cache_dir(cache: Path, package: str) -> Path:
    """`<cache>/<artifact>-<version>`: Ivy's folder for one Delta package; for Delta's with more
    packages (`freshet.jars.packages`, comma-separated), `<artifact>-<version>+<artifact>-<version>…`
    — the S3A connector's set: `delta-spark_4.2_2.13-4.4.0+hadoop-aws-3.5.0+s3-2.35.4+…`."""
    names = []
    for coordinate in package.split(","):
        _group, artifact, ver = coordinate.split(":")
        names.append(f"{artifact}-{ver}")
    return cache / "+".join(names)


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


# Spark Connect's client retries an unreachable server for 10+ minutes by default; a job should
# fail within seconds instead and be retried by the Scheduler's back-off (§2.4).
CONNECT_RETRIES = {"max_retries": 4, "initial_backoff": 200, "max_backoff": 2000, "backoff_multiplier": 3.0}


def _connect(cfg: SparkConfig) -> SparkSession:
    """A new Spark Connect session on `cfg.remote` with Freshet's runtime settings.

    Built directly rather than with `SparkSession.builder.remote(…).create()`, so that its very
    first round trip already uses Freshet's short retry policy: an unreachable server fails this
    call in seconds instead of blocking a track (or the watcher) for minutes.
    """
    from pyspark.sql.connect.client.retries import DefaultPolicy
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    assert cfg.remote is not None
    conf = {k: v for k, v in {**SESSION_CONF, **cfg.conf, **UTC}.items() if k not in STATIC_CONF}
    # what `builder.remote()` does: pyspark.sql.functions and friends build Connect expressions
    # (not JVM ones) while this is set
    os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"
    session = ConnectSession(connection=cfg.remote)
    try:
        session.client.set_retry_policies([DefaultPolicy(**CONNECT_RETRIES)])
        session.conf.get("spark.sql.session.timeZone")  # one round trip: the server answers
        for key, value in conf.items():
            try:
                session.conf.set(key, value)  # runtime keys; a static one is the server's
            except Exception as err:
                if connection_lost(err):
                    raise
                print(f"freshet: spark.conf {key} not set on the Spark Connect session: {_first_line(err)}",
                      file=sys.stderr, flush=True)
    except BaseException:
        _quiet_stop(session)  # type: ignore[arg-type]
        raise
    ConnectSession._set_default_and_active_session(session)
    return session  # type: ignore[return-value]


def connection_lost(err: BaseException) -> bool:
    """True when `err` says the Spark Connect server is unreachable or is not the one this
    session was opened on (it restarted): the session is useless and a new one is needed."""
    try:
        from pyspark.errors.exceptions.connect import SparkConnectGrpcException
    except ImportError:  # pragma: no cover - the connect extra is a dependency
        return False
    seen: set[int] = set()
    e: BaseException | None = err
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        text = str(e)
        if isinstance(e, SparkConnectGrpcException):
            code = getattr(getattr(e, "getGrpcStatusCode", lambda: None)(), "name", "")
            if code in ("UNAVAILABLE", "DEADLINE_EXCEEDED") or any(
                    k in text for k in ("StatusCode.UNAVAILABLE", "INVALID_HANDLE.SESSION", "Socket closed",
                                        "Channel closed")):
                return True
        if type(e).__name__ in ("RetriesExceeded", "_MultiThreadedRendezvous", "_InactiveRpcError") and \
                "UNAVAILABLE" in text:
            return True
        e = e.__cause__ or e.__context__
    return False


class SparkLink:
    """The daemon's line to its Spark (docs/warehouse.md §2).

    With `spark.master` it is the process's one session (`get_spark`); the JVM is this process's
    child, and losing it ends the daemon. With `spark.remote` it is a Spark Connect session that
    may be lost — the server restarts, the network drops — without losing the daemon: `lost(err)`
    recognises such an error, drops the session and counts it; the next `session()` (a job's
    retry after its back-off, or `check()` from the daemon's watcher) opens a new one. States:
    connected, lost (`error` says why) → connected again.
    """

    def __init__(self, cfg: SparkConfig) -> None:
        self.cfg = cfg
        self.remote = cfg.remote is not None
        self._lock = threading.Lock()
        self._session: SparkSession | None = None
        self.losses = 0  # connections lost so far
        self.generation = 0  # sessions opened so far: work tagged with an older one is stale
        self.reconnect_every = 5.0  # seconds between reconnection attempts while lost
        self._last_attempt = 0.0
        self.error: str | None = None  # why the last connection was lost (None: connected)
        self._listeners: list[Any] = []

    def on_change(self, fn: Any) -> None:
        """Call `fn(connected: bool, error: str | None)` when the link is lost or restored."""
        self._listeners.append(fn)

    def _notify(self) -> None:
        for fn in list(self._listeners):
            with contextlib.suppress(Exception):
                fn(self.error is None, self.error)

    def session(self) -> SparkSession:
        """The current session, (re)connecting if the last one was lost; raises if Spark is
        unreachable (the caller's job fails and is retried). While the server is lost, one
        attempt per `reconnect_every` seconds: the other callers fail at once instead of queueing
        behind each other's ~10 s attempts."""
        global _session
        if not self.remote:
            return get_spark(self.cfg)
        with self._lock:
            if self._session is not None:
                return self._session
            if self.error is not None and time.monotonic() - self._last_attempt < self.reconnect_every:
                raise _Unreachable(self.error)
            self._last_attempt = time.monotonic()
            session = _connect(self.cfg)
            self._session = session
            self.generation += 1
            with _lock:
                _session = session
            restored = self.error is not None
            self.error = None
        if restored:
            self._notify()
        return session

    def current(self) -> SparkSession | None:
        """The session in use now, without connecting (None: none open)."""
        with self._lock:
            return self._session

    def lost(self, err: BaseException, generation: int | None = None) -> bool:
        """If `err` is a lost Spark Connect connection: drop the session, count it, say so.

        `generation`: `self.generation` when the failed work started. If a newer session has
        been opened since (another thread reconnected), the failure is a lost connection too,
        but an old one: it is not counted again and the new session stays.
        """
        global _session
        if not self.remote or not (isinstance(err, _Unreachable) or connection_lost(err)):
            return False
        with self._lock:
            if generation is not None and generation != self.generation:
                return True
            old, self._session = self._session, None
            first = self.error is None
            self.error = f"Spark Connect server {self.cfg.remote} unreachable: {_first_line(err)}"
            if first:
                self.losses += 1
                self._last_attempt = 0.0  # the first reconnection attempt may come at once
            with _lock:
                if _session is old:
                    _session = None
        if old is not None:
            threading.Thread(target=_quiet_stop, args=(old,), daemon=True).start()
        if first:
            self._notify()
        return True

    def check(self) -> bool:
        """One cheap round trip to the server (reconnecting if needed): True if it answers."""
        if not self.remote:
            return True
        generation = self.generation
        try:
            self.session().conf.get("spark.sql.session.timeZone")
            return True
        except Exception as err:  # noqa: BLE001 — any failure is a lost connection here
            if not self.lost(err, generation):
                self.lost(_Unreachable(f"{type(err).__name__}: {_first_line(err)}"), generation)
            return False

    def close(self) -> None:
        with self._lock:
            old, self._session = self._session, None
        if old is not None:
            _quiet_stop(old)


class _Unreachable(Exception):
    """Stands for any failure of `SparkLink.check` (counted like a lost connection)."""

    def __str__(self) -> str:
        return "UNAVAILABLE: " + super().__str__()


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("details = "):
            return line.removeprefix("details = ").strip('"')[:300]
    return (text.splitlines()[0] if text else type(err).__name__)[:300]


def _quiet_stop(session: SparkSession) -> None:
    with contextlib.suppress(Exception):
        session.stop()


def fair_pools() -> Path:
    """A fair-scheduler allocation file declaring Freshet's pools (policies.bulk.pool_weights):
    `freshet-00-p1024` … `freshet-10-p1`, weighted 1024 … 1 by inherited priority, minShare 1, FAIR
    inside (two jobs of one class share its slots); and `freshet-bulk`, weight 1, minShare 0, FIFO
    inside (bulk loads finish one after another), so a priority pool running no task is served
    before it. All declared up front: no "pool … has not been configured" warning."""
    import tempfile

    pools = "".join(f'  <pool name="{name}"><schedulingMode>{"FIFO" if name == BULK_POOL else "FAIR"}'
                    f"</schedulingMode><weight>{weight}</weight>"
                    f"<minShare>{0 if name == BULK_POOL else 1}</minShare></pool>\n"
                    for name, weight in pool_weights().items())
    path = Path(tempfile.gettempdir()) / f"freshet-fairscheduler-{os.getuid()}-priority.xml"
    text = f'<?xml version="1.0"?>\n<allocations>\n{pools}</allocations>\n'
    if not path.exists() or path.read_text() != text:
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(text)
        tmp.replace(path)
    return path


def _local(cfg: SparkConfig) -> SparkSession:
    """This process as the Spark driver (`cfg.master`), with Delta's jars from the cache."""
    from pyspark.sql import SparkSession

    conf = {**DEFAULT_CONF, **cfg.conf, **UTC}
    if conf.get("spark.scheduler.mode") == "FAIR" and "spark.scheduler.allocation.file" not in conf:
        conf["spark.scheduler.allocation.file"] = fair_pools().as_uri()
    package = delta_package()
    # more Maven packages fetched and cached with Delta's (the S3A connector: warehouse.lake.s3a)
    if more := conf.pop("freshet.jars.packages", ""):
        package = f"{package},{more}"
    excludes = conf.pop("freshet.jars.excludes", "")
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
        conf["spark.jars.packages"] = ",".join([package, *[p for p in extra if p not in package.split(",")]])
        conf["spark.jars.ivy"] = str(cache)
        if excludes:
            conf["spark.jars.excludes"] = ",".join(x for x in [conf.get("spark.jars.excludes", ""), excludes] if x)
        fetched = True
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(conf.get("freshet.logLevel", "WARN"))
    # no checksum file beside each Parquet file, on the cached `file:` file system every task gets;
    # `FileSystem.get`, not `getLocal`: no cast, so a `fs.file.impl` of the user's own is left as it is
    # (`setWriteChecksum` is a no-op but on a checksummed file system)
    jvm, hadoop = spark.sparkContext._jvm, spark.sparkContext._jsc.hadoopConfiguration()  # type: ignore[union-attr]
    jvm.org.apache.hadoop.fs.FileSystem.get(jvm.java.net.URI("file:///"), hadoop).setWriteChecksum(False)
    if fetched:
        _record_jars(cache, package)
    return spark


def stop_spark(settle: float = 10.0) -> None:
    """Stop the process's session (tests and shutdown) once nothing runs on it any more — what
    Spark or Delta still runs after the last job (a checkpoint after a commit) gets up to `settle`
    seconds — so a graceful stop does not end in tasks a stopping executor rejects (logged at
    ERROR with Java stack traces)."""
    global _session
    with _lock:
        if _session is not None:
            with contextlib.suppress(Exception):
                tracker = _session.sparkContext.statusTracker()
                deadline = time.monotonic() + settle
                while (tracker.getActiveJobsIds() or tracker.getActiveStageIds()) and time.monotonic() < deadline:
                    time.sleep(0.05)
            _session.stop()
            _session = None
