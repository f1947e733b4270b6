"""Many runs at once: in this process, on a local process pool, or on a Ray cluster.

A batch is a list of tasks, each a resolved scenario and the run directory
its results go to. Every finished run is written before the batch moves on
with it, so a batch stopped halfway (Ctrl-C, a failed run, a killed
driver) loses no run that finished; a run it stopped is written marked
`INCOMPLETE`, as a single stopped run is.

- One at a time (`jobs=1`): in this process.
- A local pool (`jobs>1`): spawned processes (the parent's polars and Rust
  threads do not survive a fork), each run allowed its share of the memory
  available now, so that `jobs` runs cannot together exhaust the machine.
  The workers write their run directories themselves.
- Ray (`ray=ADDRESS`, `auto` for the cluster this machine belongs to, or
  `local` to start one here): each run is a task of one CPU on whichever
  node has one. Its node may not share this machine's disk, so the task
  writes into a temporary directory of its own and returns the files, which
  the driver writes into the run directory.

Progress: a worker reports its run's fraction of simulated time (the core
calls back about five times a second) through a queue the driver drains
while it waits; a stop (the first Ctrl-C or SIGTERM) reaches a running run
through a flag it looks at on the same call, so it ends at once with what
it measured. No further run starts after a stop or a failed run.
"""

from __future__ import annotations

import contextlib
import importlib.util
import ipaddress
import multiprocessing
import os
import re
import signal
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, Protocol

from . import _core

__all__ = ["Finished", "Stopped", "Task", "check_backend", "run_batch"]

# How often the driver looks at progress and finished runs, in seconds.
_POLL_S = 0.2


@dataclass(frozen=True)
class Task:
    """One run: its resolved scenario (JSON text), its run directory, what a progress bar calls it, CSV copies."""

    scenario: str
    directory: Path
    label: str
    csv: bool = False


@dataclass(frozen=True)
class Finished:
    """How a task ended: its run directory written (complete or not), or an error and nothing written."""

    complete: bool
    error: Exception | None = None


class Progress(Protocol):
    """What a batch tells while it runs (see `fabricsim.progress.BatchProgress`)."""

    def started(self, index: int, label: str) -> None: ...
    def advanced(self, index: int, fraction: float) -> None: ...
    def finished(self, index: int) -> None: ...


def run_batch(
    tasks: Sequence[Task],
    jobs: int = 1,
    ray: str | None = None,
    on_finished: Callable[[int, Finished], None] | None = None,
    progress: Progress | None = None,
) -> bool:
    """Runs the tasks, `jobs` at a time or on Ray; `on_finished(index, how)` as each ends, in the driver.

    Returns whether it ran them all: False when a failed run ended it
    early (the tasks not started then are not reported). The first SIGINT
    or SIGTERM stops it: the running runs stop, are written, and `Stopped`
    is raised; a second abandons them at once.
    """
    check_backend(jobs, ray)
    notify = on_finished or (lambda index, how: None)
    with _stop_on_signals() as stop, _ray_session(ray) as cluster:
        # Parents first, once a cluster to run on is joined: two runs creating one at once would race.
        for parent in dict.fromkeys(task.directory.parent for task in tasks):
            parent.mkdir(parents=True, exist_ok=True)
        if cluster is not None:
            ran_all = _on_backend(tasks, _Ray(cluster, progress is not None), notify, progress, stop)
        elif jobs == 1 or len(tasks) <= 1:
            ran_all = _in_process(tasks, notify, progress, stop)
        else:
            # No more workers than runs: each idle one would only shrink the others' share of memory.
            ran_all = _on_pool(tasks, min(jobs, len(tasks)), notify, progress, stop)
    if stop.is_set():
        raise Stopped(stop.signum)
    return ran_all


def check_backend(jobs: int, ray: str | None) -> None:
    """Refuses `jobs` and a Ray address that cannot be, before anything is written."""
    if jobs < 1:
        raise _core.ScenarioError(f"--jobs: {jobs}: at least one run at a time")
    if ray is not None and not ray.strip():
        raise _core.ScenarioError("--ray: expected an ADDRESS (host:port), `auto` or `local`, found nothing")
    if ray is not None and importlib.util.find_spec("ray") is None:
        raise _core.ScenarioError(f"--ray: {ray}: Ray is not installed; install it with `pip install fabricsim[ray]`")
    if ray is not None and ray not in ("auto", "local"):
        problem = _address_problem(ray)
        if problem:
            raise _core.ScenarioError(f"--ray: {ray!r}: {problem}; expected host:port, `auto` or `local`")
        # Ray retries for minutes an address nobody answers at, or that answers in another protocol, logging as it
        # goes; refused here, before any output directory exists.
        problem = _not_ray(ray)
        if problem:
            raise _core.ScenarioError(f"--ray: {problem}")


_LABEL = r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOSTNAME = re.compile(rf"^(?=.{{1,253}}$){_LABEL}(\.{_LABEL})*$")


def _address_problem(address: str) -> str | None:
    """Why `address` cannot name a Ray cluster (`[ray://]host:port`), or None; Ray itself retries for minutes."""
    rest = address.removeprefix("ray://")
    host, colon, port = rest.rpartition(":")
    if not colon or not host:
        return "no port"
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        return f"port {port!r} is not 1-65535"
    host = host.removeprefix("[").removesuffix("]")
    if re.fullmatch(r"[0-9.]+", host) or ":" in host:
        try:
            ipaddress.ip_address(host)
        except ValueError:
            return f"{host!r} is not an IP address"
    elif not _HOSTNAME.match(host):
        return f"{host!r} is not a host name"
    return None


# How long a Ray address may take to accept a TCP connection, and then to answer, before it counts as unreachable.
RAY_CONNECT_TIMEOUT_S = 5.0

# What opens an HTTP/2 connection (RFC 9113 s3.4): the client's preface, then its SETTINGS frame, here empty (a 9-byte
# frame header: length 0, type 0x4, no flags, stream 0). A Ray head's GCS and its Ray Client server are gRPC servers,
# which answer with a SETTINGS frame of their own.
_HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 0x4, 0, 0, 0, 0, 0])
_HTTP2_FRAME_HEADER = 9
_HTTP2_SETTINGS = 0x4


def _not_ray(address: str, timeout: float = RAY_CONNECT_TIMEOUT_S) -> str | None:
    """Why `address` (`[ray://]host:port`, already checked) is not a Ray cluster's, or None.

    Asked as gRPC is: a connection, HTTP/2's preface, and the server's
    SETTINGS frame back, all within `timeout`. A cluster that speaks TLS
    (Ray's `RAY_USE_TLS`) is only asked for the connection. No Ray call is
    made; Ray itself would retry such an address for minutes.
    """
    host, _, port = address.removeprefix("ray://").rpartition(":")
    deadline = time.monotonic() + timeout
    try:
        conn = socket.create_connection((host.removeprefix("[").removesuffix("]"), int(port)), timeout=timeout)
    except OSError as exc:  # refused, timed out, a name that does not resolve
        return f"cannot reach {address} ({exc.strerror or str(exc) or type(exc).__name__})"
    if os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true"):
        conn.close()
        return None
    with conn:
        reply, closed = _opening_frame(conn, deadline)
    if _is_settings_frame(reply):
        return None
    if reply:
        said = f"it sent {reply[:32]!r}"
    else:
        said = "it closed the connection" if closed else f"it sent nothing back within {timeout:g} s"
    return f"{address} answers, but not as a Ray cluster: {said}, where a Ray head (gRPC) opens with HTTP/2 SETTINGS"


def _opening_frame(conn: socket.socket, deadline: float) -> tuple[bytes, bool]:
    """What a server sends first after HTTP/2's preface, at least a frame header unless it closes or falls silent
    by `deadline`; and whether it closed (or reset) the connection."""
    reply = b""
    try:
        conn.sendall(_HTTP2_PREFACE)
        while len(reply) < _HTTP2_FRAME_HEADER:
            conn.settimeout(max(deadline - time.monotonic(), 0.001))
            chunk = conn.recv(64)
            if not chunk:
                return reply, True
            reply += chunk
    except TimeoutError:
        return reply, False
    except OSError:  # reset: what came before says what it is
        return reply, True
    return reply, False


def _is_settings_frame(reply: bytes) -> bool:
    """Whether `reply` opens with an HTTP/2 SETTINGS frame header (RFC 9113 s6.5): a length of whole 6-byte settings,
    type 0x4, no flags but ACK, stream 0."""
    if len(reply) < _HTTP2_FRAME_HEADER:
        return False
    length = int.from_bytes(reply[0:3], "big")
    stream = int.from_bytes(reply[5:9], "big") & 0x7FFF_FFFF
    return reply[3] == _HTTP2_SETTINGS and length % 6 == 0 and reply[4] in (0, 1) and stream == 0


def _run(
    scenario: str, directory: str | None, csv: bool, memory: int | None, report: Callable[[float], None]
) -> dict[str, Any]:
    """Runs one scenario and writes its run directory, or returns its files when `directory` is None.

    What travels back is plain data: the core's errors do not pickle (their
    class lives in the extension module), so they go as their kind and text.
    """
    from .results import Results

    try:
        results = Results(_core.run(scenario, report, memory))
    except (_core.ScenarioError, _core.SimulationError) as e:
        return {"error": (type(e).__name__, str(e))}
    if directory is not None:
        results.write(directory, overwrite=True, csv=csv)
        return {"complete": results.complete}
    with tempfile.TemporaryDirectory(prefix="fabricsim-run-") as scratch:
        written = results.write(Path(scratch) / "run", csv=csv)
        files = {p.name: p.read_bytes() for p in sorted(written.iterdir()) if p.is_file()}
    return {"complete": results.complete, "files": files}


def _outcome(reply: dict[str, Any], task: Task) -> Finished:
    if "error" in reply:
        kind, text = reply["error"]
        error = (_core.ScenarioError if kind == "ScenarioError" else _core.SimulationError)(f"{task.label}: {text}")
        return Finished(False, error)
    if "files" in reply:
        _write_files(task.directory, reply["files"])
    return Finished(bool(reply["complete"]))


def _write_files(directory: Path, files: dict[str, bytes]) -> None:
    """Writes a run directory a remote task returned: marked incomplete until every file is in place."""
    from .results import INCOMPLETE_MARKER, write_atomic, write_failures

    with write_failures(directory):
        directory.mkdir(parents=True, exist_ok=True)
        marker = directory / INCOMPLETE_MARKER
        write_atomic(marker, lambda f: f.write(b"this run directory is incomplete\n"))
        for name, data in files.items():
            if name != INCOMPLETE_MARKER:
                write_atomic(directory / name, lambda f, data=data: f.write(data))
        if INCOMPLETE_MARKER not in files:
            marker.unlink()


# --- in this process -------------------------------------------------------------------------------------------


def _in_process(
    tasks: Sequence[Task], notify: Callable[[int, Finished], None], progress: Progress | None, stop: _Stop
) -> bool:
    for index, task in enumerate(tasks):
        if stop.is_set():
            return False
        if progress is not None:
            progress.started(index, task.label)
        report = _reporter(stop, lambda fraction, i=index: progress.advanced(i, fraction) if progress else None)
        outcome = _outcome(_run(task.scenario, str(task.directory), task.csv, None, report), task)
        if progress is not None:
            progress.finished(index)
        notify(index, outcome)
        if outcome.error is not None:
            return False
    return not stop.is_set()


def _reporter(stop: Any, report: Callable[[float], None]) -> Callable[[float], None]:
    """The core's progress callback of one run: stops it when the batch stops, else reports how far it is."""

    def call(fraction: float) -> None:
        if stop.is_set():
            # The core stops the run and returns what it measured.
            raise KeyboardInterrupt
        report(fraction)

    return call


# --- a local pool or Ray: one loop, two backends --------------------------------------------------------------


class _Backend(Protocol):
    """Where runs go: `slots` at once; `submit` starts one, `wait` returns those done, `reply` what one returned."""

    slots: int

    def submit(self, index: int, task: Task) -> Any: ...
    def wait(self, handles: list[Any], timeout: float) -> list[Any]: ...
    def reply(self, handle: Any) -> dict[str, Any]: ...
    def stop(self) -> None: ...
    def progress(self) -> list[tuple[int, float]]: ...


def _on_backend(
    tasks: Sequence[Task],
    backend: _Backend,
    notify: Callable[[int, Finished], None],
    progress: Progress | None,
    stop: _Stop,
) -> bool:
    pending = list(enumerate(tasks))
    running: dict[Any, int] = {}
    failed = False
    while pending or running:
        # Never more runs handed out than can run, so that a stop leaves none queued behind them.
        while pending and len(running) < backend.slots and not (failed or stop.is_set()):
            index, task = pending.pop(0)
            running[backend.submit(index, task)] = index
            if progress is not None:
                progress.started(index, task.label)
        if not running:
            break
        done = backend.wait(list(running), _POLL_S)
        if stop.is_set():
            backend.stop()
        if progress is not None:
            for index, fraction in backend.progress():
                progress.advanced(index, fraction)
        for handle in done:
            index = running.pop(handle)
            outcome = _outcome(backend.reply(handle), tasks[index])
            if progress is not None:
                progress.finished(index)
            notify(index, outcome)
            failed = failed or outcome.error is not None
    return not (failed or stop.is_set() or pending)


# A pool worker's ends of the driver's progress queue and stop flag, handed over when it starts (they
# cross to a process only by inheritance, not as a task's arguments).
_worker_queue: Any = None
_worker_stop: Any = None


def _pool_worker_init(queue: Any, stop: Any) -> None:
    global _worker_queue, _worker_stop
    _worker_queue, _worker_stop = queue, stop
    # Ctrl-C reaches the whole process group; the driver decides, and tells a run to stop through the flag.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def _pool_task(scenario: str, directory: str, csv: bool, memory: int | None, index: int) -> dict[str, Any]:
    def put(fraction: float) -> None:
        if _worker_queue is not None:
            _worker_queue.put((index, fraction))

    return _run(scenario, directory, csv, memory, _reporter(_worker_stop, put))


class _Pool:
    """Spawned local processes; each run may take its share of the memory available when the batch began."""

    def __init__(self, pool: ProcessPoolExecutor, queue: Any, stop: Any, jobs: int) -> None:
        available = _core.available_memory()
        self.slots = jobs
        self._pool = pool
        self._memory = available // jobs if available is not None else None
        self._queue = queue
        self._stop = stop

    def submit(self, index: int, task: Task) -> Future[dict[str, Any]]:
        return self._pool.submit(_pool_task, task.scenario, str(task.directory), task.csv, self._memory, index)

    def wait(self, handles: list[Any], timeout: float) -> list[Any]:
        return list(wait(handles, timeout=timeout, return_when=FIRST_COMPLETED).done)

    def reply(self, handle: Future[dict[str, Any]]) -> dict[str, Any]:
        try:
            return handle.result()
        except BrokenProcessPool:
            return {"error": ("SimulationError", "its process was killed (by the system: out of memory?)")}

    def stop(self) -> None:
        self._stop.set()

    def progress(self) -> list[tuple[int, float]]:
        return _drain(self._queue)


def _on_pool(
    tasks: Sequence[Task],
    jobs: int,
    notify: Callable[[int, Finished], None],
    progress: Progress | None,
    stop: _Stop,
) -> bool:
    # Spawned, not forked: the driver's polars and Rust threads do not survive a fork.
    context = multiprocessing.get_context("spawn")
    queue = context.Queue() if progress is not None else None
    flag = context.Event()
    with ProcessPoolExecutor(jobs, context, _pool_worker_init, (queue, flag)) as pool:
        return _on_backend(tasks, _Pool(pool, queue, flag, jobs), notify, progress, stop)


def _drain(queue: Any) -> list[tuple[int, float]]:
    reports: list[tuple[int, float]] = []
    if queue is None:
        return reports
    with contextlib.suppress(Exception):
        while not queue.empty():
            reports.append(queue.get_nowait())
    return reports


def _ray_task(scenario: str, csv: bool, index: int, queue: Any, stop: Any) -> dict[str, Any]:
    import ray

    def put(fraction: float) -> None:
        if queue is not None:
            queue.put_nowait((index, fraction))

    class Flag:
        """The driver's stop flag, an actor, as a task sees it: asked once per progress call."""

        def is_set(self) -> bool:
            return bool(ray.get(stop.is_set.remote()))

    return _run(scenario, None, csv, None, _reporter(Flag(), put))


class _Ray:
    """Tasks of one CPU on a Ray cluster, as many at once as it has CPUs; files come back to the driver."""

    def __init__(self, ray: Any, with_progress: bool) -> None:
        from ray.util.queue import Queue

        class StopFlag:
            def __init__(self) -> None:
                self.stopped = False

            def set(self) -> None:
                self.stopped = True

            def is_set(self) -> bool:
                return self.stopped

        self._ray = ray
        self.slots = max(1, int(ray.cluster_resources().get("CPU", 1)))
        self._queue = Queue() if with_progress else None
        self._flag = ray.remote(num_cpus=0)(StopFlag).remote()
        self._task = ray.remote(num_cpus=1)(_ray_task)

    def submit(self, index: int, task: Task) -> Any:
        return self._task.remote(task.scenario, task.csv, index, self._queue, self._flag)

    def wait(self, handles: list[Any], timeout: float) -> list[Any]:
        done, _ = self._ray.wait(handles, num_returns=1, timeout=timeout)
        return list(done)

    def reply(self, handle: Any) -> dict[str, Any]:
        return dict(self._ray.get(handle))

    def stop(self) -> None:
        self._flag.set.remote()

    def progress(self) -> list[tuple[int, float]]:
        return _drain(self._queue)


@contextlib.contextmanager
def _ray_session(address: str | None) -> Iterator[Any]:
    """The `ray` module joined to the cluster at `address` (None: no Ray, and None given), left when done."""
    if address is None:
        yield None
        return
    try:
        import ray
    except ImportError:
        raise _core.ScenarioError(
            f"--ray: {address}: Ray is not installed; install it with `pip install fabricsim[ray]`"
        ) from None
    started_here = not ray.is_initialized()
    if started_here:
        where = None if address == "local" else address
        try:
            ray.init(address=where, include_dashboard=False, log_to_driver=False, logging_level="error")
        except (ConnectionError, ValueError, RuntimeError) as e:
            raise _core.ScenarioError(f"--ray: {address}: cannot reach a Ray cluster there: {e}") from None
    try:
        yield ray
    finally:
        if started_here:
            ray.shutdown()


# --- stopping --------------------------------------------------------------------------------------------------


class Stopped(KeyboardInterrupt):
    """A batch ended early by SIGINT or SIGTERM (`signum`), after every run that had started was written."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class _Stop(threading.Event):
    """Set by the first stop signal, which it names."""

    signum = 0


@contextlib.contextmanager
def _stop_on_signals() -> Iterator[_Stop]:
    """A flag the first SIGINT or SIGTERM sets; the second raises KeyboardInterrupt. Handlers restored after.

    Off the main thread (a notebook's worker thread, say) signals cannot be
    caught there, and only a failed run ends a batch early.
    """
    stop = _Stop()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    def handle(signum: int, frame: FrameType | None) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.signum = signum
        stop.set()

    previous = {s: signal.signal(s, handle) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
