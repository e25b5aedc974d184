"""The simulator's settings (warehouse.config's `sim` section, §4.1): cost defaults, arrival
jitter, late data, slow periods, per-class bursts and the cores the jobs share (sim.simulator)."""

from __future__ import annotations

from pydantic import Field

from warehouse.config_base import Duration, Name, Slope, Strict

__all__ = ["Burst", "SimConfig", "Slowdown"]


class Slowdown(Strict):
    factor: float = Field(1.0, ge=1.0, description="S: execution times multiplied by S while slow (§4.1)")
    normal: Duration = Field(1000.0, gt=0, description="length of a normal period")
    slow: Duration = Field(0.0, ge=0, description="length of a slow period (0 = never slow)")


class Burst(Strict):
    """Per-class phases in the simulator: the named tables' data is `factor` times as dense for
    `slow` seconds (of event time) in every `normal + slow`, the cycle shifted by `offset`: a job
    pays β·factor for the part of its window inside a burst (sim.simulator)."""

    tables: list[Name] = Field(min_length=1, description="the tables whose jobs cost more in a burst")
    factor: float = Field(gt=0, description="the data's density in a burst, relative to the rest")
    normal: Duration = Field(gt=0, description="length of the part of the cycle without a burst")
    slow: Duration = Field(gt=0, description="length of a burst")
    offset: Duration = Field(0.0, ge=0, description="the cycle (normal, then burst) starts at this time")


class SimConfig(Strict):
    """Simulator defaults (§4.1): tables without `cost` use α, β; b draws E uniformly in [bE, (1+b)E]."""

    alpha: Duration = Field(1.0)
    beta: Slope = 0.1
    b: float = Field(0.5, ge=0)
    jitter: float = Field(0.0, ge=0, description="arrival jitter as a fraction of the period")
    delay: Duration = Field(0.0, description="data in a partition lags its arrival by this much")
    late: float = Field(0.0, ge=0, le=1, description="share of partitions delivered late, `late_after` after "
                                                     "their time: the derived windows computed without them are "
                                                     "recomputed (warehouse.recompute)")
    late_after: Duration = Field(0.0, description="how long after its time a late partition arrives")
    slowdown: Slowdown = Field(default_factory=Slowdown)
    bursts: list[Burst] = Field(default_factory=list, description="per-class phases: tables whose data is denser "
                                                                  "for hours at a time (sim.simulator)")
    cores: int | None = Field(None, ge=1, le=4096, description="the jobs running at once share this many cores "
                                                             "by their Spark pools (sim.cores); null: each runs "
                                                             "for its drawn duration whatever else runs")
    events: int = Field(20000, ge=1, description="default number of events per run")
