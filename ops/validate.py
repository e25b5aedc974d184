"""`freshet validate --config FILE [--json]`: check a config and show what the Scheduler will do
with it — the DAG, each table's period, priority and inherited priority (§3.3), and the track
plan (§3.2) from the configured cost priors. A derived SQL naming a column its sources do not have
is refused (warehouse.sqlcheck, with sqlglot against the declared schemas). Never imports Spark."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ops.cores import machine_cores
from policies.bulk import bulk_limit
from warehouse.config import FreshetConfig, load_config, with_cores
from warehouse.dag import Dag
from warehouse.errors import ConfigError
from warehouse.overdue import overdue_lanes
from warehouse.scheduler import Scheduler
from warehouse.sqlcheck import column_problems


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", required=True, help="the warehouse YAML file")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def describe(cfg: FreshetConfig) -> dict[str, Any]:
    """Everything `validate` prints, as plain data."""
    dag = Dag.from_config(cfg)
    sched = Scheduler(cfg)
    stats = sched.stats(0.0)
    plan = stats.plan
    by_name = {t.name: t for t in stats.tables}
    tables = []
    for name in dag.order:
        tc, ts = cfg.table(name), by_name[name]
        prior = cfg.cost_prior(tc)
        tables.append(
            {
                "name": name,
                "kind": ts.kind,
                "stream": tc.stream,
                "sources": list(dag.sources[name]),
                "dependents": list(dag.dependents[name]),
                "period_seconds": ts.period,
                "priority": ts.priority,
                "inherited_priority": ts.inherited_priority,
                "target_staleness_seconds": tc.target_staleness,
                "cost": {"alpha": prior.alpha, "beta": prior.beta, "e_period": prior.alpha + prior.beta * ts.period},
                "home_tracks": list(ts.home_tracks),
                **({} if tc.is_base else {"refresh": dict(zip(("mode", "why"), sched.refresh_mode(name), strict=True)),
                                          "max_skew_seconds": tc.max_skew, "rebuild": tc.rebuild}),
            }
        )
    return {
        "valid": True,
        "spark": spark_target(cfg),
        "order": list(dag.order),
        "tables": tables,
        "scheduler": cfg.scheduler.model_dump(),
        "plan": {
            "partitioner": plan.partitioner,
            "tracks": plan.tracks,
            "utilization": round(plan.utilization, 6),
            "clusters": [
                {"tables": list(c), "home_tracks": list(h)} for c, h in zip(plan.clusters, plan.home_tracks, strict=True)
            ],
            "free_tracks": list(plan.free_tracks),
            "feasible": plan.feasible,
            "note": plan.note,
            "bulk_limit": bulk_limit(cfg.scheduler.bulk_limit, cfg.spark.master, cfg.spark.cores),
        },
    }


def spark_target(cfg: FreshetConfig) -> dict[str, Any]:
    """Which Spark the daemon will use (`master` or `remote`, docs/warehouse.md §2), and what that means."""
    sc = cfg.spark
    if sc.remote:
        return {"mode": "remote", "remote": sc.remote, "master": None,
                "note": f"Spark Connect server at {sc.remote}: it must see warehouse.root "
                        f"({cfg.warehouse.root}) and the landing zone's files at the same paths"}
    note = ("embedded: Spark runs inside the daemon" if (sc.master or "").startswith("local")
            else f"this process is the driver of the cluster at {sc.master}; its executors must see "
                 f"warehouse.root and the landing zone at the same paths")
    return {"mode": "master", "master": sc.master, "remote": None, "note": note}


def _text(d: dict[str, Any]) -> str:
    sp = d["spark"]
    lines = [f"Spark: {sp['mode']} {sp['remote'] or sp['master']} ({sp['note']})", "DAG (topological order):"]
    width = max(len(t["name"]) for t in d["tables"])
    for t in d["tables"]:
        src = f"<- stream {t['stream']}" if t["kind"] == "base" else "<- " + ", ".join(t["sources"])
        lines.append(
            f"  {t['name']:<{width}}  {t['kind']:<8}  P={_dur(t['period_seconds']):>6}  "
            f"p={t['priority']:g}  Ip={t['inherited_priority']:g}  tracks={t['home_tracks']}  {src}"
        )
    derived = [t for t in d["tables"] if t["kind"] != "base"]
    if derived:
        lines.append("Refresh of derived and stateful tables:")
        for t in derived:
            skew = f" max_skew={_dur(t['max_skew_seconds'])}" if t["max_skew_seconds"] else ""
            lines.append(f"  {t['name']:<{width}}  {t['refresh']['mode']:<11}{skew}  {t['refresh']['why']}")
    p = d["plan"]
    s = d["scheduler"]
    lines.append(
        f"Track plan: {p['partitioner']} on {p['tracks']} tracks, policy {s['policy']}, "
        f"inheritance {s['inheritance']}, U_tot={p['utilization']:.3f} (Σ E_i(P_i)/P_i at the configured "
        f"costs: tracks' worth of work; ÷ N = {p['utilization'] / p['tracks']:.3f})"
    )
    for i, c in enumerate(p["clusters"]):
        lines.append(f"  cluster {i}: home tracks {c['home_tracks']}: {', '.join(c['tables'])}")
    lines.append(f"  free tracks: {p['free_tracks'] or 'none'}")
    limit, asked = p["bulk_limit"], s["bulk_limit"]
    over = "4 × the median E(P)" if s["bulk_cost"] == "auto" else f"{s['bulk_cost']:g} s"
    why = "" if asked != "auto" else " (auto)" if limit is not None else " (auto: the cores are unknown, say spark.cores)"
    lines.append(f"  bulk jobs at once: {'no limit' if limit is None else limit}{why};"
                 f" a job estimated over {over} is bulk (docs/operations.md §9)")
    g, slack = s["overdue_periods"], s["overdue_slack"]
    plus = f" and {slack:g} s" if slack else ""
    lines.append("  overdue jobs: off (the basic algorithm alone orders the jobs)" if g is None else
                 f"  overdue jobs: a table {g:g} of its periods{plus} without getting fresher goes first, at most "
                 f"{overdue_lanes(p['tracks'])} at once, each loading one period (docs/operations.md §10)")
    if p["note"]:
        lines.append(f"  note: {p['note']}")
    return "\n".join(lines)


def _dur(seconds: float) -> str:
    for unit, n in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= n and seconds % n == 0:
            return f"{int(seconds // n)}{unit}"
    return f"{seconds:g}s"


def main(args: argparse.Namespace) -> int:
    cfg = with_cores(load_config(args.config), machine_cores())  # as the daemon would on this machine
    if problems := column_problems(cfg):  # columns the SQL names that its sources lack (no Spark)
        raise ConfigError(problems, source=args.config)
    d = describe(cfg)
    if args.json:
        json.dump(d, sys.stdout, sort_keys=True)
        sys.stdout.write("\n")
    else:
        print(f"{args.config}: valid")
        print(_text(d))
    return 0
