"""A terminal progress bar driven by the core's simulated-time progress.

The core calls back with the fraction of simulated time done about every
0.2 s of wall time, and the bar redraws only then (no refresh thread
competing with the simulation). The bar appears only once a run has lasted `delay_s`, so
short runs print nothing, and only when stderr is a terminal.
"""

from __future__ import annotations

import sys
import time
from types import TracebackType

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TaskProgressColumn, TextColumn

__all__ = ["BatchProgress", "ProgressBar"]


class ProgressBar:
    """Context manager whose instances are the `progress` callback of `fabricsim._core.run`.

    `force` draws the bar even when stderr is not a terminal.
    """

    def __init__(self, description: str = "simulating", delay_s: float = 1.0, force: bool = False) -> None:
        self._description = description
        self._delay_s = delay_s
        self._force = force
        self._enabled = force or sys.stderr.isatty()
        self._start = time.perf_counter()
        self._progress: Progress | None = None
        self._task: TaskID | None = None

    def __enter__(self) -> ProgressBar:
        self._start = time.perf_counter()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def __call__(self, fraction: float) -> None:
        if not self._enabled:
            return
        fraction = min(max(fraction, 0.0), 1.0)
        elapsed = time.perf_counter() - self._start
        wall = f"{int(elapsed) // 60}:{int(elapsed) % 60:02d}"
        if self._progress is None:
            if elapsed < self._delay_s:
                return
            self._progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                TaskProgressColumn(),
                TextColumn("of simulated time, {task.fields[wall]} wall time"),
                console=Console(stderr=True, force_terminal=self._force or None),
                auto_refresh=False,
                transient=True,
            )
            self._task = self._progress.add_task(self._description, total=1.0, completed=fraction, wall=wall)
            self._progress.start()
        assert self._task is not None
        self._progress.update(self._task, completed=fraction, wall=wall, refresh=True)


class BatchProgress:
    """Progress of many runs: a bar over the runs, and one per running run over its simulated time.

    Drawn on stderr when it is a terminal (or `force`), and only once the
    batch has lasted `delay_s`; the driver of a batch calls it (see
    `fabricsim.batch.Progress`), redrawing at most once per call.
    """

    def __init__(self, total: int, description: str = "runs", delay_s: float = 1.0, force: bool = False) -> None:
        self._total = total
        self._description = description
        self._delay_s = delay_s
        self._force = force
        self._enabled = force or sys.stderr.isatty()
        self._start = time.perf_counter()
        self._done = 0
        self._labels: dict[int, str] = {}
        self._fractions: dict[int, float] = {}
        self._progress: Progress | None = None
        self._overall: TaskID | None = None
        self._rows: dict[int, TaskID] = {}

    def __enter__(self) -> BatchProgress:
        self._start = time.perf_counter()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

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
        if not self._enabled:
            return
        if self._progress is None:
            if time.perf_counter() - self._start < self._delay_s:
                return
            self._progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                TaskProgressColumn(),
                TextColumn("{task.fields[note]}"),
                console=Console(stderr=True, force_terminal=self._force or None),
                auto_refresh=False,
                transient=True,
            )
            self._overall = self._progress.add_task(self._description, total=self._total, note="")
            self._progress.start()
        assert self._overall is not None
        elapsed = int(time.perf_counter() - self._start)
        note = f"{self._done} of {self._total} runs, {elapsed // 60}:{elapsed % 60:02d} wall time"
        self._progress.update(self._overall, completed=self._done, note=note)
        for index, label in self._labels.items():
            if index not in self._rows:
                self._rows[index] = self._progress.add_task(f"  {label}", total=1.0, note="of simulated time")
            self._progress.update(self._rows[index], completed=self._fractions[index])
        self._progress.refresh()
