"""Terminal progress bars driven by the core's simulated-time progress.

The core calls back with the fraction of simulated time done about every
0.2 s of wall time, and a bar redraws only then (no refresh thread
competing with the simulation). A bar appears only once it has lasted
`delay_s`, so short runs print nothing, and only when stderr is a terminal
(or `force`). `ProgressBar` follows one run; `BatchProgress` many.
"""

from __future__ import annotations

import sys
import time
from types import TracebackType

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TaskProgressColumn, TextColumn

__all__ = ["BatchProgress", "ProgressBar"]


class _Display:
    """A rich display on stderr, started on the first draw after `delay_s`; a context manager that stops it."""

    def __init__(self, delay_s: float, force: bool) -> None:
        self._delay_s = delay_s
        self._force = force
        self._enabled = force or sys.stderr.isatty()
        self._start = time.perf_counter()
        self._progress: Progress | None = None

    def __enter__(self) -> _Display:
        self._start = time.perf_counter()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def _elapsed(self) -> float:
        return time.perf_counter() - self._start

    def _wall(self) -> str:
        elapsed = int(self._elapsed())
        return f"{elapsed // 60}:{elapsed % 60:02d}"

    def _display(self) -> Progress | None:
        """The display, started now if it is due; None while it is not (disabled, or too early)."""
        if self._progress is None and self._enabled and self._elapsed() >= self._delay_s:
            self._progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                TaskProgressColumn(),
                TextColumn("{task.fields[note]}"),
                console=Console(stderr=True, force_terminal=self._force or None),
                auto_refresh=False,
                transient=True,
            )
            self._started(self._progress)
            self._progress.start()
        return self._progress

    def _started(self, progress: Progress) -> None:
        """Adds the display's rows, once, when it starts."""


class ProgressBar(_Display):
    """Context manager whose instances are the `progress` callback of `fabricsim._core.run`."""

    def __init__(self, description: str = "simulating", delay_s: float = 1.0, force: bool = False) -> None:
        super().__init__(delay_s, force)
        self._description = description
        self._task: TaskID | None = None

    def __enter__(self) -> ProgressBar:
        super().__enter__()
        return self

    def _started(self, progress: Progress) -> None:
        self._task = progress.add_task(self._description, total=1.0, note="")

    def __call__(self, fraction: float) -> None:
        progress = self._display()
        if progress is None:
            return
        assert self._task is not None
        note = f"of simulated time, {self._wall()} wall time"
        progress.update(self._task, completed=min(max(fraction, 0.0), 1.0), note=note, refresh=True)


class BatchProgress(_Display):
    """Progress of many runs: a bar over the runs, and one per running run over its simulated time.

    The driver of a batch calls it (see `fabricsim.batch.Progress`); it
    redraws at most once per call.
    """

    def __init__(self, total: int, description: str = "runs", delay_s: float = 1.0, force: bool = False) -> None:
        super().__init__(delay_s, force)
        self._total = total
        self._description = description
        self._done = 0
        self._labels: dict[int, str] = {}
        self._fractions: dict[int, float] = {}
        self._overall: TaskID | None = None
        self._rows: dict[int, TaskID] = {}

    def __enter__(self) -> BatchProgress:
        super().__enter__()
        return self

    def _started(self, progress: Progress) -> None:
        self._overall = progress.add_task(self._description, total=self._total, note="")

    def started(self, index: int, label: str) -> None:
        self._labels[index] = label
        self._fractions[index] = 0.0
        self._draw()

    def advanced(self, index: int, fraction: float) -> None:
        if index in self._labels:
            self._fractions[index] = min(max(fraction, 0.0), 1.0)
            self._draw()

    def finished(self, index: int) -> None:
        self._done += 1
        self._labels.pop(index, None)
        self._fractions.pop(index, None)
        if self._progress is not None and index in self._rows:
            self._progress.remove_task(self._rows.pop(index))
        self._draw()

    def _draw(self) -> None:
        progress = self._display()
        if progress is None:
            return
        assert self._overall is not None
        note = f"{self._done} of {self._total} runs, {self._wall()} wall time"
        progress.update(self._overall, completed=self._done, note=note)
        for index, label in self._labels.items():
            if index not in self._rows:
                self._rows[index] = progress.add_task(f"  {label}", total=1.0, note="of simulated time")
            progress.update(self._rows[index], completed=self._fractions[index])
        progress.refresh()
