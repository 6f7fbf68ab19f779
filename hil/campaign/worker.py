"""Long-lived campaign workers: a worker process loads the kernels once and runs case after case in itself.

A lockstep case of the reference firmware needs no process of its own: `hil run` runs in the worker with
the firmware in the same process (`--firmware-in-process`: the same encoders, framings and decoders as
over a link, so the case's log is bit-identical to the one a fresh `hil run` process with the firmware
in its own process writes); so does a case of an in-process controller (`hil simulate --controller`).
hil.cli.campaign_case runs them, handed to the engine by `hil campaign`. Each case builds its emulator afresh (model arrays, drives, sensors, fault
plans, targets) from its own model file; nothing of one case's plant, drives or firmware reaches the
next. Other cases (a firmware command line, realtime or afap modes) still get their own processes
(hil.campaign.runner).

The local engine runs these cases on a pool of `workers` processes (spawned, so each is a clean
interpreter; each is killed when the campaign's process ends, even a killed one). A worker that dies mid-case (a crash of native code, a kill) breaks the pool: the cases
it and the others were running are tried again one by one in a fresh pool of one worker, so the case
that kills its worker is found and recorded as an error while the others give their rows, and the
campaign goes on with a fresh pool. A case that runs past the campaign's timeout_s is stopped by an
alarm in its worker (status "timeout"; where cases run on threads, as on a Dask worker, no alarm can
reach them: they end with their duration).
"""
from __future__ import annotations

import contextlib
import gc
import multiprocessing
import os
import signal
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from hil.runtime.sysguard import exit_with_parent


class CaseTimeout(Exception):
    """The case ran past the campaign's timeout_s."""


def in_process_argv(argv: list[str]) -> list[str]:
    """A case's `hil run` arguments with the reference firmware in the process (no --link, no spawn); a
    `hil simulate` command line as it is."""
    out, skip = [], False
    for word in argv:
        if skip:
            skip = False
        elif word == "--link":
            skip = True
        else:
            out.append("--firmware-in-process" if word == "--spawn-firmware" else word)
    return out


@contextlib.contextmanager
def alarm(timeout_s: float):
    """CaseTimeout raised in the block after timeout_s of wall-clock time (only in a main thread)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(_signum, _frame):
        raise CaseTimeout
    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, timeout_s)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0.0)
        signal.signal(signal.SIGALRM, previous)


class WorkerPool:
    """`workers` long-lived worker processes that run case after case (module docstring); a broken pool is
    replaced by a fresh one. Kept across calls of `rows` (a search runs generation after generation on
    the same workers); close() ends them."""

    def __init__(self, workers: int):
        self.workers = workers
        self._pool = _pool(workers)

    def rows(self, cases: list[dict], common: dict, run_case: Callable[[dict, dict], dict],
             lost: Callable[[dict, str], dict]) -> Iterator[dict]:
        """The rows of `cases` (Case.as_dict()), in order; `lost(case, message)`: the row of a case whose
        worker died running it."""
        todo = list(cases)
        while todo:
            futures = [(self._pool.submit(case_then_collect, run_case, case, common), case) for case in todo]
            unfinished: list[dict] = []
            for future, case in futures:
                row = _row(future)
                if row is None:
                    unfinished.append(case)
                else:
                    yield row
            if not unfinished:
                return
            self._pool.shutdown(wait=True, cancel_futures=True)
            # the pool broke: the cases it was running are the first unfinished ones (a pool hands its workers
            # the calls in order, at most one beyond a call per worker); each runs alone, the rest go on together
            for case in unfinished[:self.workers + 1]:
                with _pool(1) as alone:
                    row = _row(alone.submit(case_then_collect, run_case, case, common))
                yield row if row is not None else lost(case, "its worker process died running it")
            self._pool = _pool(self.workers)
            todo = unfinished[self.workers + 1:]

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


def case_then_collect(run_case: Callable[[dict, dict], dict], case: dict, common: dict) -> dict:
    """A case in a worker (a local one, or a Dask worker's thread), then its garbage. An emulator's objects hold
    reference cycles, which only a full collection frees, and a case allocates too few objects to start one:
    without it a worker's memory climbed from 270 to 1,000 MB over 500 cases. The interpreter's state after
    the first case is frozen (gc.freeze), so each later collection walks only the last case's objects (about
    1 ms instead of 70). Whether it is frozen is this process's flag: gc.get_freeze_count() walks every
    frozen object (12 ms a case)."""
    global _frozen
    row = run_case(case, common)
    gc.collect()
    if not _frozen:
        gc.freeze()
        _frozen = True
    return row


_frozen = False


def _pool(workers: int) -> ProcessPoolExecutor:
    """Spawned workers (each a clean interpreter) that end with this process, however it ends: killed, as
    SIGTERM would only stop the case the worker runs (the loop's handler) and leave it waiting for more."""
    return ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                               initializer=exit_with_parent, initargs=(os.getpid(), signal.SIGKILL))


def _row(future: Future) -> dict | None:
    """The future's row, None if its pool broke."""
    try:
        return future.result()
    except BrokenProcessPool:
        return None
