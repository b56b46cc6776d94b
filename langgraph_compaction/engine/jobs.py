"""Background jobs: a summary prepared in a thread or an asyncio task next to the agent, and the registry of them.

``BackgroundJobs`` is owned by the engine: it keeps this process's jobs by
conversation (at most ``MAX_JOBS``) and starts them with a ``Runner``. The
runner decides how a job runs: the real one uses a thread pool for a sync
front and a task of the running loop for an async one; a test or a benchmark
runs jobs with a runner of its own (``use_runner``) to decide what the gate
sees next, rather than to time it.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import socket
import threading
import time
import uuid
import weakref
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

#: How many jobs one engine keeps (the oldest are forgotten: their threads finish, nobody applies them).
MAX_JOBS = 256


def _this_process() -> str:
    """Return how a lease names this process: its host, its process id and a random token of its own."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


#: This process, as a lease names the worker preparing a conversation's summary. The token tells it from a process
#: that had the same host name and process id before it: a container restarted in place, its worker PID 1 again.
WORKER = _this_process()


def _after_fork() -> None:
    global WORKER
    WORKER = _this_process()


os.register_at_fork(after_in_child=_after_fork)
#: The status a job publishes while it makes a failed call again (``prepare.retrying``); its record replaces it.
RETRYING = "retrying"
#: How often a worker looks for a summary another worker is preparing, while it waits for it.
POLL_SECONDS = 0.05


class Job:
    """One compaction being prepared: the cut it was started with (``meta``), and the work that prepares it."""

    def __init__(
        self,
        key: tuple[str, str | None],
        meta: dict[str, Any],
        runner: Runner,
        work: Callable[[], dict[str, Any]] | None = None,
        awork: Callable[[], Awaitable[dict[str, Any]]] | None = None,
    ) -> None:
        self.key = key
        self.meta = meta
        self.runner = runner
        self.work = work
        self.awork = awork
        self.future: Future[Any] | None = None
        self.task: asyncio.Task[Any] | None = None
        #: Gate calls of its conversation while it was being prepared (how many turns a job takes, learned).
        self.calls = 0
        #: The models (``id``) whose failed calls the job made again, once per retry (its driver's ``retried``);
        #: for another worker's job, ``[0]`` once it published that it makes one again.
        self.retried: list[int] = []
        #: Started again after a job failed in passing (or was lost with its worker): a retry, not waited for while
        #: the request fits, as a retrying job is not.
        self.again = False

    def done(self) -> bool:
        """Return True once the job has finished (its outcome is ready)."""
        return self.runner.is_done(self)

    def outcome(self) -> dict[str, Any]:
        """Return the job's record (``status == "ready"``) or ``{"error": ...}``; only once ``done()``."""
        work = self.future or self.task
        try:
            if self.task is not None and self.task.cancelled():
                return {"error": "the task preparing it was cancelled (its event loop ended)"}
            assert work is not None
            record: dict[str, Any] = work.result()
            return record
        except Exception as exc:  # noqa: BLE001 - a failed job is a discarded summary, never a failed agent
            return {"error": f"{type(exc).__name__}: {exc}"[:500]}


class Runner:
    """Starts jobs in threads (sync fronts) or asyncio tasks (async fronts) and waits for them.

    A job runs in a fresh context: its events go to the log, not to the
    stream of the run that started it (that run may be over); the gate that
    applies it streams what happened.
    """

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="compaction-background")

    def is_done(self, job: Job) -> bool:
        """Return True when the job's thread or task has finished."""
        work = job.future or job.task
        return work is not None and work.done()

    def start_sync(
        self, job: Job, work: Callable[[], dict[str, Any]], awork: Callable[[], Awaitable[dict[str, Any]]]
    ) -> None:
        """Start the job in a thread of the pool."""
        job.future = self._pool.submit(contextvars.Context().run, work)

    def start_async(
        self, job: Job, work: Callable[[], dict[str, Any]], awork: Callable[[], Awaitable[dict[str, Any]]]
    ) -> None:
        """Start the job as a task of the running event loop."""
        job.task = asyncio.get_running_loop().create_task(awork(), context=contextvars.Context())  # type: ignore[arg-type]

    def wait_sync(self, job: Job, timeout: float | None) -> bool:
        """Wait for a job from a sync front; return whether it is done (an event loop's task cannot be awaited here)."""
        if job.future is not None:
            try:
                job.future.result(timeout)
            except Exception:  # noqa: BLE001 - a timeout or the job's own failure: outcome() says which
                pass
        return job.done()

    async def wait_async(self, job: Job, timeout: float | None) -> bool:
        """Wait for a job from an async front; return whether it is done."""
        try:
            if job.future is not None:
                await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(job.future)), timeout)
            elif job.task is not None and job.task.get_loop() is asyncio.get_running_loop():
                await asyncio.wait_for(asyncio.shield(job.task), timeout)
        except Exception:  # noqa: BLE001 - a timeout or the job's own failure: outcome() says which
            pass
        return job.done()


class InstantRunner(Runner):
    """Runs each job to its end when it starts, in the starting thread (in a fresh context, as ``Runner`` does).

    A deterministic stand-in for a job that is ready by the next model call:
    for tests and replays (``with use_runner(InstantRunner()): ...``).
    """

    def start_sync(
        self, job: Job, work: Callable[[], dict[str, Any]], awork: Callable[[], Awaitable[dict[str, Any]]]
    ) -> None:
        """Run the job now; its outcome (or failure) is ready at once."""
        future: Future[Any] = Future()
        try:
            future.set_result(contextvars.Context().run(work))
        except Exception as exc:  # noqa: BLE001 - the job's own failure, for outcome() to report
            future.set_exception(exc)
        job.future = future

    start_async = start_sync  # an async front's job too: what the gate sees next is decided, not timed


class Published(Runner):
    """Waits for a summary another worker prepares: it reads the storage where that worker publishes it.

    The job's ``meta`` names the lease (its ``id``); the job is done when a
    record of that id is published (its outcome) or the wait runs out. A read
    that fails (the storage restarting) is one look missed, not the end of
    the wait: failing the gate would leave the lease in place, and the next
    gate call would wait for it again.
    """

    def __init__(self, storage: object, thread_id: str, key: str) -> None:
        self.storage, self.thread_id, self.key = storage, thread_id, key

    def _found(self, job: Job, record: object) -> bool:
        if isinstance(record, dict) and record.get("id") == job.meta.get("id"):
            if record.get("status") == RETRYING:  # not done: its worker makes a failed call again
                job.retried[:] = job.retried or [0]
                return False
            job.future = Future()
            job.future.set_result(record)
        return job.future is not None

    def _read(self) -> object:
        try:
            return self.storage.read_prepared(self.thread_id, self.key)  # type: ignore[attr-defined]
        except Exception:  # noqa: BLE001 - the storage restarting: look again at the next poll
            return None

    async def _aread(self) -> object:
        try:
            return await self.storage.aread_prepared(self.thread_id, self.key)  # type: ignore[attr-defined]
        except Exception:  # noqa: BLE001 - the storage restarting: look again at the next poll
            return None

    def wait_sync(self, job: Job, timeout: float | None) -> bool:
        deadline = time.monotonic() + (timeout if timeout is not None else 0.0)
        while not self._found(job, self._read()):
            if time.monotonic() >= deadline:
                return False
            time.sleep(POLL_SECONDS)
        return True

    async def wait_async(self, job: Job, timeout: float | None) -> bool:
        deadline = time.monotonic() + (timeout if timeout is not None else 0.0)
        while not self._found(job, await self._aread()):
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(POLL_SECONDS)
        return True


def owner_gone(owner: str) -> bool:
    """Return True when a lease's worker is known to be gone: a process of this host that no longer runs.

    A lease naming this process's host and id with another token was written
    by the process this one replaced (a restart in place). Another host's
    worker is never known gone: its lease lapses when it expires.
    """
    host, pid, token = (owner.split(":") + ["", ""])[:3]
    if host != socket.gethostname() or not pid.isdigit():
        return False
    if int(pid) == os.getpid():
        return token != WORKER.split(":")[2]
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:  # it runs, as another user's process
        return False
    return False


_DEFAULT_RUNNER = Runner()
#: The runner of this context, when a test or a benchmark chose one (``use_runner``).
_CHOSEN_RUNNER: contextvars.ContextVar[Runner | None] = contextvars.ContextVar("compaction_runner", default=None)


@contextmanager
def use_runner(runner: Runner) -> Iterator[Runner]:
    """Start the background jobs of this context with ``runner`` inside the block (a benchmark's clock, a test's)."""
    token = _CHOSEN_RUNNER.set(runner)
    try:
        yield runner
    finally:
        _CHOSEN_RUNNER.reset(token)


#: Every registry of the process, so the jobs of all of them can be waited for (``fronts.controls``).
_REGISTRIES: weakref.WeakSet[BackgroundJobs] = weakref.WeakSet()
_REGISTRIES_LOCK = threading.Lock()


def every_registry() -> list[BackgroundJobs]:
    """Return every ``BackgroundJobs`` of this process still in use."""
    with _REGISTRIES_LOCK:
        return list(_REGISTRIES)


class BackgroundJobs:
    """The jobs one engine has in progress or finished but not yet harvested, by conversation key."""

    def __init__(self) -> None:
        with _REGISTRIES_LOCK:
            _REGISTRIES.add(self)
        self._jobs: OrderedDict[tuple[str, str | None], Job] = OrderedDict()
        self._lock = threading.Lock()
        #: How many turns a job took to be ready, lately (a moving average; one until a job has been seen).
        self.turns_to_ready = 1.0
        #: Names these jobs' worker in a lease: this process, and this engine in it.
        self.owner = f"{WORKER}:{uuid.uuid4().hex[:8]}"

    def observe(self, job: Job) -> None:
        """Learn from a finished job how many turns a job takes to be ready."""
        self.turns_to_ready = 0.5 * self.turns_to_ready + 0.5 * max(1, job.calls)

    @staticmethod
    def runner() -> Runner:
        """Return the runner new jobs start with: the one chosen for this context, else the process's thread pool."""
        return _CHOSEN_RUNNER.get() or _DEFAULT_RUNNER

    def get(self, key: tuple[str, str | None]) -> Job | None:
        """Return the job of a conversation, or None."""
        with self._lock:
            return self._jobs.get(key)

    def add(self, job: Job) -> None:
        """Keep a new job, replacing the conversation's earlier one (the oldest beyond ``MAX_JOBS`` are forgotten)."""
        with self._lock:
            self._jobs.pop(job.key, None)
            self._jobs[job.key] = job
            while len(self._jobs) > MAX_JOBS:
                self._jobs.popitem(last=False)

    def running(self, thread_id: str | None = None) -> list[Job]:
        """Return the jobs this process runs that have not finished, of one thread (its transcript key) or all.

        A wait for a summary another worker prepares (``Published``) is not one of them.
        """
        with self._lock:
            jobs = list(self._jobs.values())
        mine = [j for j in jobs if not isinstance(j.runner, Published)]
        return [j for j in mine if (thread_id is None or j.key[0] == thread_id) and not j.done()]

    def drop(self, job: Job) -> None:
        """Forget a job (harvested, discarded or failed to start)."""
        with self._lock:
            if self._jobs.get(job.key) is job:
                del self._jobs[job.key]

    def forget(self) -> None:
        """Forget every job (as a restart would); their threads finish unheard."""
        with self._lock:
            self._jobs.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._jobs)
