"""A derived table's SQL against its Delta table's schema (Olston et al., *Graceful Logic
Evolution in Web Data Processing Workflows*; docs/warehouse.md §4, Schema changes).

A SQL whose output adds columns evolves the table's schema (Delta's mergeSchema); one that drops
or retypes a column is not additive, and is written only by a job that rewrites the whole table of
one that says `rebuild: true`. `table_schema_change` is what a job checks before its write;
`evolution_problems` what a reload checks before it applies a new config, and `analyze_derived`
analyses every derived SQL against its sources' schemas — neither runs a Spark job.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from warehouse.config import FreshetConfig, TableConfig
from warehouse.lake.delta import (
    DERIVED_TIME_COLUMN,
    read_delta,
    spark_schema_ddl,
    table_path,
    time_column,
    with_partition_column,
)
from warehouse.lake.outcome import failure_reason
from warehouse.lake.session import job_session
from warehouse.lake.stateful import state_rows
from warehouse.sqltext import bind_window, sql_version

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from warehouse.lake.files import LiveFiles
    from warehouse.lake.recovery import DeltaLog

__all__ = ["ADDITIVE", "analyze_derived", "evolution_problems", "schema_change", "table_schema_change"]

ADDITIVE = "additive"  # new columns only: Delta schema evolution


def schema_change(have: dict[str, str], new: dict[str, str]) -> str | None:
    """Column → type before and after a SQL change: None (the same), ADDITIVE (new columns only),
    or what makes it not additive."""
    dropped = sorted(set(have) - set(new))
    changed = sorted(c for c in set(have) & set(new) if have[c] != new[c])
    if not dropped and not changed:
        return ADDITIVE if set(new) - set(have) else None
    what = [f"drops column(s) {', '.join(dropped)}"] if dropped else []
    what += [f"changes {c} from {have[c]} to {new[c]}" for c in changed]
    return "; ".join(what)


def _columns(schema: Any) -> dict[str, str]:
    return {f.name: f.dataType.simpleString() for f in schema.fields}


def table_schema_change(config: FreshetConfig, log: DeltaLog, files: LiveFiles | None, tc: TableConfig,
                        df: DataFrame) -> str | None:
    """How `df`'s schema differs from `tc`'s Delta table's now (`schema_change`; None when there
    is no table yet). The table's schema comes from its log's files where they say it."""
    path = table_path(config, tc.name)
    version = log.version(path)
    if version is None:
        return None
    try:
        schema = files.schema(path, version, DERIVED_TIME_COLUMN) if files is not None else None
        if schema is None:
            schema = read_delta(df.sparkSession, path, None).schema
        have = _columns(schema)
    except Exception:  # noqa: BLE001 — no table yet (a race with its first commit): nothing to compare
        return None
    return schema_change(have, _columns(df.schema))


def evolution_problems(old: FreshetConfig, new: FreshetConfig, log: DeltaLog, spark: SparkSession) -> list[str]:
    """For a reload: each derived table whose SQL in `new` would change its Delta schema in a way
    that is not additive while the table does not say `rebuild: true` — analysed by Spark against
    the sources' schemas, no job run."""
    changed = [tc for tc in new.tables if not tc.is_base and not tc.rebuild
               and tc.name in {t.name for t in old.tables}
               and sql_version(tc.sql) != sql_version(old.table(tc.name).sql)]
    if not changed:
        return []
    problems: list[str] = []
    with job_session(spark) as session:
        schemas: dict[str, Any] = {}
        _analyze(new, session, schemas)
        for tc in changed:
            path = table_path(new, tc.name)
            if tc.name not in schemas or log.version(path) is None:
                continue  # a SQL that does not analyse fails its jobs with its own reason
            change = schema_change(_columns(read_delta(session, path, None).schema), _columns(schemas[tc.name]))
            if change not in (None, ADDITIVE):
                problems.append(f"tables[{tc.name}].sql: the new SQL {change} — not an additive schema change; "
                                f"set `rebuild: true` on the table to rewrite it whole with the new schema")
    return problems


def analyze_derived(config: FreshetConfig, spark: SparkSession) -> dict[str, str]:
    """Analyse every derived table's SQL against its sources' schemas, running no Spark job.

    Base sources are empty views with their stream's declared schema (plus the partition
    column); derived sources take the analysed output of their own SQL, in DAG order. Returns
    table → problem for each SQL that does not analyse or has no `ts` column (empty: all fine).
    """
    with job_session(spark) as session:
        return _analyze(config, session)


def _analyze(config: FreshetConfig, session: SparkSession, schemas: dict[str, Any] | None = None) -> dict[str, str]:
    """Problems per table; `schemas` (if given) receives each table's analysed schema."""
    schemas = {} if schemas is None else schemas
    problems: dict[str, str] = {}
    remaining = list(config.tables)
    while remaining:
        progressed = False
        for tc in list(remaining):
            if tc.stream is not None:
                ddl = spark_schema_ddl(config.stream(tc.stream).schema_)
                df: DataFrame = session.createDataFrame([], ddl) if ddl else session.createDataFrame([], "ts timestamp")
            elif all(s in schemas or s in problems for s in tc.sources):
                if any(s in problems for s in tc.sources):
                    problems[tc.name] = "a source's SQL does not analyse"
                    remaining.remove(tc)
                    progressed = True
                    continue
                for s in tc.sources:
                    session.createDataFrame([], schemas[s]).createOrReplaceTempView(s)
                try:
                    df = session.sql(bind_window((tc.increment if tc.is_stateful else tc.sql) or "", 0.0, 1.0))
                    _ = df.schema
                except Exception as err:  # noqa: BLE001 — reported per table
                    problems[tc.name] = failure_reason(err)
                    remaining.remove(tc)
                    progressed = True
                    continue
                if tc.is_stateful:  # the state's columns (lake.stateful): no partition column
                    schemas[tc.name] = state_rows(tc, df).schema
                    remaining.remove(tc)
                    progressed = True
                    continue
                if DERIVED_TIME_COLUMN not in df.columns:
                    problems[tc.name] = f"the sql must output a {DERIVED_TIME_COLUMN!r} column (its event time)"
            else:
                continue
            df = with_partition_column(df, tc, time_column(config, tc) if tc.stream else DERIVED_TIME_COLUMN, 0.0)
            schemas[tc.name] = df.schema
            remaining.remove(tc)
            progressed = True
        if not progressed:
            break
    return problems
