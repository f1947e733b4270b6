"""The `fabricsim` command: run (a scenario, or every point of its sweep), compare, report, examples, topo, bench,
schema, reproduce.

Bad input (a scenario the core rejects, a missing or malformed file, an
output directory that exists or cannot be created or written) is reported as
one line `error: ...` on stderr, before anything is simulated or written. A
run stopped early, by Ctrl-C, SIGTERM or one of its limits, writes what it
measured, marked incomplete. A sweep is checked whole, every point, before
its first run; a point whose run fails stops it (no further point starts),
every run that finished is kept, and running the sweep again resumes it.

Exit codes:

- 0: done;
- 2: bad input;
- 3: an internal simulator error (in a sweep, at the point named), or the process ran out of memory;
- 4: the results could not be written (a full disk, an I/O error), named with the system's reason;
- 5: a run ended short of its end by itself: its summary's `stop_reason` is `time_limit`, `livelock`,
  `stalled` or `memory_limit`;
- 130: stopped by Ctrl-C (SIGINT); 143: stopped by SIGTERM;
- 141: stdout was closed early (`fabricsim schema | head -1`): a quiet stop, as by SIGPIPE.

SIGTERM is handled as Ctrl-C is. A signal in the moment a run ends waits
until its results are written (`deferred_signals`), then stops the command
as it would have.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, NoReturn

import yaml
from rich.console import Console
from rich.table import Table

from . import _core
from .experiments import PAPERS
from .progress import ProgressBar
from .scenario import (
    builtin_scenario,
    example_description,
    example_scenarios,
    is_sweep,
    load_scenario,
    path_safe,
    to_json,
)
from .sweep import prepare, run_into, value_label

if TYPE_CHECKING:
    from .results import Results
    from .sweep import SweepFailure, SweepPoint, SweepResults

__all__ = ["deferred_signals", "main"]

# Runs `fabricsim bench --repeat` takes at most: a bound on a typo's cost.
MAX_BENCH_REPEAT = 1000

# What `topo` tells the check as the memory available: no bound (the largest u64).
_NO_MEMORY_BOUND = 2**64 - 1

EXIT_BAD_INPUT = 2
EXIT_SIMULATOR = 3
EXIT_WRITE_FAILED = 4
EXIT_LIMIT = 5
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a process Ctrl-C killed
EXIT_STDOUT_CLOSED = 141  # 128 + SIGPIPE
EXIT_TERMINATED = 143  # 128 + SIGTERM

# A run's summary["stop_reason"] when the core stopped it itself, short of
# its end: its time limit, a livelock (time stopped advancing), a stall
# (nothing left to happen, work unfinished) or the memory it was allowed
# (docs/RELIABILITY.md). "interrupted" is a signal's doing; "completed" and
# "duration" are whole runs.
LIMIT_STOPS = ("time_limit", "livelock", "stalled", "memory_limit")

# The built-in cases of `fabricsim bench`: the flow reference scenario of
# issue 2, the collective case of issue 3, the MRC case of issue 4 and the
# Spectrum-X case of issue 12, all fixed; docs/PERFORMANCE.md compares runs of them over time.
# The flow-mode case (issue 16) runs MRC's 131,072-NIC fabric in the flow model,
# and mrc-8k the MRC case at 8,192 hosts in the packet model.
BENCH_CASES = {
    "flows": "bench",
    "collective": "bench_collective",
    "mrc": "bench_mrc",
    "mrc-8k": "bench_mrc_8k",
    "spx": "bench_spx",
    "flow-mode": "bench_flow_mode",
}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `fabricsim` command; returns the exit code (see the module docs)."""
    _STDOUT.gone = False
    _fill_closed_descriptors()
    try:
        args = _parser().parse_args(argv)
        with _STOP.raising():
            code = int(args.command(args))
            # A closed stdout shows here rather than in the interpreter's last flush, which would print a traceback.
            # None: started with stdout closed (`>&-`), so print() wrote nothing.
            if sys.stdout is not None:
                sys.stdout.flush()
    except BrokenPipeError:
        return _stdout_closed()
    except _Exit as exc:
        return _fail(str(exc), exc.code)
    except _core.ScenarioError as exc:
        return _fail(str(exc), EXIT_BAD_INPUT)
    except OSError as exc:
        # `path: reason`, not Python's `[Errno 20] ...`.
        where = f"{exc.filename}: " if exc.filename is not None else ""
        return _fail(f"{where}{exc.strerror or exc}", EXIT_BAD_INPUT)
    except _core.SimulationError as exc:
        return _fail(f"internal simulator error: {exc}", EXIT_SIMULATOR)
    except MemoryError:
        # The estimate before the run let it grow past what this process may
        # take (a tighter `ulimit -v` than the machine's memory, say).
        return _fail("out of memory: the run's results outgrew this process; set limits.memory lower", EXIT_SIMULATOR)
    except KeyboardInterrupt:
        return _fail("terminated by SIGTERM" if _STOP.received == signal.SIGTERM else "interrupted", _STOP.exit_code)
    # The reader of stdout went away while the command went on to write its results whole (see _Console).
    return EXIT_STDOUT_CLOSED if _STDOUT.gone and code == 0 else code


def _fill_closed_descriptors() -> None:
    """Opens /dev/null on stdin, stdout or stderr if one was closed (`fabricsim run ... >&-`).

    Otherwise the next file opened, a result being written, would take its
    number, and whatever writes to stdout (the core, a child process) would
    write into that file.
    """
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            devnull = os.open(os.devnull, os.O_RDWR)
            if devnull != fd:
                os.dup2(devnull, fd)
                os.close(devnull)
    # Python leaves sys.stdout None when it started closed; the output then goes nowhere, without failing.
    # Both stay open until the process exits, as the streams they stand in for.
    if sys.stdout is None:
        sys.stdout = Path(os.devnull).open("w")  # noqa: SIM115
    if sys.stderr is None:
        sys.stderr = Path(os.devnull).open("w")  # noqa: SIM115


class _StdoutState:
    """Whether stdout's reader went away during this command."""

    gone = False


_STDOUT = _StdoutState()


class _Console(Console):
    """A console on stdout whose reader may go away (`fabricsim run ... | head -1`).

    Rich's default exits at once with status 1, which could stop a sweep
    between runs; instead the rest of the output goes to /dev/null, the
    command finishes writing its results, and it exits 141 as after SIGPIPE.
    """

    def on_broken_pipe(self) -> None:
        self.quiet = True
        _stdout_to_devnull()
        _STDOUT.gone = True


class _Parser(argparse.ArgumentParser):
    """Bad arguments are one line, `fabricsim run: error: ...`, and exit 2, as every other bad input.

    argparse prints the usage first; `--help` still shows it. Subparsers are
    made of this class too (add_subparsers takes the parent's class).
    """

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {_printable(message)}\n")


class _Exit(Exception):
    """Ends the command with an error line and its own exit code."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


@contextmanager
def _write_failures_exit() -> Iterator[None]:
    """A failure to write results ends the command with exit code 4: the input was fine, the disk was not."""
    from .results import WriteFailedError

    try:
        yield
    except WriteFailedError as exc:
        raise _Exit(str(exc), EXIT_WRITE_FAILED) from None


ProgressCallback = Callable[[float], None]
SignalHandler = Callable[[int, FrameType | None], Any]
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class _StopSignals:
    """SIGINT (Ctrl-C) and SIGTERM (`timeout`, a scheduler): both stop a command the same way.

    Either raises KeyboardInterrupt, which stops a run at the core's next
    look at signals (five times a second): it returns what it measured, and
    that is written marked incomplete. While results are at stake (inside
    `deferred`), a signal is held instead: it stops a run through its
    progress callback (`stopping`), and otherwise waits until the block is
    done, so that no moment of a run's end, the core's output included, can
    lose what was measured. The last signal received names the exit code.
    """

    def __init__(self) -> None:
        self.received: int | None = None
        self.holding = False
        self.pending = False

    @contextmanager
    def raising(self) -> Iterator[None]:
        """While the block runs, SIGINT and SIGTERM raise KeyboardInterrupt (those not ignored)."""
        self.received, self.holding, self.pending = None, False, False
        previous = _replace_handlers(STOP_SIGNALS, self._handle)
        try:
            yield
        finally:
            _restore_handlers(previous)

    @contextmanager
    def deferred(self) -> Iterator[None]:
        """Holds SIGINT and SIGTERM while the block runs; then raises KeyboardInterrupt if one is still held."""
        self.holding, self.pending = True, False
        previous = _replace_handlers(STOP_SIGNALS, self._handle)
        try:
            yield
        finally:
            _restore_handlers(previous)
            self.holding = False
        if self.pending:
            self.pending = False
            raise KeyboardInterrupt

    def stopping(self, progress: ProgressCallback) -> ProgressCallback:
        """The progress callback of a run inside `deferred`, which stops the run when a signal is held.

        Until the core first calls it, signals raise as outside `deferred`:
        building the simulation can be interrupted, and nothing is measured
        yet. A run shorter than one progress period is not protected.
        """
        self.holding = False

        def call(fraction: float) -> None:
            self.holding = True
            if self.pending:
                # Stops the run, which reports it: no need to raise it again after the block.
                self.pending = False
                raise KeyboardInterrupt
            progress(fraction)

        return call

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.received = signum
        if not self.holding:
            raise KeyboardInterrupt
        self.pending = True

    @property
    def cause(self) -> str:
        """What stopped the command, in words: `Ctrl-C` or `SIGTERM`."""
        return "SIGTERM" if self.received == signal.SIGTERM else "Ctrl-C"

    @property
    def exit_code(self) -> int:
        """130 after Ctrl-C, 143 after SIGTERM."""
        return EXIT_TERMINATED if self.received == signal.SIGTERM else EXIT_INTERRUPTED


_STOP = _StopSignals()
# Around a run's end and the writing of its results; see _StopSignals.
deferred_signals = _STOP.deferred


def _replace_handlers(signums: Sequence[int], handler: SignalHandler) -> dict[int, Any]:
    """Installs `handler` for those of `signums` that are handled; returns the handlers it replaced.

    A signal that is ignored (a background job's SIGINT) stays ignored. Only
    the main thread may set handlers; called from another, nothing changes.
    """
    if threading.current_thread() is not threading.main_thread():
        return {}
    previous = {}
    for signum in signums:
        current = signal.getsignal(signum)
        # None: a handler set outside Python, which could not be put back.
        if current is not signal.SIG_IGN and current is not None:
            previous[signum] = signal.signal(signum, handler)
    return previous


def _restore_handlers(previous: Mapping[int, Any]) -> None:
    for signum, handler in previous.items():
        signal.signal(signum, handler)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="fabricsim", description="Packet-level simulator of AI-training networks.")
    parser.add_argument("--version", action="version", version=f"fabricsim {_core.version()}")
    commands = parser.add_subparsers(title="commands", required=True, metavar="COMMAND")

    run = commands.add_parser(
        "run", help="run a scenario (each value of its sweep, if it has one) and write its results directory"
    )
    run.add_argument("scenario", nargs="?", type=_path, help="scenario YAML file (default: the built-in default)")
    run.add_argument("-o", "--output", type=_path, help="output directory (default: runs/<scenario name>)")
    run.add_argument("--seed", type=int, help="master random seed (same as -s seed=N)")
    run.add_argument(
        "--mode",
        choices=("packet", "flow"),
        help="packet: every packet through every queue; flow: max-min fair rates over links, for whole clusters "
        "(same as -s mode=...)",
    )
    _add_threads(run)
    _add_overrides(run)
    run.add_argument("--overwrite", action="store_true", help="replace the results of an existing output directory")
    run.add_argument("--csv", action="store_true", help="also write every table as CSV")
    run.add_argument("--plot", action="store_true", help="for a sweep, also draw busbw.png: bus bandwidth against size")
    run.add_argument("--report", action="store_true", help="also write report.html, a page of figures (see `report`)")
    run.add_argument("-j", "--jobs", type=int, help="for a sweep, runs at once (default: the number of cores)")
    run.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="for a sweep, run on the Ray cluster at ADDRESS (`auto`: the one this machine is in; `local`: start one "
        "here); needs `pip install fabricsim[ray]`",
    )
    run.set_defaults(command=_cmd_run)

    compare = commands.add_parser(
        "compare", help="run one scenario under every design (RoCE, MRC, Spectrum-X, PRO, HPN, SHIFT) side by side"
    )
    compare.add_argument("scenario", nargs="?", type=_path, help="scenario YAML file (default: the built-in default)")
    compare.add_argument(
        "--designs", help=f"comma-separated designs (default: every one that can run it): {','.join(_core.designs())}"
    )
    compare.add_argument("--seeds", type=int, default=1, help="seeds per design, from the scenario's (default: 1)")
    compare.add_argument("-j", "--jobs", type=int, help="runs at once (default: the number of cores)")
    compare.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="run on the Ray cluster at ADDRESS (`auto`, or `local` to start one here); needs fabricsim[ray]",
    )
    compare.add_argument("-o", "--output", type=_path, help="output directory (default: runs/compare_<scenario name>)")
    _add_overrides(compare)
    compare.add_argument("--overwrite", action="store_true", help="replace an existing output directory")
    compare.add_argument("--plot", action="store_true", help="also draw fct_cdf.png and throughput.png")
    compare.add_argument("--report", action="store_true", help="also write report.html, the designs' figures overlaid")
    compare.set_defaults(command=_cmd_compare)

    report = commands.add_parser(
        "report", help="write report.html: a self-contained page of a run, sweep or comparison directory's figures"
    )
    report.add_argument("directory", type=_path, help="a run, sweep or comparison directory")
    report.set_defaults(command=_cmd_report)

    examples = commands.add_parser("examples", help="list the scenarios shipped with fabricsim, or copy one to edit")
    examples.add_argument("action", nargs="?", choices=("list", "copy"), default="list", help="list (default) or copy")
    examples.add_argument("name", nargs="?", help="copy: the example's name as listed (e.g. mrc/fig16_ecmp)")
    examples.add_argument("directory", nargs="?", type=_path, default=Path(), help="copy: where to (default: .)")
    examples.set_defaults(command=_cmd_examples)

    topo = commands.add_parser("topo", help="count the switches, links and optics of a scenario's topology")
    topo.add_argument("scenario", type=_path, help="scenario YAML file")
    _add_overrides(topo)
    topo.add_argument("--json", action="store_true", help="print the report as JSON")
    topo.set_defaults(command=_cmd_topo)

    bench = commands.add_parser("bench", help="measure simulator speed and memory on the reference scenarios")
    bench.add_argument(
        "scenario", nargs="?", type=_path, help="measure this scenario file instead of the built-in cases"
    )
    bench.add_argument(
        "--case",
        choices=(*BENCH_CASES, "all"),
        help="built-in case: flows (the 1,024-host permutation), collective (a 256-rank 8MB ring all-reduce), "
        "mrc (the permutation over MRC), mrc-8k (the same at 8,192 hosts), spx (the permutation over four planes, "
        "adaptive routing and Spectrum-X NICs), flow-mode (a 131,072-rank ring all-reduce on MRC's fabric in the "
        "flow model), or all (default; each in a fresh process, so that each peak memory is its own)",
    )
    bench.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="runs of each case, each in a fresh process, the cases taken in turn: the median wall time with its "
        "range (default: 1; a machine's speed drifts, so compare medians of runs made in the same minutes)",
    )
    _add_threads(bench)
    _add_overrides(bench)
    bench.add_argument("--json", action="store_true", help="print the measurements as JSON")
    bench.set_defaults(command=_cmd_bench)

    schema = commands.add_parser("schema", help="print the JSON Schema of scenarios")
    schema.set_defaults(command=_cmd_schema)

    reproduce = commands.add_parser(
        "reproduce", help="rerun a paper's experiments and print the paper's numbers beside ours"
    )
    papers = ", ".join(f"{key} ({text})" for key, text in PAPERS.items())
    reproduce.add_argument("paper", choices=tuple(PAPERS), help=f"which paper: {papers}")
    reproduce.add_argument("--quick", action="store_true", help="the quick version of every experiment")
    reproduce.add_argument(
        "--out", type=_path, default=Path("reproduce-out"), help="output directory (default: reproduce-out)"
    )
    reproduce.add_argument(
        "--only", action="append", default=[], metavar="KEY", help="run only this experiment (e.g. fig16); repeatable"
    )
    reproduce.add_argument(
        "-j",
        "--jobs",
        type=int,
        help="runs at once, over every experiment and seed (default: the number of cores); each run is allowed its "
        "share of the memory available, and one that needs more runs alone after the others",
    )
    reproduce.set_defaults(command=_cmd_reproduce)
    return parser


def _add_threads(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--threads",
        type=int,
        help="threads the packet model runs on, 1 or 2: with 2, the fabric's edge (NICs and a third of the leaves) "
        "on one and the rest on the other; results are deterministic for each value (same as -s threads=N)",
    )


def _with_threads(args: argparse.Namespace) -> list[str]:
    """The run's overrides, with `--threads` as the last of them."""
    return [*args.overrides, *([f"threads={args.threads}"] if args.threads is not None else [])]


def _add_overrides(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-s",
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a scenario field by its dotted path, e.g. -s topology.radix=8 -s traffic.0.bytes=1MB",
    )


def _cmd_run(args: argparse.Namespace) -> int:
    source = args.scenario or builtin_scenario("default")
    scenario = load_scenario(source, _with_threads(args))
    if args.seed is not None:
        scenario["seed"] = args.seed
    if args.mode is not None:
        scenario["mode"] = args.mode
    if args.scenario is not None:
        # An unnamed scenario file names its run after the file.
        scenario.setdefault("name", args.scenario.stem)
    if is_sweep(scenario):
        return _run_sweep(args, scenario)
    if args.plot:
        raise _core.ScenarioError(
            "--plot: only a sweep is plotted (bus bandwidth against size); this scenario has none"
        )
    if args.jobs is not None or args.ray is not None:
        option = "--jobs" if args.jobs is not None else "--ray"
        raise _core.ScenarioError(f"{option}: only a sweep has several runs to spread; this scenario has no sweep")
    text = to_json(scenario)
    name = str(json.loads(_core.resolve(text))["name"])

    from .results import Results, check_output_dir

    output = check_output_dir(args.output or _default_output(name), args.overwrite)
    with _write_failures_exit(), deferred_signals():
        with ProgressBar() as bar:
            raw = _core.run(text, _STOP.stopping(bar))
        results = Results(raw)
        path = results.write(output, overwrite=args.overwrite, csv=args.csv)
        if args.report:
            _write_report(path)

    for warning in results.summary.get("warnings", []):
        print(f"warning: {_printable(warning)}", file=sys.stderr)
    for ignored in results.summary.get("flow_mode_ignores", []):
        print(f"warning: the flow model runs without {_printable(ignored)}", file=sys.stderr)
    console = _Console()
    console.print(_summary_table(name, results))
    if results.summary.get("jobs"):
        console.print(_jobs_table(results.summary["jobs"]))
    if results.complete:
        console.print(f"results: {path}")
        return 0
    return _report_incomplete(console, "the run", results.summary, "incomplete", path)


def _run_sweep(args: argparse.Namespace, scenario: dict[str, Any]) -> int:
    from .batch import Stopped

    parameters, points = prepare(scenario)
    name = str(json.loads(points[0].resolved)["name"])
    output = args.output or _default_output(name)
    console = _Console(highlight=False)
    jobs = _jobs(args.jobs)

    def done(point: SweepPoint, results: Results, reused: bool) -> None:
        # A run's own limit says why; a stop signal is named once the batch has ended.
        limit = results.summary.get("stop_reason") in LIMIT_STOPS
        why = _stop_cause(results.summary) if limit else "stopped"
        state = " (reused)" if reused else "" if results.complete else f" (incomplete, {why})"
        console.print(f"[{point.index + 1}/{len(points)}] {point.named}{state}", markup=False, soft_wrap=True)

    try:
        with _write_failures_exit():
            sweep = run_into(
                parameters,
                points,
                output,
                jobs=jobs,
                ray=args.ray,
                overwrite=args.overwrite,
                csv=args.csv,
                plot=args.plot,
                progress=True,
                on_run=done,
            )
    except Stopped as stopped:
        _STOP.received = stopped.signum
        console.print(f"results (incomplete, stopped by {_STOP.cause}; run it again to resume): {output}", markup=False)
        return _STOP.exit_code

    path = output
    if args.report:
        with _write_failures_exit():
            _write_report(path)
    table = sweep.table()
    if table:
        # Plain print: the layout is nccl-tests', column for column.
        print(table, end="")
    else:
        console.print(_sweep_summary_table(name, sweep))
    if sweep.complete:
        console.print(f"results: {path}")
        return 0
    ran = len(sweep.finished)
    state = f"incomplete, {ran} of {len(points)} runs"
    if sweep.failure is not None:
        console.print(f"results ({state}): {path}", markup=False)
        return _point_failed(sweep.failure, len(points))
    # A run stopped by a limit says why.
    stopped_run = next(((p, r) for p, r in sweep.finished if not r.complete), None)
    summary = stopped_run[1].summary if stopped_run is not None else {}
    run = f"the run of {stopped_run[0].named}" if stopped_run is not None else "the sweep"
    return _report_incomplete(console, run, summary, state, path)


def _default_output(name: str, prefix: str = "") -> Path:
    """`runs/<prefix><name>`, the output directory when -o is not given.

    A name too long for a directory name is refused here, naming the `name`
    field: creating the directory would blame the path, which the user never wrote.
    """
    directory = path_safe(prefix + name)
    try:
        limit = os.pathconf(".", "PC_NAME_MAX")
    except (OSError, ValueError):
        limit = 255  # the usual limit, where the system does not say
    if len(directory.encode("utf-8")) > limit:
        raise _core.ScenarioError(
            f"name: {name[:40]!r}... ({len(name):,} characters) is too long to name the output directory "
            f"runs/<name> (at most {limit}); shorten it or give the directory with -o"
        )
    return Path("runs") / directory


def _writable_directory(option: str, directory: Path) -> None:
    """Refuses, naming `option`, a directory that cannot be created or written to; leaves nothing behind."""
    from .results import OutputNotWritableError, check_output_dir

    try:
        check_output_dir(directory, overwrite=True)
    except OutputNotWritableError as exc:
        raise _core.ScenarioError(f"{option}: {exc}") from None


def _jobs(jobs: int | None) -> int:
    """Runs at once: `-j`, else one per core."""
    count = jobs if jobs is not None else (os.cpu_count() or 1)
    if count < 1:
        raise _core.ScenarioError(f"--jobs: {count}: at least one run at a time")
    return count


def _report_incomplete(console: Console, run: str, summary: Mapping[str, Any], state: str, path: Path) -> int:
    """Says why results were written incomplete; the exit code is 5 when a limit stopped `run`, else the signal's."""
    console.print(f"results ({state}, {_stop_cause(summary)}): {path}", markup=False)
    code = _stop_code(summary)
    if code == EXIT_LIMIT:
        _fail(f"{run} {_stop_cause(summary)}; what it measured is written, marked incomplete: {path}", code)
    return code


def _stop_cause(summary: Mapping[str, Any]) -> str:
    """Why a run is incomplete, in words: a limit it reached (its `stop_reason`), else the signal that stopped it."""
    reason = summary.get("stop_reason")
    return f"stopped early: {reason}" if reason in LIMIT_STOPS else f"stopped by {_STOP.cause}"


def _stop_code(summary: Mapping[str, Any]) -> int:
    """Exit code of an incomplete run: 5 when a limit stopped it, else the signal's."""
    return EXIT_LIMIT if summary.get("stop_reason") in LIMIT_STOPS else _STOP.exit_code


def _point_failed(failure: SweepFailure, points: int) -> int:
    """Reports the sweep point whose run failed: exit 3, or 2 when the core found its scenario bad only then."""
    point = f"point {failure.point.index + 1}/{points} ({failure.point.named})"
    error = failure.error
    if isinstance(error, _core.ScenarioError):
        return _fail(f"{point}: {error}", EXIT_BAD_INPUT)
    if isinstance(error, _core.SimulationError):
        return _fail(f"internal simulator error at {point}: {error}", EXIT_SIMULATOR)
    return _fail(f"internal error at {point}: {type(error).__name__}: {error}", EXIT_SIMULATOR)


def _cmd_compare(args: argparse.Namespace) -> int:
    from . import compare
    from .results import check_output_dir, write_atomic

    source = args.scenario or builtin_scenario("default")
    scenario = load_scenario(source, args.overrides)
    if args.scenario is not None:
        scenario.setdefault("name", args.scenario.stem)
    designs = [d.strip() for d in args.designs.split(",")] if args.designs is not None else None
    runs, left_out = compare.plan(scenario, designs, args.seeds)
    jobs = _jobs(args.jobs)
    from .batch import check_backend

    check_backend(jobs, args.ray)
    name = str(scenario.get("name", "scenario"))
    output = check_output_dir(args.output or _default_output(name, "compare_"), args.overwrite)
    for design, why in left_out.items():
        print(f"note: {design} left out: {_printable(why)}", file=sys.stderr)
    from .batch import Stopped
    from .progress import BatchProgress

    try:
        with _write_failures_exit(), BatchProgress(len(runs), description="compare") as bar:
            rows = compare.run_all(runs, output, jobs, ray=args.ray, progress=bar)
    except Stopped as stopped:
        _STOP.received = stopped.signum
        print(f"results (incomplete, stopped by {_STOP.cause}): {output}")
        return _STOP.exit_code
    import polars as pl

    frame = pl.DataFrame(rows)
    write_atomic(output / "compare.parquet", lambda f: frame.write_parquet(f))
    if args.plot:
        from .plots import plot_compare

        plot_compare(output, runs)
    if args.report:
        with _write_failures_exit():
            _write_report(output)
    faults = compare.faults_with_times(runs[0].scenario)
    _Console().print(_compare_table(name, rows, [r.design for r in runs], args.seeds, faults))
    timed = [f"recovery_{k}_ms" for k in range(1, len(faults) + 1)]
    if timed and all(row.get(key) is None for row in rows for key in timed):
        print(
            "note: no recovery times: they are read from sampled NICs (telemetry.sample_interval and "
            "telemetry.hosts) with traffic flowing before the fault",
            file=sys.stderr,
        )
    print(f"results: {output}")
    return 0 if all(r["complete"] for r in rows) else EXIT_LIMIT


def _compare_table(
    name: str,
    rows: Sequence[Mapping[str, Any]],
    order: Sequence[str],
    seeds: int,
    faults: Sequence[tuple[float, str]] = (),
) -> Table:
    from .compare import METRICS, spread

    designs = list(dict.fromkeys(order))
    title = f"{name}: each design" + (f", mean (min-max) over {seeds} seeds" if seeds > 1 else "")
    table = Table(title=title)
    table.add_column("metric")
    for design in designs:
        table.add_column(design, justify="right")
    for key, label, unit in METRICS:
        cells = []
        for design in designs:
            values = [r[key] for r in rows if r["design"] == design]
            cells.append(_spread_cell(spread(values), seeds))
        if all(c == "-" for c in cells):
            continue
        table.add_row(f"{label} ({unit})" if unit else label, *cells)
    for k, (at, what) in enumerate(faults, start=1):
        key = f"recovery_{k}_ms"
        cells = [_spread_cell(spread([r.get(key) for r in rows if r["design"] == d]), seeds) for d in designs]
        if any(c != "-" for c in cells):
            table.add_row(f"recovery after {what} at {_seconds(at)} (ms)", *cells)
    complete = ["yes" if all(r["complete"] for r in rows if r["design"] == d) else "no" for d in designs]
    table.add_row("complete", *complete)
    return table


def _spread_cell(values: tuple[float, float, float] | None, seeds: int) -> str:
    if values is None:
        return "-"
    mean, low, high = values
    if math.isinf(high):
        # Recovery that some seed never saw: the traffic did not come back while it lasted.
        return "never" if math.isinf(low) else f"never ({low:,.4g}-never)"
    text = f"{mean:,.4g}"
    return text if seeds == 1 or low == high else f"{text} ({low:,.4g}-{high:,.4g})"


def _cmd_report(args: argparse.Namespace) -> int:
    with _write_failures_exit():
        path = _write_report(args.directory)
    print(f"report: {path}")
    return 0


def _write_report(directory: Path) -> Path:
    from .report import write_report

    return write_report(directory)


def _cmd_examples(args: argparse.Namespace) -> int:
    found = example_scenarios()
    if args.action == "list":
        if args.name is not None:
            raise _core.ScenarioError(f"examples list: takes no name ({args.name!r}); to copy one: examples copy NAME")
        table = Table(title=f"{len(found)} example scenarios (fabricsim examples copy NAME [DIR])")
        table.add_column("name")
        table.add_column("what it is")
        for name, path in found.items():
            table.add_row(name, example_description(path))
        _Console().print(table)
        return 0
    if args.name is None:
        raise _core.ScenarioError("examples copy: which example? (fabricsim examples list names them)")
    if args.name not in found:
        raise _core.ScenarioError(f"examples copy: no example named {args.name!r} (fabricsim examples list names them)")
    source = found[args.name]
    if args.directory.exists() and not args.directory.is_dir():
        raise _core.ScenarioError(f"examples copy: {args.directory} is not a directory")
    _writable_directory("examples copy: DIRECTORY", args.directory)
    target = args.directory / f"{source.stem}.yaml"
    if target.exists():
        raise _core.ScenarioError(f"examples copy: {target} exists; copy into another directory")
    # Its includes merged in, so that the copy stands alone; its header kept.
    body = yaml.safe_dump(load_scenario(source), sort_keys=False)
    from .results import write_atomic

    args.directory.mkdir(parents=True, exist_ok=True)
    text = "\n".join([*_leading(source), body])
    write_atomic(target, lambda f: f.write(text.encode("utf-8")))
    print(f"copied {args.name} to {target}")
    return 0


def _leading(source: Path) -> list[str]:
    """The copy's header: the example's own leading comment and where it came from."""
    lines = []
    for line in source.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        lines.append(line)
    return [*lines, f"# (copied from fabricsim's example {source.parent.name}/{source.stem}, includes merged)"]


def _cmd_topo(args: argparse.Namespace) -> int:
    scenario = load_scenario(args.scenario, args.overrides)
    # The whole scenario is checked, as `run` checks it (a bad reference is bad input whatever the command), but
    # not against the machine's memory, and it need not send anything: only the topology is built.
    _core.resolve(to_json(scenario), _NO_MEMORY_BOUND, to_run=False)
    report = json.loads(_core.topology_report(to_json(scenario)))
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    _Console().print(_topology_table(report))
    return 0


def _cmd_bench(args: argparse.Namespace) -> int:
    if args.scenario is not None and args.case is not None:
        raise _core.ScenarioError("--case: give either a scenario file or a built-in case, not both")
    if not 1 <= args.repeat <= MAX_BENCH_REPEAT:
        raise _core.ScenarioError(f"--repeat: {args.repeat}: give 1 to {MAX_BENCH_REPEAT} runs")
    single = args.scenario is not None or args.case in BENCH_CASES
    if single and args.repeat == 1:
        source = args.scenario or builtin_scenario(BENCH_CASES[args.case])
        report, summary, complete = _bench_one(source, _with_threads(args))
        if args.json:
            print(json.dumps(report, indent=2))
        else:
            title = "fabricsim bench" + ("" if args.scenario is not None else f": {args.case}")
            _Console().print(_bench_table(report, title))
        if not complete:
            return _fail(f"benchmark {_stop_cause(summary)}; the figures cover part of the run", _stop_code(summary))
        return 0

    # Each run in a fresh process, so that each peak memory is its own; the
    # cases taken in turn, so that the machine's drift spreads over them all.
    cases = [args.scenario.resolve()] if args.scenario is not None else [args.case] if single else list(BENCH_CASES)
    runs: dict[str | Path, list[dict[str, Any]]] = {case: [] for case in cases}
    for _ in range(args.repeat):
        for case in cases:
            report = _bench_in_child(case, _with_threads(args))
            if isinstance(report, int):
                return report
            runs[case].append(report)
    reports = {}
    for case, measured in runs.items():
        report = _bench_repeated(measured)
        if isinstance(report, str):
            return _fail(f"bench {case}: {report}", EXIT_SIMULATOR)
        reports["scenario" if isinstance(case, Path) else case] = report
    if single:
        name, report = next(iter(reports.items()))
        if args.json:
            print(json.dumps(report, indent=2))
        else:
            _Console().print(_bench_table(report, "fabricsim bench" + ("" if name == "scenario" else f": {name}")))
        return 0
    if args.json:
        # The reference case's keys stay at the top level, as before the collective case existed.
        print(json.dumps({**reports["flows"], **{case: r for case, r in reports.items() if case != "flows"}}, indent=2))
    else:
        console = _Console()
        for case, report in reports.items():
            console.print(_bench_table(report, f"fabricsim bench: {case}"))
    return 0


def _bench_repeated(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any] | str:
    """One case's runs as one report: the median run's rates, the range of wall times, the largest peak memory.

    The median run of an even number is the faster of the two middle ones.

    A run is deterministic, so every run must count the same events: a
    difference is a fault, reported as the string returned.
    """
    counts = {(r["events"], r.get("packet_hops"), r.get("rate_computations")) for r in runs}
    if len(counts) > 1:
        return f"runs of the same scenario counted different events: {sorted(r['events'] for r in runs)}"
    walls = sorted(r["wall_s"] for r in runs)
    median = dict(sorted(runs, key=lambda r: r["wall_s"])[(len(runs) - 1) // 2])
    if len(runs) == 1:
        return median
    median["peak_rss_bytes"] = max(r["peak_rss_bytes"] for r in runs)
    median["wall_s_min"], median["wall_s_max"] = walls[0], walls[-1]
    median["runs_wall_s"] = [r["wall_s"] for r in runs]
    return median


def _bench_one(source: Path, overrides: Sequence[str]) -> tuple[dict[str, Any], dict[str, Any], bool]:
    """Runs one scenario in this process; its measurements, the core's summary and whether it ran to the end."""
    scenario = load_scenario(source, overrides)
    text = to_json(scenario)
    _core.resolve(text)
    with ProgressBar(description="benchmark") as bar:
        start = time.perf_counter()
        raw = _core.run(text, bar)
        wall_s = time.perf_counter() - start
    summary = raw["summary"]
    report = {
        "wall_s": wall_s,
        "events_per_s": summary["events"] / wall_s,
        "peak_rss_bytes": _peak_rss_bytes(),
        "events": summary["events"],
        "sim_time_s": summary["sim_time_s"],
    }
    # The packet model counts packet hops; the flow model, rate computations.
    if summary.get("mode") == "flow":
        report["rate_computations"] = summary["rate_computations"]
        report["streams"] = summary["streams"]
    else:
        report["packet_hops"] = summary["packet_hops"]
        report["packet_hops_per_s"] = summary["packet_hops"] / wall_s
        report["threads"] = scenario.get("threads", 1)
    return report, summary, bool(raw["complete"])


def _bench_in_child(case: str | Path, overrides: Sequence[str]) -> dict[str, Any] | int:
    """Measures a built-in case (or a scenario file) in a fresh interpreter: its report, or the exit code of a child
    that failed.

    The peak RSS of a process only grows, so cases measured one after the
    other in one process would each report the largest so far. The child
    shares this terminal's stderr, so its progress bar and errors show.
    """
    command = [sys.executable, "-m", "fabricsim", "bench"]
    command += [str(case)] if isinstance(case, Path) else ["--case", case]
    command.append("--json")
    for override in overrides:
        command += ["-s", override]
    child = subprocess.run(command, stdout=subprocess.PIPE, text=True, check=False)
    if child.returncode < 0:
        return _fail(f"bench {case}: the process was killed by signal {-child.returncode}", EXIT_SIMULATOR)
    if child.returncode != 0:
        return child.returncode
    return dict(json.loads(child.stdout))


def _cmd_schema(args: argparse.Namespace) -> int:
    print(_core.schema().rstrip("\n"))
    return 0


def _cmd_reproduce(args: argparse.Namespace) -> int:
    from .experiments import paper_experiments
    from .experiments.framework import Experiment, Row, Run, reproduce, verdict_counts

    keys = {e.key for e in paper_experiments(args.paper)}
    unknown = sorted(set(args.only) - keys)
    if unknown:
        known = ", ".join(sorted(keys))
        raise _core.ScenarioError(f"--only: unknown experiment(s) {', '.join(unknown)}; known: {known}")
    # Wide enough for the comparison tables when the output is not a terminal.
    console = _Console(highlight=False, width=None if sys.stdout.isatty() else 160)
    start = time.perf_counter()

    def ran(run: Run, seed: int, wall_s: float) -> None:
        console.print(f"  {run.scenario}, seed {seed} ({wall_s:.1f} s)", markup=False)

    def done(exp: Experiment, rows: list[Row], wall_s: float) -> None:
        table = Table(title=f"{exp.figure}: {exp.title} ({wall_s:.1f} s)", title_justify="left")
        table.add_column("metric")
        table.add_column("paper")
        table.add_column("fabricsim", justify="right")
        table.add_column("verdict")
        for row in rows:
            table.add_row(row.metric, row.paper, row.ours, row.verdict)
        console.print(table)
        if exp.note:
            console.print(f"note: {exp.note}", markup=False)

    if args.out.exists() and not args.out.is_dir():
        raise _core.ScenarioError(f"--out: {args.out} is not a directory")
    _writable_directory("--out", args.out)
    with _write_failures_exit():
        results = reproduce(
            args.paper, args.out, args.quick, args.only, on_experiment=done, on_run=ran, jobs=_jobs(args.jobs)
        )
    counts = verdict_counts([row for rows, _ in results.values() for row in rows])
    console.print("verdicts: " + ", ".join(f"{n} {verdict}" for verdict, n in counts.items()), markup=False)
    console.print(f"total wall time {time.perf_counter() - start:.1f} s; results: {args.out}", markup=False)
    return 0


# Longest error line printed: the start names the field or file, the end the reason.
MAX_ERROR_CHARS = 1000


def _path(text: str) -> Path:
    """A path argument; an empty one is refused (it would mean the current directory)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path")
    return Path(text)


def _fail(message: str, code: int) -> int:
    print(f"error: {_printable(message)}", file=sys.stderr)
    return code


def _printable(message: str) -> str:
    """`message` (an error, a warning, a note) as one bounded line that cannot drive the terminal.

    Some errors of libraries span several lines; a path or a value quoted
    from the input may hold a NUL, a tab or an escape sequence, and may be
    thousands of characters long.
    """
    line = " ".join(message.splitlines())
    line = "".join(char.encode("unicode_escape").decode("ascii") if not char.isprintable() else char for char in line)
    if len(line) > MAX_ERROR_CHARS:
        cut = len(line) - MAX_ERROR_CHARS
        line = f"{line[: MAX_ERROR_CHARS * 2 // 3]} ...[{cut:,} characters]... {line[-(MAX_ERROR_CHARS // 3) :]}"
    return line


def _stdout_closed() -> int:
    """Exit code when stdout's reader went away (`fabricsim schema | head -1`): quiet, as after SIGPIPE."""
    _stdout_to_devnull()
    return EXIT_STDOUT_CLOSED


def _stdout_to_devnull() -> None:
    """Points stdout at /dev/null: the interpreter flushes it once more at exit, and that must not fail."""
    try:
        fileno = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return  # None, or not a file (a test's capture): nothing of the process's to redirect
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fileno)
    os.close(devnull)


def _peak_rss_bytes() -> int:
    # ru_maxrss is in KiB on Linux and in bytes on macOS.
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def _summary_table(name: str, results: Results) -> Table:
    s = results.summary
    table = Table(title=f"fabricsim run: {name}" + ("" if results.complete else " (incomplete)"), show_header=False)
    table.add_column("metric")
    table.add_column("value", justify="right")
    rows = [
        ("simulated time", _seconds(s.get("sim_time_s"))),
        ("flows completed", f"{_count(s.get('flows_completed'))} / {_count(s.get('flows'))}"),
        ("FCT p50", _seconds(_us_to_s(s.get("fct_p50_us")))),
        ("FCT p99", _seconds(_us_to_s(s.get("fct_p99_us")))),
        ("FCT max", _seconds(_us_to_s(s.get("fct_max_us")))),
        ("goodput", _number(s.get("goodput_gbps"), "Gb/s")),
        ("drops", _count(s.get("drops")) + _by_cause(s.get("drops_by_cause"))),
        ("ECN marks", _count(s.get("ecn_marks"))),
        ("trims", _count(s.get("trims"))),
        ("PFC pauses sent", _count(s.get("pauses_sent"))),
        ("paused time", _seconds(s.get("paused_time_s"))),
        ("QP errors", _count(s.get("qp_errors"))),
        ("events", _count(s.get("events"))),
    ]
    if s.get("mode") == "flow":
        rows = [row for row in rows if row[0] not in ("drops", "ECN marks", "trims", "PFC pauses sent", "paused time")]
        rows.append(("rate computations", _count(s.get("rate_computations"))))
    else:
        rows.append(("packet hops", _count(s.get("packet_hops"))))
    for label, value in rows:
        table.add_row(label, value)
    return table


def _topology_table(report: Mapping[str, Any]) -> Table:
    table = Table(title="topology", show_header=False)
    table.add_column("quantity")
    table.add_column("value", justify="right")
    nics = report.get("nics") or 0
    tiers = report.get("switches_per_tier") or []
    table.add_row("NICs", _count(nics))
    table.add_row("NIC ports", _count(report.get("nic_ports")))
    table.add_row("switches", _count(report.get("switches_total")))
    for tier, count in enumerate(tiers):
        table.add_row(f"  tier {tier}", _count(count))
    table.add_row("links", _count(report.get("links_total")))
    table.add_row("transceivers", _count(report.get("transceivers")))
    table.add_row("bisection bandwidth", _number(_scaled(report.get("bisection_bps"), 1e-12), "Tb/s"))
    if nics:
        table.add_row("switches per NIC", _number(_scaled(report.get("switches_total"), 1 / nics)))
        table.add_row("transceivers per NIC", _number(_scaled(report.get("transceivers"), 1 / nics)))
    space = report.get("path_space")
    if isinstance(space, Mapping):
        fanout = " x ".join(str(f) for f in space.get("fanout", []) if isinstance(f, int) and f > 1) or "1"
        table.add_row(
            f"equal-cost paths {space.get('from')} to {space.get('to')}", f"{_count(space.get('paths'))} ({fanout})"
        )
    return table


def _bench_table(report: Mapping[str, Any], title: str) -> Table:
    table = Table(title=title, show_header=False)
    table.add_column("measure")
    table.add_column("value", justify="right")
    if "runs_wall_s" in report:
        table.add_row("runs", _count(len(report["runs_wall_s"])))
        spread = f"{report['wall_s_min']:.3f}-{report['wall_s_max']:.3f} s"
        table.add_row("wall time, median (range)", f"{_number(report['wall_s'], 's')} ({spread})")
    else:
        table.add_row("wall time", _number(report["wall_s"], "s"))
    if "threads" in report:
        table.add_row("threads", _count(report["threads"]))
    table.add_row("events", _count(report["events"]))
    table.add_row("events per second", _count(round(report["events_per_s"])))
    if "packet_hops" in report:
        table.add_row("packet hops", _count(report["packet_hops"]))
        table.add_row("packet hops per second", _count(round(report["packet_hops_per_s"])))
    else:
        table.add_row("rate computations", _count(report["rate_computations"]))
        table.add_row("streams", _count(report["streams"]))
    peak = "peak memory (RSS), largest run" if "runs_wall_s" in report else "peak memory (RSS)"
    table.add_row(peak, _number(report["peak_rss_bytes"] / 2**20, "MiB"))
    table.add_row("simulated time", _seconds(report["sim_time_s"]))
    return table


def _jobs_table(jobs: Mapping[str, Mapping[str, Any]]) -> Table:
    table = Table(title="jobs")
    table.add_column("job")
    table.add_column("ranks", justify="right")
    table.add_column("JCT", justify="right")
    table.add_column("ideal JCT", justify="right")
    table.add_column("slowdown", justify="right")
    for name, job in jobs.items():
        table.add_row(
            name,
            _count(job.get("ranks")),
            _seconds(job.get("jct_s")),
            _seconds(job.get("ideal_jct_s")),
            _number(job.get("jct_slowdown")),
        )
    return table


def _sweep_summary_table(name: str, sweep: SweepResults) -> Table:
    table = Table(title=f"fabricsim sweep: {name} over {sweep.parameter}")
    # A column per swept field, headed by its last part (`bytes`, `kind`): the title names them whole.
    for parameter in sweep.parameters:
        table.add_column(parameter if len(sweep.parameters) == 1 else parameter.rsplit(".", 1)[-1])
    seeded = any(p.seed is not None for p in sweep.points)
    if seeded:
        table.add_column("seed", justify="right")
    table.add_column("simulated time", justify="right")
    table.add_column("flows completed", justify="right")
    table.add_column("FCT p99", justify="right")
    table.add_column("goodput", justify="right")
    for point, results in sweep.finished:
        s = results.summary
        table.add_row(
            *(value_label(point.values[p]) for p in sweep.parameters),
            *([str(point.seed)] if seeded else []),
            _seconds(s.get("sim_time_s")),
            f"{_count(s.get('flows_completed'))} / {_count(s.get('flows'))}",
            _seconds(_us_to_s(s.get("fct_p99_us"))),
            _number(s.get("goodput_gbps"), "Gb/s"),
        )
    return table


def _count(value: Any) -> str:
    return "-" if value is None else f"{value:,}"


def _number(value: Any, unit: str = "") -> str:
    if value is None:
        return "-"
    return f"{value:,.3f} {unit}".rstrip()


def _scaled(value: Any, factor: float) -> float | None:
    return None if value is None else value * factor


def _us_to_s(value: Any) -> float | None:
    return _scaled(value, 1e-6)


def _seconds(value: Any) -> str:
    if value is None:
        return "-"
    if value == 0:
        return "0 s"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if abs(value) >= scale:
            return f"{value / scale:,.3f} {unit}"
    return f"{value / 1e-9:,.3f} ns"


def _by_cause(causes: Any) -> str:
    parts = [f"{cause}: {count:,}" for cause, count in (causes or {}).items() if count]
    return f" ({', '.join(parts)})" if parts else ""
