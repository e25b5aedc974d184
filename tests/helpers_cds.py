"""A class-data-sharing archive for the tests' Spark JVMs (JDK 17 AppCDS, dynamic archive).

Every daemon, Connect server and script a test starts is a new driver JVM, and most of its start is
loading Spark's and Delta's classes: a session's start and first Delta write and read took
14.1-15.6 s here, 8.8-9.0 s with this archive (three runs each, 28 Nov 2026). The archive is made once
per machine by one training JVM (a session, Delta writes, a join, a MERGE; ~25 s) and kept under
~/.cache/freshet/cds, keyed by the JDK, PySpark and Delta jars.
The JVMs get it through SPARK_SUBMIT_OPTS (tests/conftest.py). A JVM whose class path differs
ignores it silently (`-Xshare:auto`, CDS logging off): slower, never wrong. `make test` makes it
before pytest, beside helm's build (`python -m tests.helpers_cds`); else the first Spark test
does, while any other worker that needs it waits.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

__all__ = ["JVM_OPTS", "archive", "use"]

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "freshet" / "cds"
QUIET = "-Xshare:auto -Xlog:cds=off -Xlog:cds+dynamic=off"

# The tests' JVMs live seconds to minutes on small data: a C1-only JIT and the serial collector cut
# their start on a 2-core machine (a SparkSession's start and first Delta write and read: 16.8-18.6 s
# -> 13.6-16.1 s, three runs each, at 551bee1). spark-submit passes SPARK_SUBMIT_OPTS to the driver
# JVM; every JVM the tests start inherits it (the session's, the daemons', the Connect server's).
# The daemon outside the tests is unchanged. A C1-only JVM reserves 48 MB for compiled code, not
# the 240 MB of the tiered default: a Connect server that recovers four tables filled it in 25 s,
# after which its JIT is off and every new method-handle adapter fails ("Out of space in CodeCache
# for adapters", a NoSuchMethodException at each such call site, for the JVM's life), and a daemon
# over it never caught up (test_connect, 900 s). So the tests reserve the default's size.
JVM_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:ReservedCodeCacheSize=240m"


def _key() -> str:
    """What the archive depends on: the JDK, PySpark's jars and Delta's (names, sizes, mtimes)."""
    import pyspark

    from warehouse.lake.session import DEFAULT_CONF, delta_package, jar_cache_dir, package_cache_dir

    java = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=60).stderr
    jars = [*Path(pyspark.__file__).parent.joinpath("jars").glob("*.jar"),
            *package_cache_dir(jar_cache_dir(dict(DEFAULT_CONF)), delta_package()).glob("jars/*.jar")]
    listing = "\n".join(f"{p.name} {p.stat().st_size} {p.stat().st_mtime_ns}" for p in sorted(jars))
    return hashlib.sha256(f"{java}\n{pyspark.__version__}\n{listing}".encode()).hexdigest()[:16]


def archive(base_opts: str) -> Path | None:
    """The archive for this machine, trained now if missing; None if it cannot be made (the
    tests then run without it)."""
    try:
        path = CACHE / f"spark-{_key()}.jsa"
    except (OSError, subprocess.SubprocessError):
        return None
    if path.is_file():
        return path
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".lock", "w") as lock:  # one training at a time (pytest-xdist workers)
        fcntl.flock(lock, fcntl.LOCK_EX)
        return path if path.is_file() else _trained(base_opts, path)


def _trained(base_opts: str, path: Path) -> Path | None:
    tmp = path.with_suffix(".tmp")  # (under the lock) the JVM writes it at exit
    tmp.unlink(missing_ok=True)
    env = {**os.environ, "SPARK_SUBMIT_OPTS": f"{base_opts} -XX:ArchiveClassesAtExit={tmp} {QUIET}",
           "PYTHONPATH": str(ROOT)}
    try:
        subprocess.run([sys.executable, "-m", "tests.helpers_cds", "--train"], env=env, cwd=ROOT,
                       capture_output=True, timeout=300, check=True)
    except (OSError, subprocess.SubprocessError):
        tmp.unlink(missing_ok=True)
        return None
    if not tmp.is_file():
        return None
    os.replace(tmp, path)
    return path


@functools.cache
def use() -> None:
    """Once per process, before its first Spark test: SPARK_SUBMIT_OPTS gains the archive, when
    there is one (FRESHET_TEST_CDS=0: never)."""
    opts = os.environ.get("SPARK_SUBMIT_OPTS", "")
    if os.environ.get("FRESHET_TEST_CDS", "1") != "0" and "SharedArchiveFile" not in opts:
        path = archive(opts)
        if path is not None:
            os.environ["SPARK_SUBMIT_OPTS"] = f"{opts} -XX:SharedArchiveFile={path} {QUIET}"


def _train() -> None:
    """What the tests' JVMs do first: a session, Delta appends and reads, SQL with a join and a
    window, a MERGE, the table history."""
    from delta.tables import DeltaTable

    from tests.conftest import SPARK_CONF
    from warehouse.config import SparkConfig
    from warehouse.lake.session import get_spark, stop_spark

    spark = get_spark(SparkConfig(master="local[2]", conf=SPARK_CONF))
    with tempfile.TemporaryDirectory() as d:
        path = f"{d}/t"
        df = spark.sql("SELECT id, timestamp_seconds(id * 60) AS ts, CAST(id % 3 AS STRING) AS k, "
                       "CAST(id AS DOUBLE) AS v FROM range(200)")
        df.write.format("delta").partitionBy("k").save(path)
        df.write.format("delta").mode("append").save(path)
        spark.read.format("delta").load(path).createOrReplaceTempView("t")
        spark.sql("SELECT a.k, window(a.ts, '5 minutes') AS w, count(*), sum(b.v) FROM t a JOIN t b "
                  "ON a.id = b.id AND b.ts > a.ts - INTERVAL 2 MINUTES GROUP BY a.k, window(a.ts, '5 minutes')"
                  ).collect()
        DeltaTable.forPath(spark, path).alias("o").merge(df.alias("n"), "o.id = n.id AND o.k = n.k") \
            .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
        DeltaTable.forPath(spark, path).history().collect()
    stop_spark()


if __name__ == "__main__":
    if sys.argv[1:] == ["--train"]:  # the training JVM's driver (`_trained`)
        _train()
    else:  # make the archive now (make test): the path, or why there is none
        made = archive(os.environ.get("SPARK_SUBMIT_OPTS", JVM_OPTS))
        print(f"class-data archive: {made}" if made else "class-data archive: none (the tests run without it)")
