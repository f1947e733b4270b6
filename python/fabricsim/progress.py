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

__all__ = ["ProgressBar"]


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
