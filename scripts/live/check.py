"""The output check: at the end of a contestant's run, does each derived table equal its
SQL (`Spec.derived`) over the contestant's *own* base tables, window by window?

Computed independently of every contestant's Spark: the tables are read with delta-rs
(`deltalake`) and the expected rows computed with pyarrow and numpy. The windows checked are the
*complete* ones: those whose end is at most what the sources hold (their trailing edge, floored to
the granularity) and at most what the derived table itself claims (its newest `ts`). The roll-ups'
windows are their buckets, `(start, end]` labelled by the end as the spec says; the join's are the
10-second buckets `(start, end]` of the left row's time (a reporting grid: the join has no
granularity). A stateful table is one window: its state, key by key, against the aggregate of its
source up to the newest time it holds. A roll-up is also checked against the other convention, `[start, end)` (Structured
Streaming's `window()`), as a secondary figure; rows the derived table holds for windows its
sources do not cover yet (an incomplete window committed) are counted apart.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from scripts.live.spec import DEFAULT, Derived, Spec

__all__ = ["JOIN_GRID", "check", "check_table"]

JOIN_GRID = 10.0  # seconds: the join's reporting windows (the shortest period)
_US = 1_000_000
_LIMIT = 50  # mismatching windows listed per table (all are counted)


def _dataset(path: Path) -> Any | None:
    from deltalake import DeltaTable

    if not any((path / "_delta_log").glob("*.json")):
        return None
    return DeltaTable(str(path)).to_pyarrow_dataset()


def _us(col: Any) -> Any:
    """A timestamp column as int64 microseconds since the epoch (numpy)."""
    import pyarrow as pa

    return col.cast(pa.timestamp("us", tz="UTC")).cast(pa.int64()).to_numpy(zero_copy_only=False)


def _newest(ds: Any) -> int | None:
    newest = None
    for batch in ds.to_batches(columns=["ts"]):
        if batch.num_rows:
            m = int(_us(batch.column(0)).max())
            newest = m if newest is None else max(newest, m)
    return newest


def _rollup_expected(ds: Any, g_us: int) -> tuple[dict, dict]:
    """{(bucket end µs, key): (count, sum)} for the `(start, end]` and `[start, end)` conventions,
    aggregated batch by batch (a burst table holds tens of millions of rows)."""
    import pyarrow as pa

    right: dict[tuple[int, int], list] = defaultdict(lambda: [0, 0.0])
    left: dict[tuple[int, int], list] = defaultdict(lambda: [0, 0.0])
    for batch in ds.to_batches(columns=["ts", "key", "value"]):
        if not batch.num_rows:
            continue
        us = _us(batch.column(0))
        for acc, end in ((right, -(-us // g_us) * g_us), (left, (us // g_us + 1) * g_us)):
            t = pa.table({"e": pa.array(end), "k": batch.column(1), "v": batch.column(2)})
            agg = t.group_by(["e", "k"]).aggregate([("v", "count"), ("v", "sum")]).to_pydict()
            for e, k, n, s in zip(agg["e"], agg["k"], agg["v_count"], agg["v_sum"], strict=True):
                cell = acc[(int(e), int(k))]
                cell[0] += int(n)
                cell[1] += float(s or 0.0)
    return right, left


def _rollup_actual(ds: Any) -> dict[int, dict[int, list[tuple[int, float]]]]:
    out: dict[int, dict[int, list[tuple[int, float]]]] = defaultdict(lambda: defaultdict(list))
    for batch in ds.to_batches(columns=["ts", "key", "n", "total"]):
        if not batch.num_rows:
            continue
        d = batch.to_pydict()
        for e, k, n, s in zip(_us(batch.column(0)), d["key"], d["n"], d["total"], strict=True):
            out[int(e)][int(k)].append((int(n), float(s)))
    return out


def _same_total(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-6 + 1e-9 * max(abs(a), abs(b))


def _rollup_mismatches(expected: dict, actual: dict, limit_us: int) -> list[int]:
    """Window ends (µs) ≤ limit whose rows differ: a key missing or extra, a count or a sum off,
    or a key written twice."""
    exp: dict[int, dict[int, tuple[int, float]]] = defaultdict(dict)
    for (e, k), (n, s) in expected.items():
        exp[e][k] = (n, s)
    bad = []
    for e in sorted(set(exp) | set(actual)):
        if e > limit_us:
            continue
        want, got = exp.get(e, {}), actual.get(e, {})
        ok = set(want) == set(got) and all(
            len(got[k]) == 1 and got[k][0][0] == want[k][0] and _same_total(got[k][0][1], want[k][1]) for k in want)
        if not ok:
            bad.append(e)
    return bad


def _join_rows(a: Any, b: Any, lookback_us: int) -> list[tuple]:
    """`<left> a JOIN <right> b ON a.key = b.key AND b.ts > a.ts - lookback AND b.ts <= a.ts`."""
    import pyarrow as pa
    import pyarrow.compute as pc

    ta = pa.table({"a_ts": _us(a.column("ts")), "key": a.column("key"), "a_value": a.column("value")})
    tb = pa.table({"b_ts": _us(b.column("ts")), "key": b.column("key"), "b_value": b.column("value")})
    j = ta.join(tb, "key", join_type="inner")
    keep = pc.and_(pc.greater(j.column("b_ts"), pc.subtract(j.column("a_ts"), lookback_us)),
                   pc.less_equal(j.column("b_ts"), j.column("a_ts")))
    d = j.filter(keep).to_pydict()
    return list(zip(d["a_ts"], d["key"], d["a_value"], d["b_ts"], d["b_value"], strict=True))


def _by_window(rows: list[tuple], grid_us: int) -> dict[int, list[tuple]]:
    out: dict[int, list[tuple]] = defaultdict(list)
    for r in rows:
        out[-(-int(r[0]) // grid_us) * grid_us].append(tuple(r))
    return out


def _state_mismatches(src: Any, mine: Any, upto_us: int) -> tuple[int, list[int]]:
    """(keys checked, keys that differ): the state against `SELECT key, count(*), sum(value),
    max(ts) FROM src WHERE ts <= upto GROUP BY key` — one row per key, the same count, sum and time."""
    import pyarrow as pa
    import pyarrow.compute as pc

    want: dict[int, list] = {}
    for batch in src.to_batches(columns=["ts", "key", "value"]):
        if not batch.num_rows:
            continue
        us = _us(batch.column(0))
        t = pa.table({"us": us, "k": batch.column(1), "v": batch.column(2)}).filter(pc.less_equal(pa.array(us), upto_us))
        agg = t.group_by("k").aggregate([("v", "count"), ("v", "sum"), ("us", "max")]).to_pydict()
        for k, n, v, m in zip(agg["k"], agg["v_count"], agg["v_sum"], agg["us_max"], strict=True):
            cell = want.setdefault(int(k), [0, 0.0, m])
            cell[0] += int(n)
            cell[1] += float(v or 0.0)
            cell[2] = max(cell[2], m)
    got: dict[int, list[tuple]] = defaultdict(list)
    t = mine.to_table(columns=["key", "n", "total", "ts"])
    for k, n, v, m in zip(t.column("key").to_pylist(), t.column("n").to_pylist(), t.column("total").to_pylist(),
                          _us(t.column("ts")), strict=True):
        got[int(k)].append((int(n), float(v), int(m)))
    keys = sorted(set(want) | set(got))
    bad = [k for k in keys if k not in want or len(got[k]) != 1 or got[k][0][0] != want[k][0]
           or not _same_total(got[k][0][1], want[k][1]) or got[k][0][2] != want[k][2]]
    return len(keys), bad


def check_table(root: Path, d: Derived, start: float | None = None) -> dict[str, Any]:
    """The check of one derived table under `root` (see the module's docstring). Windows are
    reported as their end in seconds from `start` (epoch seconds when `start` is None)."""
    srcs = {s: _dataset(root / s) for s in d.sources}
    mine = _dataset(root / d.name)
    if mine is None or any(v is None for v in srcs.values()):
        return {"status": "no table", "checked_windows": 0, "mismatched_windows": 0, "windows": []}
    newest = {s: _newest(v) for s, v in srcs.items()}
    own = _newest(mine)
    if own is None or any(v is None for v in newest.values()):
        return {"status": "empty", "checked_windows": 0, "mismatched_windows": 0, "windows": []}
    edge = min(newest.values())
    grid = int(round((d.granularity or JOIN_GRID) * _US))
    complete = edge // grid * grid if d.granularity else edge
    limit = min(complete, own)
    rel = (lambda us: round(us / _US - start, 3)) if start is not None else (lambda us: us / _US)  # noqa: E731
    out: dict[str, Any] = {"status": "checked", "convention": "(start, end]",
                           "complete_until": rel(limit), "sources_until": rel(edge)}
    if d.stateful:  # one state, as of the newest time it folded: checked key by key
        keys, bad_keys = _state_mismatches(srcs[d.sources[0]], mine, own)
        out.update(convention="state as of its newest ts", complete_until=rel(own), checked_windows=1,
                   mismatched_windows=int(bool(bad_keys)), windows=[rel(own)] if bad_keys else [],
                   checked_keys=keys, mismatched_keys=len(bad_keys), incomplete_windows_held=int(own > edge))
        return out
    if d.granularity:
        right, left = _rollup_expected(srcs[d.sources[0]], grid)
        actual = _rollup_actual(mine)
        windows = sorted(e for e in set(e for e, _ in right) | set(actual) if e <= limit)
        bad = _rollup_mismatches(right, actual, limit)
        out["mismatched_windows_left_closed"] = len(_rollup_mismatches(left, actual, limit))
        beyond = sorted(e for e in actual if e > complete)
    else:
        (a_name, b_name) = d.sources
        a = srcs[a_name].to_table(columns=["ts", "key", "value"])
        b = srcs[b_name].to_table(columns=["ts", "key", "value"])
        want = _by_window(_join_rows(a, b, int(d.lookback * _US)), grid)
        got_t = mine.to_table(columns=["ts", "key", "a_value", "b_ts", "b_value"])
        got_rows = list(zip(_us(got_t.column("ts")), got_t.column("key").to_pylist(), got_t.column("a_value").to_pylist(),
                            _us(got_t.column("b_ts")), got_t.column("b_value").to_pylist(), strict=True))
        got = _by_window([tuple(int(x) if i in (0, 3) else x for i, x in enumerate(r)) for r in got_rows], grid)
        want = {e: sorted((int(r[0]), int(r[1]), r[2], int(r[3]), r[4]) for r in rows) for e, rows in want.items()}
        windows = sorted(e for e in set(want) | set(got) if e <= limit)
        bad = [e for e in windows if want.get(e, []) != sorted(got.get(e, []))]
        beyond = sorted(e for e, rows in got.items() if any(r[0] > edge for r in rows))
    out.update(checked_windows=len(windows), mismatched_windows=len(bad), windows=[rel(e) for e in bad[:_LIMIT]],
               incomplete_windows_held=len(beyond))
    return out


def check(root: str | Path, start: float | None = None, spec: Spec = DEFAULT) -> dict[str, dict[str, Any]]:
    """The check of every derived table of `spec` for the contestant whose tables are under `root`."""
    return {d.name: check_table(Path(root), d, start) for d in spec.derived}
