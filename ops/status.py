"""`freshet status [--url URL | --config FILE]`: a running daemon's tables, most over target first, with a
staleness bar. The daemon is found at `--url`, else at the `listen:` of the `--config` file, else at
`$FRESHET_URL`, else at 127.0.0.1:9464 (`daemon_url`).

Order: tables over their target first, the most over (staleness / target) on top; then the others,
stalest first; tables never loaded last. The bar is staleness against the table's target
(`target_staleness`); tables without a target are drawn against the largest staleness shown. A bar
over target turns into `!` past the `|` mark. BACKLOG is arrived − loaded event time and the
partitions not committed yet, a running job's included (it is true while a job runs). LAST is the
last job's result; `ok (recovered)` after a restart, before the first job: the Delta log holds the
table's loads, and a failure before the restart is not recorded there. STATE is `suspended` for a
table an operator suspended (`freshet suspend`), with `+refresh` while a refresh waits for its
job; operator actions still pending (backfills) and each table's maintenance are listed below.
`--watch [SECONDS]` redraws the view in place every SECONDS on a terminal (a daemon that does not
answer is shown as such and asked again); into a pipe it writes one view after the other.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from warehouse.errors import FreshetError

__all__ = ["add_arguments", "daemon_url", "fmt_backlog", "fmt_duration", "main", "maintenance_line", "order",
           "render", "state_of"]

DEFAULT_URL = "http://127.0.0.1:9464"
BAR = 24


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", help=f"the daemon's HTTP API (default: the `listen:` of --config, else "
                                      f"$FRESHET_URL, else {DEFAULT_URL})")
    parser.add_argument("--config", help="the daemon's config file: its `listen:` says where the API is")
    parser.add_argument("--json", action="store_true", help="print the raw /v1/tables JSON")
    parser.add_argument("--timeout", type=float, default=5.0, help="seconds to wait for the daemon")
    parser.add_argument("--watch", nargs="?", type=_interval, const=2.0, default=None, metavar="SECONDS",
                        help="refresh in place every SECONDS (default 2) until Ctrl-C")
    parser.add_argument("--count", type=int, default=None, metavar="N", help="with --watch: stop after N views")


def _interval(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--watch takes seconds, got {text!r}") from None
    if not 0.1 <= v <= 86400:
        raise argparse.ArgumentTypeError(f"--watch takes 0.1 to 86400 seconds, got {text}")
    return v


def fmt_duration(s: float | None) -> str:
    """12.3s, 4m05s, 2h03m, 3d04h; `-` for unknown."""
    if s is None:
        return "-"
    neg, s = s < 0, abs(s)
    if s < 60:
        out = f"{s:.1f}s"
    elif s < 3600:
        out = f"{int(s // 60)}m{int(s % 60):02d}s"
    elif s < 86400:
        out = f"{int(s // 3600)}h{int(s % 3600 // 60):02d}m"
    else:
        out = f"{int(s // 86400)}d{int(s % 86400 // 3600):02d}h"
    return "-" + out if neg else out


def bar(staleness: float | None, target: float | None, scale: float) -> str:
    """`#` up to the target, `!` beyond it; the target sits at 2/3 of the bar."""
    if staleness is None:
        return " " * (BAR + 2)
    if target:
        mark = BAR * 2 // 3
        filled = min(BAR, round(staleness / target * mark))
        cells = ["#" if i < min(filled, mark) else ("!" if i < filled else " ") for i in range(BAR)]
        cells.insert(mark, "|")
        return "[" + "".join(cells) + "]"
    filled = min(BAR, round(staleness / scale * BAR)) if scale > 0 else 0
    return "[" + "#" * filled + " " * (BAR - filled) + " ]"


def fmt_backlog(r: dict[str, Any]) -> str:
    """`2h11m/141`: arrived − loaded event time / partitions not committed (a running job's included)."""
    backlog = r.get("backlog")
    if backlog is None:  # a daemon from before the backlog field
        backlog = r.get("pending_delta") or 0.0
    parts = r.get("pending_partitions") or 0
    return fmt_duration(backlog) + (f"/{parts}" if parts else "")


def state_of(r: dict[str, Any]) -> str:
    """The job state, `suspended` when an operator suspended the table, `+refresh` when one waits."""
    state = "suspended" if r.get("suspended") else r["state"]
    return state + ("+refresh" if r.get("refresh_requested") else "")


def maintenance_line(r: dict[str, Any]) -> str:
    m = r["maintenance"]
    every = m.get("optimize_every") or "-"
    return (f"  {r['name']}: {m.get('files') if m.get('files') is not None else '?'} files, "
            f"{m.get('commits_since_optimize', 0)}/{every}, {m.get('last_optimize_iso') or 'never'}, "
            f"{m.get('last_vacuum_iso') or 'never'}, {m.get('bytes_reclaimed', 0)} B")


def order(r: dict[str, Any]) -> tuple[int, float, float, str]:
    """Sort key: over target first, most over (staleness / target) on top; then stalest; then
    tables never loaded."""
    s, target = r.get("staleness"), r.get("target_staleness")
    if s is None:
        return (2, 0.0, 0.0, r["name"])
    if target and s > target:
        return (0, -s / target, -s, r["name"])
    return (1, 0.0, -s, r["name"])


def render(body: dict[str, Any]) -> str:
    """The /v1/tables JSON as a table, most over target first (`order`)."""
    rows = sorted(body.get("tables", []), key=order)
    scale = max([r["staleness"] for r in rows if r.get("staleness") is not None] or [0.0])
    width = max([len(r["name"]) for r in rows] + [5])
    head = (f"{'TABLE':<{width}}  {'KIND':<7} {'PRIO':>5} {'STALENESS':>9} {'TARGET':>7}  "
            f"{'BAR (| = target)':<{BAR + 2}} {'STATE':<8} {'BACKLOG':>11} LAST")
    lines = [head]
    for r in rows:
        prio = f"{r['priority']:g}" if r["priority"] == r["inherited_priority"] else f"{r['inherited_priority']:g}*"
        lines.append(
            f"{r['name']:<{width}}  {r['kind']:<8} {prio:>5} {fmt_duration(r.get('staleness')):>9} "
            f"{fmt_duration(r.get('target_staleness')):>7}  {bar(r.get('staleness'), r.get('target_staleness'), scale)} "
            f"{state_of(r):<8} {fmt_backlog(r):>11} {r.get('last_result') or '-'}")
    over = [r["name"] for r in rows if r.get("within_target") is False]
    lines.append("")
    for r in rows:
        for b in r.get("backfills") or []:
            lines.append(f"backfill {b['id']} of {r['name']}: {b['start_iso']} .. {b['end_iso']} pending")
        if r.get("suspended"):
            why = f" ({r['suspend_reason']})" if r.get("suspend_reason") else ""
            lines.append(f"suspended: {r['name']}{why}")
    maint = [maintenance_line(r) for r in rows if r.get("maintenance") and (r["maintenance"].get("optimize_every")
                                                                          or r["maintenance"].get("vacuum_every"))]
    if maint:
        lines.append("maintenance (files, commits since OPTIMIZE / every, last OPTIMIZE, last VACUUM, reclaimed):")
        lines.extend(maint)
    lines.append(f"{len(rows)} tables; {len(over)} over target" + (f": {', '.join(over)}" if over else "")
                 + "   (* = inherited priority, §3.3)")
    return "\n".join(lines)


def daemon_url(url: str | None, config: str | None, environ: dict[str, str] | None = None) -> str:
    """Where the daemon's API is: `url`, else the `listen:` of the config file `config` (a wildcard
    host such as 0.0.0.0 is asked on loopback), else `$FRESHET_URL`, else DEFAULT_URL."""
    if url:
        return url.rstrip("/")
    if config:
        from ops.listen import connect_url
        from warehouse.config import load_config

        return connect_url(load_config(config).listen)
    return (os.environ if environ is None else environ).get("FRESHET_URL", DEFAULT_URL).rstrip("/")


def fetch(url: str, timeout: float) -> dict[str, Any]:
    """GET /v1/tables; FreshetError saying why not."""
    import httpx

    try:
        r = httpx.get(f"{url}/v1/tables", timeout=timeout)
    except httpx.HTTPError as e:
        raise FreshetError(f"cannot reach the daemon at {url}: {e}") from None
    if r.status_code != 200:
        try:
            msg = r.json().get("error", r.text)
        except ValueError:
            msg = r.text
        raise FreshetError(f"{url}/v1/tables answered {r.status_code}: {msg}")
    return r.json()


def main(args: argparse.Namespace) -> int:
    import json

    url = args.url = daemon_url(args.url, getattr(args, "config", None))
    if getattr(args, "watch", None) is not None:
        return watch(args)
    body = fetch(url, args.timeout)
    print(json.dumps(body, indent=2) if args.json else render(body))
    return 0


def watch(args: argparse.Namespace) -> int:
    """`--watch`: the view again every `args.watch` seconds, in place on a terminal (rich Live)."""
    import json
    import time

    from rich.console import Console
    from rich.live import Live
    from rich.text import Text

    from warehouse.times import iso

    url, every = args.url.rstrip("/"), float(args.watch)
    console = Console(highlight=False)

    def view() -> str:
        try:
            body = fetch(url, args.timeout)
            text = json.dumps(body, indent=2) if args.json else render(body)
        except FreshetError as e:  # the daemon restarting: say so, ask again
            text = f"{e} — asking again in {every:g}s"
        return f"{url} at {iso(time.time(), 'seconds')}, every {every:g}s (Ctrl-C to stop)\n\n{text}"

    shown = 0
    try:
        if not console.is_terminal:  # a pipe or a file: one view after the other, no escape codes
            while args.count is None or shown < args.count:
                if shown:
                    time.sleep(every)
                print(view() + "\n", flush=True)
                shown += 1
            return 0
        with Live(Text(view()), console=console, auto_refresh=False, transient=False) as live:
            shown = 1
            while args.count is None or shown < args.count:
                time.sleep(every)
                live.update(Text(view()), refresh=True)
                shown += 1
    except KeyboardInterrupt:
        pass
    return 0
