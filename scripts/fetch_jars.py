#!/usr/bin/env python3
"""Fetch Delta Lake's jars from Maven Central into Freshet's cache, once (for CI and offline use).

Starts a throwaway local SparkSession the same way the daemon does (warehouse/lake/session.py):
the first time, Ivy resolves `io.delta:delta-spark_<spark>_2.13:<version>` (for pyspark 4.2 and
delta-spark 4.4: `io.delta:delta-spark_4.2_2.13:4.4.0`, about 33 jars, 87 MB) into
`<cache>/<artifact>-<version>/` (`$FRESHET_JARS_DIR`, default `~/.cache/freshet/ivy`) and records
the jar files; afterwards every session — and a local Spark Connect server started by
`scripts/connect_server.py` — puts the cached jars on `spark.jars` and never touches the network.

`--s3a` fetches the set a daemon with an `s3a://` warehouse root uses instead (warehouse.lake.s3a):
Delta's jars and the Hadoop S3A connector's — `org.apache.hadoop:hadoop-aws` at pyspark's Hadoop
version and the AWS SDK v2 modules it needs (`s3`, `s3-transfer-manager`, `sts`), about 60 jars,
~100 MB in `delta-spark_4.2_2.13-4.4.0+hadoop-aws-3.5.0+…/` (Spark resolves packages when its JVM
starts, so each set is one run of this script).

    .venv/bin/python scripts/fetch_jars.py [--s3a]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from warehouse.config import SparkConfig  # noqa: E402
from warehouse.lake.s3a import S3A_EXCLUDES, s3a_packages  # noqa: E402
from warehouse.lake.session import (  # noqa: E402
    MANIFEST,
    delta_package,
    get_spark,
    jar_cache_dir,
    package_cache_dir,
    stop_spark,
)


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    conf = {"spark.ui.enabled": "false"}
    package = delta_package()
    if "--s3a" in args:
        conf |= {"freshet.jars.packages": s3a_packages(), "freshet.jars.excludes": ",".join(S3A_EXCLUDES)}
        package = f"{package},{conf['freshet.jars.packages']}"
    cache = package_cache_dir(jar_cache_dir(), package)
    spark = get_spark(SparkConfig(master="local[1]", conf=conf))
    spark.range(1).collect()
    stop_spark()
    manifest = cache / MANIFEST
    if not manifest.is_file():
        print(f"fetch_jars: no jars recorded in {cache}", file=sys.stderr)
        return 1
    jars = manifest.read_text().splitlines()[1:]
    size = sum((cache / "jars" / j).stat().st_size for j in jars) / 1e6
    print(f"{package}: {len(jars)} jar(s), {size:.0f} MB, cached in {cache / 'jars'}")
    for j in jars:
        print(f"  {j}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
