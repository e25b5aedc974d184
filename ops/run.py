"""`freshet run`: the command line of the daemon (README.md); the process is `ops.daemon`."""

from __future__ import annotations

import argparse
import logging

from ops.api import parse_listen
from ops.cores import machine_cores
from ops.daemon import Daemon, Options
from ops.logs import setup_logging
from warehouse.config import load_config, parse_duration, with_cores
from warehouse.errors import ConfigError, FreshetError
from warehouse.sqlcheck import column_problems

__all__ = ["add_arguments", "main"]

log = logging.getLogger("freshet")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, help="the warehouse config (YAML, docs/warehouse.md)")
    parser.add_argument("--listen", help="HOST:PORT for the HTTP API (default: the config's `listen`, "
                                         "127.0.0.1:9464)")
    parser.add_argument("--log-format", choices=("human", "json"), default="human", help="log line format")
    parser.add_argument("--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    parser.add_argument("--grace", type=float, default=60.0,
                        help="seconds running jobs get to finish after SIGTERM/SIGINT (default 60)")
    parser.add_argument("--demo", action="store_true",
                        help="also run the demo producer, writing partitions into the landing zone")
    parser.add_argument("--demo-speed", type=float, default=60.0,
                        help="demo: warehouse seconds per wall second until it catches up (default 60)")
    parser.add_argument("--demo-backfill", default="1h", help="demo: start this long ago (default 1h)")
    parser.add_argument("--poll", type=float, default=1.0, help="landing-zone poll interval, seconds")
    parser.add_argument("--trace", help="append arrivals and job durations here (default: warehouse.trace)")
    parser.add_argument("--standby", action="store_true",
                        help="if another daemon holds the warehouse lease, wait for it (/healthz ok, /readyz 503 "
                             "\"standby\") and take over once it stops renewing, instead of exiting 1")
    parser.add_argument("--max-body", type=int, default=64 * 1024, help="HTTP request body limit, bytes")


def main(args: argparse.Namespace) -> int:
    """Set up logging first, so every line on stderr is in `--log-format` — errors included: an
    invalid config (several problems) is one record, with `--log-format json` one JSON object."""
    setup_logging(args.log_format, args.log_level, capture_stderr=True)
    try:
        return _run(args)
    except ConfigError as e:
        log.error("invalid configuration", extra={"config": e.source or args.config, "problems": e.problems})
        return 2
    except FreshetError as e:
        log.error(str(e))
        return 1
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # the daemon logged its traceback where it happened
        log.critical("freshet run stopped by an unexpected error", extra={"error": f"{type(e).__name__}: {e}"})
        return 1


def _run(args: argparse.Namespace) -> int:
    config = with_cores(load_config(args.config), machine_cores())  # local[*]: this machine's (bulk_limit auto)
    if problems := column_problems(config):  # refused before anything runs (warehouse.sqlcheck)
        raise ConfigError(problems, source=args.config)
    if args.grace < 0:
        raise ConfigError(f"--grace must not be negative (got {args.grace})")
    if args.listen:
        parse_listen(args.listen)  # fail early, naming the flag's value
    try:
        backfill = parse_duration(args.demo_backfill)
    except ValueError as e:
        raise ConfigError(f"--demo-backfill: {e}") from None
    if args.demo_speed <= 0:
        raise ConfigError(f"--demo-speed must be positive (got {args.demo_speed})")
    if args.demo:
        from ops.demo import demo_landing

        demo_landing(config)  # a landing zone on a bucket: refused before anything runs
    opts = Options(config_path=args.config, listen=args.listen, grace=args.grace, demo=args.demo,
                   poll=args.poll, trace=args.trace, max_body=args.max_body,
                   demo_options={"speed": args.demo_speed, "backfill": backfill})
    return Daemon(config, opts, standby=args.standby).run()
