"""The `unseen` experiments (sim.unseen): each shows the rollout line and the lower bound beside the
default and the paper lines; `unseen-new` holds two families no other experiment has. The summary's
per-point table on rows worked by hand; one short real run of a new family with rollout. No Spark."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest

from sim.experiments import (
    DEFAULT_LABEL,
    PAPER_LINES,
    Line,
    SweepResult,
    load_csv,
    run_experiment,
    summary,
    write_outputs,
)
from sim.unseen import EXPERIMENTS, ROLLOUT_LINE, UNSEEN, UNSEEN_MORE, UNSEEN_NEW
from sim.workload import config_of, utilization
from tests.helpers_engine import SHORT_ROLLOUT
from warehouse.sqltext import refresh_plan


def test_every_unseen_experiment_shows_the_rules_beyond_the_paper_and_the_new_families_are_their_own() -> None:
    for exp in EXPERIMENTS.values():
        labels = [ln.label for ln in exp.lines]
        assert labels == [*(ln.label for ln in PAPER_LINES), DEFAULT_LABEL, "rollout", "whittle", "amortized"], exp.name
    assert ROLLOUT_LINE.scheduler == {"policy": "rollout"}  # its defaults: horizon, credit, k
    assert [w.name for w in UNSEEN_NEW.workloads] == ["drift", "fanout"]
    assert [w.name for w in UNSEEN_MORE.workloads] == ["skew", "tiers"]
    older = {w.name for e in EXPERIMENTS.values() if e not in (UNSEEN_NEW, UNSEEN_MORE) for w in e.workloads}
    assert older == {"classes", "dag", "hetero", "phases", "phases-long", "shifts", "batch"}
    assert (UNSEEN_NEW.xs, UNSEEN_NEW.events, UNSEEN_NEW.seeds) == (UNSEEN.xs, UNSEEN.events, UNSEEN.seeds)
    assert (UNSEEN_MORE.xs, UNSEEN_MORE.events, UNSEEN_MORE.seeds) == (UNSEEN.xs, 5_000, UNSEEN.seeds)
    for exp in (UNSEEN_NEW, UNSEEN_MORE):
        for wl in exp.workloads:
            for line in exp.lines:
                for x in exp.xs:
                    cfg = config_of(exp.config(line, x, wl))
                    assert utilization(cfg) == pytest.approx(x)
                    assert cfg.scheduler.policy == line.scheduler.get("policy", "auto")
    fan = config_of(UNSEEN_NEW.config(ROLLOUT_LINE, 1.0, UNSEEN_NEW.workloads[1]))
    readers = [t for t in fan.tables if t.sources == ["raw"]]
    assert len(readers) == 9 and {t.priority for t in readers} == {50.0, 5.0, 0.5}
    for t in fan.tables:  # every derived window from its own rows: incremental, as the file says
        if t.sql is not None:
            assert refresh_plan(t.sql, ["ts"])[0], t.name
    drift = config_of(UNSEEN_NEW.config(ROLLOUT_LINE, 1.0, UNSEEN_NEW.workloads[0]))
    assert len(drift.sim.bursts) == 7 and drift.sim.slowdown.factor == 1.0


def _rows(values: dict[str, float], bound: float) -> list[dict]:
    return [{"workload": "w", "line": label, "utilization": 1.0, "seed": 1, "relative_lateness": v,
             "ideal_weighted_staleness": 100.0, "relative_bound": bound} for label, v in values.items()]


def test_the_summary_shows_each_line_beyond_the_paper_and_the_bound(tmp_path) -> None:
    """Paper lines 2.0, 1.9, …, 1.5 (the last is the best), the default 1.2, rollout 1.6, whittle 1.35,
    amortized 1.4, the bound 0.9: the default 1.2 / 1.5 = 0.800, rollout 1.6 / 1.5 = 1.067, over 1.03,
    whittle 0.900, amortized 0.933."""
    exp = dataclasses.replace(UNSEEN, workloads=UNSEEN.workloads[:1])
    values = {ln.label: 2.0 - 0.1 * i for i, ln in enumerate(PAPER_LINES)}
    best = PAPER_LINES[-1].label
    values |= {DEFAULT_LABEL: 1.2, "rollout": 1.6, "whittle": 1.35, "amortized": 1.4}
    rows = [{**r, "workload": exp.workloads[0].name} for r in _rows(values, 0.9)]
    res = SweepResult(exp, rows, events=100, seeds=1, seconds=0.0)
    text = summary(res)
    name = exp.workloads[0].name
    assert f"| {name} | 1 | 1.200 (0.800) | 1.600 (1.067) | 1.350 (0.900) | 1.400 (0.933) | 1.500 ({best}) | 0.900 |" in text
    assert (f"rollout / best paper configuration: within 1.03 at 0 of 1 points (worst 1.067, {name} U=1), "
            "geometric mean 1.067.") in text
    paths = write_outputs(res, tmp_path)
    assert paths["png"].read_bytes()[:4] == b"\x89PNG"


def test_a_csv_from_before_a_line_replots_without_its_empty_tables(tmp_path) -> None:
    """`--replot` of a CSV written before the lines beyond the paper (docs/figures/unseen.csv: the
    paper lines and the default, no bound): no table or column for a line it has no rows of."""
    res = load_csv(UNSEEN, Path(__file__).resolve().parents[1] / "docs" / "figures" / "unseen.csv")
    assert {r["line"] for r in res.rows} == {ln.label for ln in PAPER_LINES} | {DEFAULT_LABEL}
    text = summary(res)
    assert "/ best paper configuration (shown, not judged)" not in text and "Per point" not in text
    assert write_outputs(res, tmp_path, csv_too=False)["png"].read_bytes()[:4] == b"\x89PNG"


def test_sim_run_at_a_utilization_is_the_experiments_point(capsys) -> None:
    """`freshet sim run --utilization U` on an unseen workload's YAML simulates the config the
    experiment builds for its default line at U: the same run, to the last digit."""
    import json

    from ops.cli import main as freshet
    from sim.simulator import simulate

    wl = next(w for w in UNSEEN.workloads if w.name == "dag")
    assert freshet(["sim", "run", "--config", str(wl.path), "--utilization", "1.2", "--events", "300", "--autotune", "off",
                    "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    want = simulate(config_of(UNSEEN.config(Line(DEFAULT_LABEL, {}), 1.2, wl)), seed=0, events=300).to_json()
    assert got["utilization"] == pytest.approx(1.2, rel=1e-9)
    assert (got["weighted_staleness"], got["jobs"]) == (want["weighted_staleness"], want["jobs"])


def test_a_new_family_runs_with_rollout_and_its_bound() -> None:
    """`fanout` at U = 1.0, 400 events, one seed, every line: each at least the ideal's lateness, and
    above the lower bound. (Rollout with a short look-ahead: its default one was 44 of the test's 48 s.)"""
    short = Line(ROLLOUT_LINE.label, {**ROLLOUT_LINE.scheduler, "rollout": SHORT_ROLLOUT})
    lines = tuple(short if ln == ROLLOUT_LINE else ln for ln in UNSEEN_NEW.lines)
    assert short in lines
    exp = dataclasses.replace(UNSEEN_NEW, workloads=UNSEEN_NEW.workloads[1:], lines=lines)
    res = run_experiment(exp, events=400, seeds=1, workers=1, xs=(1.0,))
    by_line = {r["line"]: r for r in res.rows}
    assert set(by_line) == {*(ln.label for ln in PAPER_LINES), DEFAULT_LABEL, "rollout", "whittle", "amortized"}
    for r in by_line.values():
        assert r["relative_lateness"] >= 0.99 and math.isfinite(r["relative_bound"])
        assert r["relative_bound"] <= r["relative_lateness"]
    assert "| fanout | 1 |" in summary(res)
