"""The scheduler's settings (warehouse.config's `scheduler` section): the basic algorithm (§3.1) and
rollout, the track partitioner (§3.2), inheritance (§3.3), chopping (§3.4), the bulk limit, retries
and the self-tuner (docs/operations.md §8, §9)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from policies.bulk import BULK_FACTOR
from warehouse.config_base import Duration, Strict, parse_duration

__all__ = ["Inheritance", "Partitioner", "Policy", "RolloutBase", "RolloutConfig", "SchedulerConfig", "parse_chop"]


def parse_chop(value: Any) -> float | str | None:
    """`scheduler.chop` and `--chop`: a finite number c ≥ 1 (§3.4), `auto`, or `none` / `off` / `null` for no
    chopping (the name the CLI and `sim tune` print), in any case. YAML's booleans (`on`, `off`, `yes`,
    `no` unquoted) are refused: neither is a c."""
    expected = "expected a number c ≥ 1, `auto` or `none`"
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError(f"{expected} (YAML reads an unquoted on/off/yes/no as a boolean: write `none` for no "
                         "chopping)")
    if isinstance(value, str):
        word = value.strip().lower()
        if word in ("none", "off", "null"):
            return None
        if word == "auto":
            return "auto"
        try:
            value = float(word)
        except ValueError:
            raise ValueError(expected) from None
    if isinstance(value, int | float) and not 1 <= value < math.inf:
        raise ValueError(expected)
    return value


Policy = Literal["auto", "max-benefit", "lookahead", "edf-p", "edf", "random", "fifo", "aoi-quadratic", "whittle",
                 "amortized", "rollout"]
RolloutBase = Literal["max-benefit", "aoi-quadratic", "whittle", "amortized", "edf-p", "edf", "fifo", "auto"]
Partitioner = Literal["auto", "global", "edf-partitioned", "proportional"]
Inheritance = Literal["none", "sum", "max", "max-plus"]


class RolloutConfig(Strict):
    """`policy: rollout` (beyond the paper, warehouse.rollout): the round's first job is the one of
    the base rule's best `k` whose simulated next `horizon` seconds have the least weighted staleness."""

    k: int = Field(3, ge=1, le=32, description="candidates: the base rule's best k ready jobs (1: the base rule)")
    horizon: Duration = Field(1800.0, gt=0, description="seconds of the warehouse simulated ahead for each candidate "
                                                        "(shortened to what the event budget covers); a job running "
                                                        "at its end is credited by `terminal`")
    terminal: bool = Field(True, description="count the jobs running at the horizon as ending at their expected "
                                             "ends, over a tail as long as the horizon or the longest candidate "
                                             "job, in which nothing else starts (off: a job ending after the "
                                             "horizon counts as no gain, and long jobs starve)")
    credit: Literal["inherited", "own"] = Field("inherited", description="the priority the terminal credit counts "
                                                "a running job's removed staleness at: its table's inherited "
                                                "Ip (§3.3), so a source's job is worth the views it lets run "
                                                "next; own: its table's p")
    budget_events: int = Field(3000, ge=1, description="simulated events per decision, over all candidates (not "
                                                       "CPU time: the engine reads no clock); past it the base rule "
                                                       "decides, counted as a fallback")
    base: RolloutBase = Field("max-benefit", description="the rule the queues order by and the simulated future "
                                                         "follows (§3.1; auto: with track reservation)")


class SchedulerConfig(Strict):
    """How jobs are ordered and placed on tracks (§3)."""

    tracks: int = Field(4, ge=1, le=4096, description="N, the number of tracks (concurrent jobs)")
    policy: Policy = Field("auto", description="the basic algorithm (§3.1); auto: Freshet's default (Max-Benefit "
                                               "with track reservation, README 'How it schedules')")
    rollout: RolloutConfig = Field(default_factory=RolloutConfig, description="policy rollout's settings")
    partitioner: Partitioner = Field("auto", description="§3.2; auto: Proportional, all tracks, aggressive")
    k: float = Field(10.0, gt=0, description="Proportional clustering constant (§3.2.3)")
    allocation: Literal["basic", "all"] = Field("all", description="M = ⌈U⌉/U (basic) or N/U (all)")
    aggressive: bool = Field(True, description="aggressive promotion (§3.2.2, §3.2.3 step e)")
    inheritance: Inheritance = Field("max", description="priority inheritance (§3.3)")
    inheritance_k: float = Field(2.0, gt=1.0, description="K for max-plus (§3.3)")
    chop: float | Literal["auto"] | None = Field(
        "auto", description="c: at most c·P_i of ΔF per job (§3.4); none (or null) = off; auto: chop only when it pays")
    learn_costs: bool = Field(True, description="re-estimate α, β from observed durations (§2.4)")
    row_cost: float = Field(1e-6, ge=0, description="seconds per row a base load costs beyond the sizes its table "
                                                    "has run — a first load, a burst — while its jobs' sizes have "
                                                    "not measured β (warehouse.cost; with learn_costs); about a "
                                                    "narrow row on one core; 0: extrapolate β")
    overdue_periods: float | None = Field(
        None, gt=0, description="a released job whose table has gone this many of its periods without getting "
                                "fresher goes before the basic algorithm's order, the longest overdue first, on at "
                                "most half the tracks, loading one period of its backlog (warehouse.overdue: an aging "
                                "bound against starvation in overload, beyond the paper); null: never")
    overdue_slack: Duration = Field(
        0.0, ge=0, description="seconds added to the overdue deadline: a table is overdue after `overdue_periods` of "
                               "its periods plus this (a staleness target of 3 periods plus a burst: "
                               "`overdue_periods: 3, overdue_slack: 35s`)")
    bulk_limit: int | Literal["auto"] | None = Field(
        "auto", description="at most this many bulk jobs run at once (policies.bulk); auto: the cores less one "
                            "(`spark.cores`, the N of `local[N]`, or this machine's for `local[*]`), uncapped where "
                            "the cores are unknown (a cluster or Spark Connect without `spark.cores`); null: no cap")
    bulk_cost: float | Literal["auto"] = Field(
        "auto", description=f"a job estimated to run longer than this is bulk; auto: {BULK_FACTOR:g} × the median E(P) "
                            "of the tables (policies.bulk)")
    retry_backoff: Duration = Field(5.0, gt=0, description="first back-off after a failed job")
    retry_backoff_max: Duration = Field(600.0, gt=0, description="back-off ceiling")
    repartition_drift: float = Field(0.25, gt=0, description="repartition when an E(P) estimate moves this much")
    seed: int = Field(0, description="seed of the Random policy")
    autotune: Literal["off", "recommend", "apply"] = Field(
        "apply", description="replay the daemon's own recent trace in the simulator under the `freshet sim tune` "
                           "candidates and switch (apply) or only say (recommend) when one wins (ops.autotune); "
                           "default: apply when policy, partitioner and chop are all left to auto, else off")
    autotune_every: Duration = Field(600.0, gt=0, description="wall time between evaluations")
    autotune_window: Duration = Field(3600.0, gt=0, description="how much of the recent trace is replayed (all of "
                                      "it, from the state at its start, when the trace is shorter)")
    autotune_margin: float = Field(0.2, gt=0, lt=1, description="a candidate must beat the setting in force by "
                                                                "this share of its weighted staleness, every seed")
    autotune_cooldown: Duration = Field(3600.0, ge=0, description="at least this long between two switches")
    autotune_min_jobs: int = Field(50, ge=1, description="jobs the window must hold before it is judged")

    @property
    def ordering(self) -> str:
        """The basic algorithm the ready queues order by (§3.1): the policy, or rollout's base rule."""
        return self.rollout.base if self.policy == "rollout" else self.policy

    @field_validator("bulk_limit", mode="before")
    @classmethod
    def _bulk_limit(cls, value: Any) -> Any:
        """A whole number ≥ 1, `auto` or null (no limit)."""
        if value is None or value == "auto":
            return value
        if isinstance(value, bool) or not isinstance(value, int | str) or not str(value).strip().isdigit() \
                or int(value) < 1:
            raise ValueError(f"expected a whole number of jobs ≥ 1, `auto` or null (no limit), got {value!r}")
        return int(value)

    @field_validator("chop", mode="before")
    @classmethod
    def _chop(cls, value: Any) -> Any:
        return parse_chop(value)

    @field_validator("bulk_cost", mode="before")
    @classmethod
    def _bulk_cost(cls, value: Any) -> Any:
        """`auto` or a duration > 0."""
        if value == "auto":
            return value
        seconds = parse_duration(value)
        if seconds <= 0:
            raise ValueError(f"expected `auto` or a duration > 0 (e.g. 30s), got {value!r}")
        return seconds

    @model_validator(mode="before")
    @classmethod
    def _autotune_default(cls, data: Any) -> Any:
        """`autotune` unset: `apply` when the algorithm is left to Freshet (policy, partitioner and
        chop all `auto`), `off` when the user chose one. Resolved here, so a tuned config keeps it."""
        if isinstance(data, Mapping) and data.get("autotune") is None:
            try:
                chop = parse_chop(data.get("chop", "auto"))  # as the field reads it: `AUTO` is auto
            except ValueError:
                chop = None  # (the field's own check names it)
            auto = chop == "auto" and all(data.get(k, "auto") == "auto" for k in ("policy", "partitioner"))
            return {**data, "autotune": "apply" if auto else "off"}
        return data
