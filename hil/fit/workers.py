"""The fit's replays spread over local processes: a Jacobian's columns (one replay per column and
training recording) computed side by side.

Each worker is a fork of the fitting process made once the fit's problem is built, so it holds
the recordings, the loaded kernels and the preset already (no start-up cost, nothing to ship). A
request is msgpack {"points": each point's float64 bytes, "active": the channels the residual
takes}, all of a worker's share of a Jacobian in one (its answer, large, is sent when all are done,
so that a full pipe never holds it up); the answer {"f": each residual's float64 bytes} or
{"error": a one-line message}. The residual of
a point is computed by the same code in either process, so a fit's result does not depend on the
number of workers. A worker ends when its pipe closes (the fitting process closed it or died).
"""
from __future__ import annotations

import multiprocessing
import os

import msgpack
import numpy as np

from config_schema import UserError

MAX_JOBS = 64
LOST = "hil fit: a replay worker ended unexpectedly (killed, or out of memory)"


def default_jobs() -> int:
    return max(1, min(os.cpu_count() or 1, MAX_JOBS))


def _serve(problem, conn) -> None:
    problem.budget = None                     # the fitting process keeps the count
    while True:
        try:
            request = msgpack.unpackb(conn.recv_bytes())
        except (EOFError, OSError):
            return
        try:
            problem.active = list(request["active"])
            answer = {"f": [np.ascontiguousarray(problem.raw_residual(np.frombuffer(u, np.float64)), np.float64).tobytes()
                            for u in request["points"]]}
        except Exception as exc:                       # sent back: the fitting process reports it
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        conn.send_bytes(msgpack.packb(answer))


class ReplayWorkers:
    """`jobs` - 1 forked workers beside this process (which computes its own share)."""

    def __init__(self, problem, jobs: int):
        self.problem = problem
        self._conns, self._procs = [], []
        if jobs > 1:
            ctx = multiprocessing.get_context("fork")
            for _ in range(jobs - 1):
                here, there = ctx.Pipe()
                proc = ctx.Process(target=_serve, args=(problem, there), daemon=True, name="hil-fit-worker")
                proc.start()
                there.close()
                self._conns.append(here)
                self._procs.append(proc)

    def residuals(self, points: list[np.ndarray]) -> list[np.ndarray]:
        """The problem's raw residual at each point, the points dealt round-robin to the workers and here."""
        lanes = len(self._conns) + 1
        shares = {w: list(range(w + 1, len(points), lanes)) for w in range(len(self._conns))}
        out: list[np.ndarray | None] = [None] * len(points)
        sent = []
        try:
            for w, share in shares.items():
                if share:
                    self._send(self._conns[w], {"points": [np.asarray(points[k], np.float64).tobytes() for k in share],
                                                "active": self.problem.active})
                    sent.append(w)
            for k in range(0, len(points), lanes):
                out[k] = self.problem.raw_residual(points[k])
        finally:                                   # every answer read, so that the pipes stay in step
            answers = {w: self._answer(self._conns[w]) for w in sent}
        for w, fs in answers.items():
            for k, f in zip(shares[w], fs):
                out[k] = f
        return out

    @staticmethod
    def _send(conn, request: dict) -> None:
        try:
            conn.send_bytes(msgpack.packb(request))
        except OSError:
            raise UserError(LOST) from None

    @staticmethod
    def _answer(conn) -> list[np.ndarray]:
        try:
            answer = msgpack.unpackb(conn.recv_bytes())
        except (EOFError, OSError):
            raise UserError(LOST) from None
        if "error" in answer:
            raise UserError(f"hil fit: a replay worker failed: {answer['error']}")
        return [np.frombuffer(f, np.float64).copy() for f in answer["f"]]

    @property
    def pids(self) -> list[int]:
        """The workers' process ids."""
        return [proc.pid for proc in self._procs]

    def close(self) -> None:
        for conn in self._conns:
            conn.close()
        for proc in self._procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()
                proc.join()
        self._conns, self._procs = [], []

    def __enter__(self) -> "ReplayWorkers":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
