"""`freshet`: the console script (README.md). Subcommands live with their packages; this
module only wires them and turns FreshetError into an exit code at the edge.

Each subcommand module exposes `add_arguments(parser)` and `main(args) -> int` (or, serving
several commands, `COMMANDS: name → (add_arguments, main)`) and is imported lazily, so
`freshet validate` never imports Spark.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from warehouse.errors import ConfigError, FreshetError

# name → (module, help)
_COMMANDS: dict[str, tuple[str, str]] = {
    "validate": ("ops.validate", "check a config; print the DAG, priorities and track plan"),
    "run": ("ops.run", "run the daemon: intake → scheduler → Spark track workers"),
    "status": ("ops.status", "show a running daemon's tables, most over target first"),
    "sim": ("sim.cli", "simulate policies on a workload, or reproduce the paper's experiments"),
    "demo": ("ops.demo", "write realistic demo partitions into the landing zone"),
    "suspend": ("ops.actions", "suspend a table on a running daemon: no jobs until resumed"),
    "resume": ("ops.actions", "resume a suspended table"),
    "refresh": ("ops.actions", "update a table now; with --from/--to recompute that range (a backfill)"),
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """Every subcommand with its help; the arguments of `command` alone, whose module is the only
    one imported (`freshet validate` pays neither the daemon's nor the simulator's imports)."""
    parser = argparse.ArgumentParser(prog="freshet", description="Update scheduler for streaming data warehouses")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (module, help_) in _COMMANDS.items():
        p = sub.add_parser(name, help=help_, description=help_)
        if name != command:
            continue
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as e:
            if e.name != module:
                raise
            p.set_defaults(_missing=module)
            continue
        cmds = getattr(mod, "COMMANDS", None)
        add, main_ = cmds[name] if cmds else (mod.add_arguments, mod.main)
        add(p)
        p.set_defaults(_main=main_)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    command = next((a for a in argv if not a.startswith("-")), None)  # the parser has no option of its own but -h
    args = build_parser(command).parse_args(argv)
    if getattr(args, "_missing", None):
        print(f"freshet {args.command}: not available in this build ({args._missing} missing)", file=sys.stderr)
        return 2
    try:
        return int(args._main(args) or 0)
    except ConfigError as e:
        print(f"freshet: invalid {e.what}\n{e}", file=sys.stderr)
        return 2
    except FreshetError as e:
        print(f"freshet: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return _pipe_closed()


def _pipe_closed() -> int:
    """The reader of stdout went away (`freshet status | head`): stop quietly, as a command killed
    by SIGPIPE would, instead of a traceback. stdout is pointed at /dev/null so that the flush at
    exit does not fail again (the recipe of Python's `signal` documentation)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 128 + 13  # 141: what a shell reports for a command ended by SIGPIPE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
