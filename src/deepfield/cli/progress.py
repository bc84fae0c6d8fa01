"""Progress people can see: a rich bar on a terminal, a line every few seconds otherwise.

On a terminal (stderr) long work shows a bar with done/total, the rate and the time left.
Elsewhere (a log file, CI, an agent reading stderr) a plain line is printed every
``LINE_EVERY_S`` seconds, and one when the work ends if any was printed, so a short step stays
silent. Both go to stderr: stdout is kept for the result (and ``--json``).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO, Any

LINE_EVERY_S = 5.0


def _duration(seconds: float) -> str:
    if seconds != seconds or seconds == float("inf"):
        return "?"
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


class LineProgress:
    """Counts work done and prints ``label: done/total unit (rate/s, ETA …)`` now and then."""

    def __init__(self, label: str, total: int, unit: str, stream: IO[str],
                 every: float = LINE_EVERY_S) -> None:
        self.label, self.total, self.unit = label, total, unit
        self.stream, self.every = stream, every
        self.done = 0
        self.started = time.monotonic()
        self._next = self.started + every
        self.printed = 0

    def advance(self, count: int) -> None:
        self.done += count
        now = time.monotonic()
        if now >= self._next:
            self._next = now + self.every
            self._print(now)

    def line(self, now: float) -> str:
        elapsed = max(now - self.started, 1e-9)
        rate = self.done / elapsed
        left = (self.total - self.done) / rate if rate > 0 else float("inf")
        return (f"{self.label}: {self.done}/{self.total} {self.unit} ({rate:.1f}/s, "
                f"ETA {_duration(max(left, 0.0))})")

    def _print(self, now: float) -> None:
        print(self.line(now), file=self.stream, flush=True)
        self.printed += 1

    def finish(self) -> None:
        if self.printed:
            elapsed = time.monotonic() - self.started
            print(f"{self.label}: {self.done}/{self.total} {self.unit} in {_duration(elapsed)}",
                  file=self.stream, flush=True)


@contextmanager
def progress(label: str, total: int, *, bar: bool = True, unit: str = "items",
             stream: IO[str] | None = None) -> Iterator[Callable[[int], None]]:
    """A callback to report work done (``advance(n)``). ``bar``: may draw a rich bar when
    stderr is a terminal (off for --json); otherwise a line every LINE_EVERY_S seconds."""
    out = stream or sys.stderr
    if total <= 0:
        yield lambda _n: None
        return
    if not out.isatty():
        lines = LineProgress(label, total, unit, out)
        try:
            yield lines.advance
        finally:
            lines.finish()
        return
    if not bar:
        yield lambda _n: None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        ProgressColumn,
        Task,
        TimeRemainingColumn,
    )
    from rich.text import Text

    class RateColumn(ProgressColumn):
        def render(self, task: Task) -> Any:
            speed = task.finished_speed or task.speed
            shown = "" if speed is None else f"{speed:.1f} {unit}/s"
            return Text(shown, style="progress.data.speed")

    with Progress(
        "[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
        RateColumn(), TimeRemainingColumn(), console=Console(file=out), transient=True,
    ) as shown:
        task = shown.add_task(label, total=total)
        yield lambda n: shown.advance(task, n)
