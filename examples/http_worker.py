#!/usr/bin/env python3
"""A redcron worker over HTTP, in Python's standard library only.

It speaks the HTTP worker API of ``redcron dashboard`` (docs/http-worker.md):
lease attempts, run them, heartbeat every third of their lease while they
run, report each one complete or failed.  It needs neither redcron nor Redis
on its machine: copy this file anywhere Python 3.11 runs.  It runs

- **command** tasks (``kind: command``): the argv, in a clean environment
  (``PATH``, ``HOME``, ``LANG`` and the task's ``env``: never this worker's
  token), killed at the task's ``timeout_s``; the exit code is reported;
- **container** tasks, through ``docker run`` (``--runtime podman``...);
- **Python** tasks (``kind: python``) whose name is in :data:`HANDLERS`,
  plain functions of the task's JSON ``args`` and ``kwargs``: another
  codebase's implementation of a task that a redcron App enqueues by name.

A task the server revokes (cancelled) or whose lease is lost is stopped and
not reported.  A failure is reported retryable (an exception, a non-zero
exit, a timeout) unless retrying cannot help (no handler, a program that does
not exist); the retry's timer is promoted by the maintenance that
``redcron beat`` or a Python worker runs, so a deployment of HTTP workers
alone still runs a beat (``make run`` does).  Run it against ``make run``::

    redcron workers token create --queues default,commands    # prints "token: <token>" last
    export REDCRON_TOKEN=<that token>
    python examples/http_worker.py --queues default,commands

The token comes from the environment only (never argv, which ``ps`` shows).
Nothing answering is one line on stderr and exit status 1.  ``--exit-when-idle``
stops after a lease call that found nothing (tests, batch jobs).
``tests/integration/test_http_worker_example.py`` runs it against a live
``redcron dashboard`` and Redis.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("http_worker")

#: what the task's process gets of this worker's environment
PASSED_ENV = ("PATH", "HOME", "LANG")
#: seconds a lease call waits for work to arrive (server side long-poll)
WAIT_S = 2.0


class Unreachable(Exception):
    """Nothing answers at the API URL."""


class Refused(Exception):
    """The server answered with an error (its message is the text)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


def render_report(day: str, rows: int = 0) -> dict[str, Any]:
    """An example handler: a task ``report.render`` enqueued by a redcron App."""
    return {"day": day, "rows": rows, "pages": max(1, rows // 50)}


def refuse_report(day: str) -> None:
    raise ValueError(f"no data for {day}")


#: the Python tasks this worker implements: task name -> function(*args, **kwargs)
HANDLERS: dict[str, Callable[..., Any]] = {
    "report.render": render_report,
    "report.refuse": refuse_report,
}


class Api:
    """POST JSON to ``<base>/v1/worker/<path>`` with the bearer token."""

    def __init__(self, base: str, token: str) -> None:
        self.base = base.rstrip("/") + "/v1/worker/"
        self.token = token

    def post(self, path: str, body: dict[str, Any], timeout: float = 60.0) -> Any:
        request = urllib.request.Request(
            self.base + path,
            data=json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as resp:
                return json.load(resp)
        except urllib.error.HTTPError as exc:
            try:
                message = json.load(exc)["error"]["message"]
            except (ValueError, KeyError, TypeError):
                message = exc.reason
            raise Refused(exc.code, str(message)) from None
        except (urllib.error.URLError, ConnectionError, TimeoutError) as exc:
            raise Unreachable(f"nothing answers at {self.base} ({exc})") from None


@dataclass
class Running:
    """One leased attempt being run."""

    item: dict[str, Any]
    #: set by the heartbeat when the server says stop (revoked or lost)
    stop: threading.Event = field(default_factory=threading.Event)
    #: the command's process, to kill on stop
    proc: subprocess.Popen[bytes] | None = None

    @property
    def lease_id(self) -> str:
        return str(self.item["lease_id"])


@dataclass
class Report:
    """How an attempt ended: a result, or an error with its exit code."""

    ok: bool
    result: Any = None
    error: str = ""
    retryable: bool = True
    exit_code: int | None = None


def container_argv(runtime: str, spec: dict[str, Any]) -> list[str]:
    argv = [runtime, "run", "--rm"]
    if spec.get("cpu"):
        argv += ["--cpus", str(spec["cpu"])]
    if spec.get("mem"):
        argv += ["--memory", str(spec["mem"])]
    for key, value in sorted((spec.get("env") or {}).items()):
        argv += ["-e", f"{key}={value}"]
    return [*argv, str(spec["image"]), *(spec.get("command") or [])]


def run_process(task: Running, argv: list[str], env: dict[str, str], cwd: str | None) -> Report:
    clean = {k: os.environ[k] for k in PASSED_ENV if k in os.environ}
    timeout = task.item.get("timeout_s")
    try:
        task.proc = proc = subprocess.Popen(
            argv,
            env={**clean, **env},
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: killed whole
        )
    except OSError as exc:
        return Report(ok=False, error=f"cannot start {argv[0]!r}: {exc}", retryable=False)
    deadline = None if timeout is None else time.monotonic() + float(timeout)
    while True:
        try:  # read as it runs (a full pipe would block it), checking for stop
            raw, _ = proc.communicate(timeout=0.2)
            break
        except subprocess.TimeoutExpired:
            if task.stop.is_set() or (deadline is not None and time.monotonic() > deadline):
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
                if task.stop.is_set():
                    return Report(ok=False, error="stopped")
                return Report(ok=False, error=f"killed after timeout of {timeout}s")
    out = raw.decode(errors="replace")
    sys.stdout.write(out)  # a real worker would ship it to its own log store
    if proc.returncode == 0:
        return Report(ok=True, result={"exit_code": 0, "output": out[-1000:]})
    code = proc.returncode
    return Report(ok=False, error=f"command exited with code {code}", exit_code=code)


def run_task(task: Running, runtime: str) -> Report:
    item = task.item
    kind = item["kind"]
    if kind == "command":
        return run_process(task, list(item["command"]), item.get("env") or {}, item.get("cwd"))
    if kind == "container":
        return run_process(task, container_argv(runtime, item["container"]), {}, None)
    handler = HANDLERS.get(item.get("name", ""))
    if handler is None:
        # permanent: retrying on this worker cannot help
        known = ", ".join(sorted(HANDLERS))
        return Report(
            ok=False, error=f"no handler for {item.get('name')!r} (known: {known})", retryable=False
        )
    try:
        return Report(ok=True, result=handler(*item.get("args", []), **item.get("kwargs", {})))
    except Exception as exc:
        return Report(ok=False, error=f"{type(exc).__name__}: {exc}")


class Worker:
    """Lease up to ``slots`` attempts at a time, each run on its own thread."""

    def __init__(self, api: Api, worker_id: str, queues: list[str], slots: int, runtime: str):
        self.api, self.worker_id, self.queues = api, worker_id, queues
        self.slots, self.runtime = slots, runtime
        self.running: dict[str, Running] = {}
        self.lock = threading.Lock()
        self.done = threading.Event()

    def lease(self) -> list[dict[str, Any]]:
        free = self.slots - len(self.running)
        while True:
            try:
                items: list[dict[str, Any]] = self.api.post(
                    "lease",
                    {
                        "worker_id": self.worker_id,
                        "queues": self.queues,
                        "capacity": {"slots": free},
                        "wait_s": WAIT_S,
                    },
                )
                return items
            except Refused as exc:
                if exc.status != 503:  # 503: Redis is down or failing over
                    raise
                time.sleep(1)

    def heartbeat_loop(self) -> None:
        while not self.done.is_set():
            with self.lock:
                tasks = list(self.running.values())
            ttl = min((float(t.item["ttl_s"]) for t in tasks), default=3.0)
            if tasks:
                try:
                    states = self.api.post(
                        "heartbeat",
                        {"worker_id": self.worker_id, "lease_ids": [t.lease_id for t in tasks]},
                    )
                except (Refused, Unreachable) as exc:
                    log.warning("heartbeat failed: %s", exc)
                    states = {}
                for t in tasks:
                    if states.get(t.lease_id, "ok") != "ok":  # revoked or lost: stop it
                        t.stop.set()
            self.done.wait(max(0.2, ttl / 3))

    def run_one(self, task: Running) -> None:
        try:
            report = run_task(task, self.runtime)
            if task.stop.is_set():  # cancelled, or someone else's now: report nothing
                log.info("task %s stopped: its lease was revoked or lost", task.item["task_id"])
                return
            try:
                if report.ok:
                    answer = self.api.post(
                        "complete", {"lease_id": task.lease_id, "result": report.result}
                    )
                else:
                    body: dict[str, Any] = {
                        "lease_id": task.lease_id,
                        "error": report.error,
                        "retryable": report.retryable,
                    }
                    if report.exit_code is not None:
                        body["exit_code"] = report.exit_code
                    answer = self.api.post("fail", body)
                item = task.item
                log.info(
                    "task %s %s (tenant %s, queue %s) attempt %s/%s %s -> %s",
                    item.get("name") or item["kind"],
                    item["task_id"],
                    item["tenant"],
                    item["queue"],
                    item["attempt"],
                    item["max_attempts"],
                    "succeeded" if report.ok else f"failed: {report.error}",
                    answer["state"],
                )
            except Refused as exc:
                if exc.status != 409:  # 409 lease_lost: the attempt is over, drop it
                    raise
        finally:
            with self.lock:
                self.running.pop(task.lease_id, None)

    def serve(self, exit_when_idle: bool) -> None:
        beat = threading.Thread(target=self.heartbeat_loop, daemon=True)
        beat.start()
        threads: list[threading.Thread] = []
        announced = False
        try:
            while True:
                if len(self.running) >= self.slots:
                    time.sleep(0.05)
                    continue
                items = self.lease()
                if not announced:  # after the first answer: nothing answering is one line
                    announced = True
                    log.info(
                        "worker %s serving queues %s at %s (%d slots)",
                        self.worker_id, ",".join(self.queues), self.api.base, self.slots,
                    )  # fmt: skip
                if not items and exit_when_idle and not self.running:
                    break
                for item in items:
                    task = Running(item)
                    with self.lock:
                        self.running[task.lease_id] = task
                    t = threading.Thread(target=self.run_one, args=(task,), daemon=True)
                    t.start()
                    threads.append(t)
        finally:
            for t in threads:
                t.join()
            self.done.set()
            beat.join()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--api", default=os.environ.get("REDCRON_API", "http://127.0.0.1:8000"))
    parser.add_argument("--worker-id", default=f"py-{socket.gethostname()}-{os.getpid()}")
    parser.add_argument("--queues", default="default,commands", help="comma-separated")
    parser.add_argument("--slots", type=int, default=4, help="attempts run at once")
    parser.add_argument("--runtime", default="docker", help="container runtime (docker, podman)")
    parser.add_argument("--exit-when-idle", action="store_true")
    args = parser.parse_args(argv)
    token = os.environ.get("REDCRON_TOKEN")
    if not token:
        print(
            "http_worker: set REDCRON_TOKEN to a worker token "
            "(redcron workers token create --queues default,commands)",
            file=sys.stderr,
        )
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    worker = Worker(
        Api(args.api, token), args.worker_id, args.queues.split(","), args.slots, args.runtime
    )

    try:
        worker.serve(args.exit_when_idle)
    except Unreachable as exc:
        print(f"http_worker: {exc}: start redcron dashboard, or pass --api", file=sys.stderr)
        return 1
    except Refused as exc:
        print(f"http_worker: lease refused, {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
