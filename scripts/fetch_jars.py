#!/usr/bin/env python3
"""Fetch Delta Lake's jars from Maven Central into Freshet's cache, once (for CI and offline use).

Starts a throwaway local SparkSession the same way the daemon does (warehouse/lake/session.py):
the first time, Ivy resolves `io.delta:delta-spark_2.12:<version>` into the cache directory
(`$FRESHET_JARS_DIR`, default `~/.cache/freshet/ivy`) and records the jar files; afterwards every
session puts the cached jars on `spark.jars` and never touches the network.

    .venv/bin/python scripts/fetch_jars.py
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from warehouse.config import SparkConfig  # noqa: E402
from warehouse.lake.session import MANIFEST, delta_package, get_spark, jar_cache_dir, stop_spark  # noqa: E402


def main() -> int:
    cache = jar_cache_dir()
    spark = get_spark(SparkConfig(master="local[1]", conf={"spark.ui.enabled": "false"}))
    spark.range(1).collect()
    stop_spark()
    manifest = cache / MANIFEST
    if not manifest.is_file():
        print(f"fetch_jars: no jars recorded in {cache}", file=sys.stderr)
        return 1
    jars = manifest.read_text().splitlines()[1:]
    print(f"{delta_package()}: {len(jars)} jar(s) cached in {cache / 'jars'}")
    for j in jars:
        print(f"  {j}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
