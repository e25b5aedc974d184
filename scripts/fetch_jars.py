#!/usr/bin/env python3
"""Fetch Delta Lake's jars from Maven Central into Freshet's cache, once (for CI and offline use).

Starts a throwaway local SparkSession the same way the daemon does (warehouse/lake/session.py):
the first time, Ivy resolves `io.delta:delta-spark_<spark>_2.13:<version>` (for pyspark 4.2 and
delta-spark 4.4: `io.delta:delta-spark_4.2_2.13:4.4.0`, about 33 jars, 87 MB) into
`<cache>/<artifact>-<version>/` (`$FRESHET_JARS_DIR`, default `~/.cache/freshet/ivy`) and records
the jar files; afterwards every session — and a local Spark Connect server started by
`scripts/connect_server.py` — puts the cached jars on `spark.jars` and never touches the network.

    .venv/bin/python scripts/fetch_jars.py
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from warehouse.config import SparkConfig  # noqa: E402
from warehouse.lake.session import (  # noqa: E402
    MANIFEST,
    delta_package,
    get_spark,
    jar_cache_dir,
    package_cache_dir,
    stop_spark,
)


def main() -> int:
    package = delta_package()
    cache = package_cache_dir(jar_cache_dir(), package)
    spark = get_spark(SparkConfig(master="local[1]", conf={"spark.ui.enabled": "false"}))
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
