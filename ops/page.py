"""The status page at `/`: the daemon's state as one server-rendered HTML page.

`render` is a pure function from what the API serves — the `/v1/tables` and `/v1/tracks` bodies
(`ops.api.table_view`, so the page's numbers are the API's) — plus the `ops.history` view and the
quarantined partitions, to HTML: inline SVG for the sparklines and the timeline, no JavaScript,
a `<meta http-equiv="refresh">` so it refreshes itself. Sections, in order:

* **tables**, most over target first (`ops.status.order`, the order `freshet status` prints),
  each with its staleness over the last hour as a sparkline (`ops.history.staleness_points`;
  red above the dashed target line);
* **tracks**: the jobs of the last `minutes` on each track as a timeline (colour = job kind,
  red = failed; hover for the job), and what runs now; failures listed under it with reasons;
* **backlog**: tables with arrived − loaded event time or partitions not committed;
* **quarantined partitions** with their reasons (`landing/_quarantine/<stream>/<id>/reason`);
* **windows to rewrite**: derived tables with windows waiting for recompute or on an old SQL,
  and pending backfills;
* **suspended tables** with who/why (`ops.actions`).

`status_page` is what the route `GET /` (ops.api) serves: the page from those bodies and, where the
backend has them, its `history` (`ops.history.History`) and `intake.landing` (the landing zone); a backend
without them gets a page without sparkline history or quarantine list.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

from ops.history import HistoryView, JobSpan, staleness_points
from ops.status import fmt_backlog, fmt_duration, order, state_of
from warehouse.landing.manifest import QUARANTINE
from warehouse.times import iso

__all__ = ["KIND_COLOURS", "Quarantined", "bad_param", "quarantined", "starting_page", "status_page", "render"]

HOUR = 3600.0
SPARK_W, SPARK_H = 180, 30
TIMELINE_W, ROW_H, LABEL_W = 760, 24, 70
KIND_COLOURS = {"base": "#4c78a8", "derived": "#59a14f", "stateful": "#76b7b2", "recompute": "#f28e2b",
                "optimize": "#b07aa1", "vacuum": "#9c755f"}
OTHER_COLOUR, FAILED_COLOUR = "#8c8c8c", "#d62728"

_env = Environment(loader=FileSystemLoader(Path(__file__).parent / "templates"),
                   autoescape=select_autoescape(["html"]), undefined=StrictUndefined,
                   trim_blocks=True, lstrip_blocks=True)
_env.filters["dur"] = fmt_duration
_env.filters["iso"] = lambda t: iso(t, "seconds") or "-"


@dataclass(frozen=True, slots=True)
class Quarantined:
    """A partition in `landing/_quarantine/<stream>/<id>/`, with the `reason` file's text."""

    stream: str
    partition: str
    time: float  # when it was quarantined (the reason file's mtime)
    reason: str


# ---------------------------------------------------------------- the pure part
def _sparkline(row: dict[str, Any], steps: tuple[tuple[float, float | None], ...], since: float,
               now: float) -> dict[str, Any] | None:
    """Coordinates of one table's staleness over the last hour (or since the daemon started, if
    later), or None if it was never loaded."""
    t0 = min(max(now - HOUR, since), now - 60.0)  # the hour, or since the daemon started (at least a minute)
    pts = staleness_points(steps, row.get("freshness"), since, t0, now)
    if not pts:
        return None
    target = row.get("target_staleness")
    top = max([s for _, s in pts] + [target * 1.25 if target else 0.0, 1e-9])

    def x(t: float) -> float:
        return round((t - t0) / (now - t0) * SPARK_W, 1)

    def y(s: float) -> float:
        return round(SPARK_H - 1 - max(0.0, s) / top * (SPARK_H - 2), 1)

    return {"points": " ".join(f"{x(t)},{y(s)}" for t, s in pts),
            "target_y": y(target) if target else None, "peak": max(s for _, s in pts), "x0": x(pts[0][0])}


def _ticks(minutes: float) -> list[dict[str, Any]]:
    step = next(s for s in (1, 2, 5, 10, 15, 30, 60) if minutes / s <= 8)
    return [{"x": round(LABEL_W + (minutes - m) / minutes * TIMELINE_W, 1), "label": f"-{m}m" if m else "now"}
            for m in range(0, int(minutes) + 1, step)]


def _timeline(tracks: dict[str, Any], jobs: tuple[JobSpan, ...], now: float, minutes: float) -> dict[str, Any]:
    t0 = now - minutes * 60.0
    scale = TIMELINE_W / (minutes * 60.0)
    numbers = sorted({t["track"] for t in tracks.get("tracks", [])} | {j.track for j in jobs if j.ended >= t0})
    rows = []
    for i, n in enumerate(numbers):
        bars = []
        for j in jobs:
            if j.track != n or j.ended < t0:
                continue
            a = LABEL_W + (max(j.began, t0) - t0) * scale
            w = max(2.0, (min(j.ended, now) - max(j.began, t0)) * scale)
            bars.append({"x": round(a, 1), "w": round(w, 1), "job": j, "label": j.table if w >= 7 * len(j.table) else "",
                         "colour": FAILED_COLOUR if not j.ok else KIND_COLOURS.get(j.kind, OTHER_COLOUR)})
        info = next((t for t in tracks.get("tracks", []) if t["track"] == n), {})
        rows.append({"track": n, "y": 20 + i * ROW_H, "bars": bars, "running": info.get("running_table"),
                     "running_job": info.get("running_job"), "free": info.get("free", False)})
    recent = [j for j in jobs if j.ended >= t0]
    return {"rows": rows, "ticks": _ticks(minutes), "height": 26 + len(rows) * ROW_H,
            "width": LABEL_W + TIMELINE_W + 10, "jobs": len(recent),
            "failed": [j for j in reversed(recent) if not j.ok][:20]}


def render(tables: dict[str, Any], tracks: dict[str, Any], history: HistoryView | None = None,
           quarantine: tuple[list[Quarantined], int] = ([], 0), *, minutes: float = 30.0,
           refresh: int = 10, ready: tuple[bool, str] = (True, ""), quarantine_elsewhere: str | None = None) -> str:
    """The page. `tables`, `tracks`: the `/v1/tables` and `/v1/tracks` bodies; `history`: the
    sparklines' and the timeline's past; `quarantine`: (newest quarantined partitions, how many
    there are), or `quarantine_elsewhere`: where they are when the page does not list them (a
    bucket); `minutes`: the timeline's span; `refresh`: seconds between reloads (0: never)."""
    now = tables["now"]
    rows = sorted(tables.get("tables", []), key=order)
    since = history.since if history is not None else now
    steps = history.steps if history is not None else {}
    view = []
    for r in rows:
        s, target = r.get("staleness"), r.get("target_staleness")
        view.append({"r": r, "state": state_of(r), "backlog": fmt_backlog(r),
                     "over": s is not None and target is not None and s > target,
                     "ratio": (s / target) if s is not None and target else None,
                     "spark": _sparkline(r, steps.get(r["name"], ()), since, now)})
    jobs = history.jobs if history is not None else ()
    quarantined, total_quarantined = quarantine
    return _env.get_template("status.html").render(
        now=now, snapshot_time=tables.get("snapshot_time"), tables=view, tracks=tracks, minutes=minutes,
        refresh=refresh, ready=ready, timeline=_timeline(tracks, jobs, now, minutes),
        weighted_staleness=tables.get("weighted_staleness"),
        over=[v["r"]["name"] for v in view if v["over"]],
        backlog=[v for v in view if (v["r"].get("backlog") or 0) > 0 or v["r"].get("pending_partitions")],
        rewrite=[r for r in rows if r.get("recompute_pending") or r.get("windows_old_sql") or r.get("backfills")],
        suspended=[r for r in rows if r.get("suspended")],
        quarantined=quarantined, total_quarantined=total_quarantined, quarantine_elsewhere=quarantine_elsewhere,
        kinds=KIND_COLOURS,
        failed_colour=FAILED_COLOUR, spark_w=SPARK_W, spark_h=SPARK_H, label_w=LABEL_W,
        history_minutes=(now - since) / 60.0)


# ---------------------------------------------------------------- the route's side
def quarantined(landing: Path, limit: int = 20) -> tuple[list[Quarantined], int]:
    """The `limit` newest quarantined partitions under `landing` and how many there are."""
    found: list[tuple[float, str, str, Path]] = []
    root = landing / QUARANTINE
    try:
        streams = [e for e in os.scandir(root) if e.is_dir()]
    except OSError:
        return [], 0
    for s in streams:
        try:
            for p in os.scandir(s.path):
                reason = Path(p.path) / "reason"
                try:
                    found.append((reason.stat().st_mtime, s.name, p.name, reason))
                except OSError:
                    continue
        except OSError:
            continue
    found.sort(reverse=True)
    out = []
    for mtime, stream, pid, reason in found[:limit]:
        try:
            text = reason.read_text(errors="replace").strip()
        except OSError:
            text = "(the reason file cannot be read)"
        out.append(Quarantined(stream=stream, partition=pid, time=mtime, reason=text))
    return out, len(found)


def bad_param(minutes: float, refresh: int) -> str | None:
    """What is wrong with the page's query parameters, or None."""
    if not 1 <= minutes <= HOUR / 60:
        return f"minutes: the timeline spans 1 to {HOUR / 60:g} minutes, got {minutes:g}"
    if not 0 <= refresh <= 3600:
        return f"refresh: seconds between reloads, 0 (never) to 3600, got {refresh}"
    return None


def starting_page(message: str, refresh: int) -> str:
    """Before the first snapshot: a short page saying so, refreshing itself like the page."""
    return _env.get_template("starting.html").render(message=message, refresh=refresh or 5)


def status_page(backend: Any, tbody: dict[str, Any], trbody: dict[str, Any], *, minutes: float, refresh: int) -> str:
    """The page `GET /` serves, from the /v1/tables and /v1/tracks bodies and the backend's
    history and landing zone (quarantine)."""
    history = getattr(backend, "history", None)
    intake = getattr(backend, "intake", None)
    landing = getattr(intake, "landing", None)
    q = quarantined(Path(landing)) if landing is not None else ([], 0)
    store = getattr(intake, "store", None)  # a bucket: not listed on every page load (docs/warehouse.md §3)
    elsewhere = store.where(QUARANTINE) if landing is None and store is not None else None
    return render(tbody, trbody, history.view() if history is not None else None, q,
                  minutes=minutes, refresh=refresh, ready=backend.ready(), quarantine_elsewhere=elsewhere)
