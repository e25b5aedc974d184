"""The live benchmark (`scripts/bench_live.py`): one seeded arrival trace replayed in real
time into Freshet and into what a Spark user would run instead, staleness read back from the
Delta logs by an independent reader (delta-rs).

- `spec`     — the benchmark warehouse: streams, base and derived tables, priorities, targets;
- `trace`    — the seeded trace (saved as JSON) and its real-time replay into a landing zone;
- `measure`  — staleness from the Delta logs (delta-rs), starvation, CPU-seconds and peak RSS of a process tree;
- `check`    — each derived table against its SQL over the contestant's own base tables (delta-rs, pyarrow);
- `footing`  — the load guard, each contestant's settings, the git commit the figures come from;
- `summary`  — the figures over seeds: means and 95 % t-intervals;
- `reference`, `plots` — the zero-latency bound and the digital twin; the two PNGs;
- `cron`, `streaming`, `pipelines` — the peers, each a small program a contestant process runs;
  `streaming_tuned`, `priority_cron` — the same two set up with the priorities, from
  what `tuning` tells them (inherited priorities, valuable and bulk work, fair-scheduler pools);
- `contestants` — every contestant's name, program or Freshet variant, and its settings for the JSON.
"""
