"""Progress of long work on stderr: a bar with an ETA on a terminal, plain lines elsewhere.

`freshet sim experiment`, `freshet sim tune` and the benchmark scripts report progress as lines
`[done/total] what` (sim.experiments, sim.tune). On a terminal such a line moves a `rich` bar
(done, total, elapsed, time remaining) whose description is the rest of the line, and any other
line is printed above the bar. When stderr is not a terminal (a pipe, a CI log, a file) nothing is
drawn: the lines are written as they come (with `lines=False`, the `[done/total]` ones are not:
for work that prints its own results), with no escape codes and no carriage returns.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Iterator
from typing import IO, Any, TypeVar

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

__all__ = ["ProgressReporter", "track"]

_STEP = re.compile(r"^\[(\d+)/(\d+)\]\s*(.*)$", re.S)
T = TypeVar("T")


class ProgressReporter:
    """A `progress(msg)` callable for sim.experiments / sim.tune; use it as a context manager."""

    def __init__(self, title: str, *, file: IO[str] | None = None, force_terminal: bool | None = None,
                 lines: bool = True) -> None:
        self.title, self.lines = title, lines
        self.file = file if file is not None else sys.stderr
        self.console = Console(file=self.file, force_terminal=force_terminal, highlight=False)
        self.live = self.console.is_terminal and not self.console.is_dumb_terminal
        self._bar: Progress | None = None
        self._task: Any = None

    def start(self) -> ProgressReporter:
        """Draw the bar (on a terminal); `stop()` leaves its last state on the screen."""
        if self.live and self._bar is None:
            self._bar = Progress(TextColumn("[bold]{task.fields[title]}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                                 TextColumn("{task.description}", markup=False), console=self.console, transient=False,
                                 refresh_per_second=4)  # cheap beside the work it measures
            self._bar.start()
        return self

    def stop(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def __enter__(self) -> ProgressReporter:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def begin(self, total: int, what: str = "") -> None:
        """Show the bar at 0 of `total` before the first step ends (nothing when not a terminal)."""
        if self._bar is not None and self._task is None:
            self._task = self._bar.add_task(_short(what), total=total, title=self.title)

    def __call__(self, msg: str) -> None:
        m = _STEP.match(msg)
        if self._bar is None:  # not a terminal (or not started): the line as it is
            if self.lines or m is None:
                print(msg, file=self.file, flush=True)
            return
        if m is None:
            self._bar.console.print(msg, markup=False)
            return
        done, total, what = int(m.group(1)), int(m.group(2)), m.group(3)
        if self._task is None:
            self._task = self._bar.add_task(_short(what), total=total, title=self.title)
        self._bar.update(self._task, completed=done, total=total, description=_short(what))

    def step(self, done: int, total: int, what: str = "") -> None:
        """The same as `self(f"[{done}/{total}] {what}")`."""
        self(f"[{done}/{total}] {what}")


def _short(text: str, width: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def track(items: Iterable[T], title: str, *, total: int | None = None, what: str = "",
          file: IO[str] | None = None, lines: bool = True) -> Iterator[T]:
    """Iterate `items` with a bar (a terminal) or a line per item (elsewhere), as ProgressReporter."""
    seq = list(items) if total is None else items
    n = len(seq) if total is None else total  # type: ignore[arg-type]
    with ProgressReporter(title, file=file, lines=lines) as progress:
        progress.begin(n)
        for i, item in enumerate(seq, 1):
            yield item
            progress.step(i, n, what.format(item=item) if what else "")
