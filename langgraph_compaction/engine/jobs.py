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
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager

#: How many jobs one engine keeps (the oldest are forgotten: their threads finish, nobody applies them).
MAX_JOBS = 256


class Job:
    """One compaction being prepared: the cut it was started with (``meta``), and the work that prepares it."""

    def __init__(
        self,
        key: tuple,
        meta: dict,
        runner: Runner,
        work: Callable[[], dict] | None = None,
        awork: Callable[[], Awaitable[dict]] | None = None,
    ) -> None:
        self.key = key
        self.meta = meta
        self.runner = runner
        self.work = work
        self.awork = awork
        self.future: Future | None = None
        self.task: asyncio.Task | None = None

    def done(self) -> bool:
        """Return True once the job has finished (its outcome is ready)."""
        return self.runner.is_done(self)

    def outcome(self) -> dict:
        """Return the job's record (``status == "ready"``) or ``{"error": ...}``; only once ``done()``."""
        work = self.future or self.task
        try:
            if self.task is not None and self.task.cancelled():
                return {"error": "the task preparing it was cancelled (its event loop ended)"}
            assert work is not None
            return work.result()
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

    def start_sync(self, job: Job, work: Callable[[], dict], awork: Callable[[], Awaitable[dict]]) -> None:
        """Start the job in a thread of the pool."""
        job.future = self._pool.submit(contextvars.Context().run, work)

    def start_async(self, job: Job, work: Callable[[], dict], awork: Callable[[], Awaitable[dict]]) -> None:
        """Start the job as a task of the running event loop."""
        job.task = asyncio.get_running_loop().create_task(awork(), context=contextvars.Context())  # type: ignore[arg-type]

    def wait_sync(self, job: Job, timeout: float | None) -> bool:
        """Wait for a job from a sync front; return whether it is done (an event loop's task cannot be waited for here)."""
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


class BackgroundJobs:
    """The jobs one engine has in progress or finished but not yet harvested, by conversation key."""

    def __init__(self) -> None:
        self._jobs: OrderedDict[tuple, Job] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def runner() -> Runner:
        """Return the runner new jobs start with: the one chosen for this context, else the process's thread pool."""
        return _CHOSEN_RUNNER.get() or _DEFAULT_RUNNER

    def get(self, key: tuple) -> Job | None:
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
