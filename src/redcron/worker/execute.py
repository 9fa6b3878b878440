"""Running one attempt: a Python callable or a command, turned into an Outcome."""

from __future__ import annotations

import contextlib
import inspect
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from redcron import serde
from redcron.context import Context
from redcron.engine import Engine, Lease
from redcron.errors import ConfigError, Permanent, Retry, ValidationError
from redcron.keys import run_of_task
from redcron.model import edges, error_classes, validation
from redcron.model.edges import RunInputs
from redcron.model.progress import Coalescer, Value
from redcron.worker import capture

if TYPE_CHECKING:
    from redcron.app import App
    from redcron.app.tasks import TaskOptions

MAX_ERROR_CHARS = 4_000
#: the result of a task that returns None (most do), packed once
_NONE = serde.dumps(None)
#: what a command or container task gets of the worker's environment: these
#: (when set), then the worker's ``pass_env``, then the task spec's ``env``
BASE_ENV = ("PATH", "HOME", "LANG")
#: the worker's own settings (Redis URL, tokens): never passed, not even on request
WORKER_ENV_PREFIX = "REDCRON_"
#: the variable naming the file that holds a run's command task's upstream
#: results as JSON (issue 32 §1): not REDCRON_*, which a command never gets
UPSTREAM_ENV = "UPSTREAM_FILE"


@dataclass(slots=True)
class Outcome:
    """How an attempt ended, ready to report."""

    ok: bool
    result: bytes = b""
    outcome: str = "succeeded"  # succeeded | failed | timed_out | cancelled
    error: str = ""
    retryable: bool = True
    delay_ms: int | None = None
    exit_code: int | None = None
    lines: list[str] = field(default_factory=list)


@dataclass(eq=False)
class Attempt:
    """One leased attempt on this worker."""

    lease: Lease
    buffer: capture.LineBuffer
    began: float | None = None  # monotonic time execution began (None: waiting for a slot)
    ended: float | None = None  # monotonic time it ended (ran to an outcome, or was ended)
    deadline: float | None = None  # monotonic time at which it is timed out
    marked: bool = False  # the 'running' mark was sent
    finished: bool = False
    abandoned: bool = False  # ended by the worker (never begun, revoked or timed out in a
    # thread we cannot kill, or handed back): the pool must not start or report it
    pgid: int | None = None  # process group to kill (command, or process-pool child)
    kill_reason: str | None = None
    slot_freed: bool = False  # the worker gave its slot back (guarded by the worker's lock)
    executable: str | None = None  # the program an allowlist resolved argv[0] to
    passed_env: dict[str, str] = field(default_factory=dict)  # the worker's --pass-env
    resent: bool = False  # its report reached Redis unconfirmed (NotReplicated): sent again
    trace: Any = None  # its CONSUMER span (worker/tracing.py); None: tracing off
    trace_token: Any = None  # the span made current on the slot's thread, to detach
    # how to stop it when it is killed, other than by its process group: a
    # coroutine's (the event loop cancels its task); set as it begins
    canceller: Callable[[], None] | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: what ``ctx.progress`` said and the worker has not written yet (None: the
    #: task never called it; made on the first call, so others pay nothing)
    progress: Coalescer | None = None
    #: a process-pool child's: called after each ``ctx.progress`` (sends it on)
    on_progress: Callable[[Attempt], None] | None = None

    def progress_of(self) -> Coalescer:
        """The attempt's coalescer, made on first use (``ctx.progress``)."""
        with self.lock:
            if self.progress is None:
                self.progress = Coalescer()
            return self.progress

    def offer_progress(self, value: Value) -> None:
        """``ctx.progress``: record ``value`` for the worker to write."""
        (self.progress or self.progress_of()).offer(value)
        if self.on_progress is not None:
            self.on_progress(self)

    def try_begin(self, canceller: Callable[[], None] | None = None) -> bool:
        """Claim the attempt for the executing thread, just before the task runs.

        False if it was cancelled, timed out or handed back while it waited for
        a slot: whoever ended it has reported it (or handed it back), so it must
        not start at all.  Checked and set under the attempt's lock, so an end and a
        start cannot both win; ``canceller`` (how a kill stops it) is set in the
        same step, so a kill never finds it begun and unstoppable.
        """
        with self.lock:
            if self.abandoned or self.kill_reason is not None:
                return False
            self.canceller = canceller
            self.began = time.monotonic()
            if self.lease.timeout_ms > 0:
                self.deadline = self.began + self.lease.timeout_ms / 1000
            return True

    def finish(self) -> bool:
        """Mark the attempt finished (it ran); True if the worker abandoned it
        meanwhile (timed out, revoked or handed back): its outcome is not
        reported by the pool."""
        with self.lock:
            self.finished = True
            if self.ended is None:  # a timed-out thread ends after the worker ended it
                self.ended = time.monotonic()
            return self.abandoned

    def was_killed(self) -> bool:
        """Whether the worker ended it (timed out, cancelled, handed back): ``ctx.cancelled``."""
        return self.kill_reason is not None

    def kill(self, reason: str) -> bool:
        """Kill the attempt's process group (commands / process pool), or cancel its
        coroutine; False if it has neither (a thread, or not begun)."""
        with self.lock:
            self.kill_reason = self.kill_reason or reason
            pgid = self.pgid
            canceller = self.canceller
        if canceller is not None:
            canceller()
            return True
        if pgid is None:
            return False
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)
        return True


def _trim(text: str) -> str:
    return text if len(text) <= MAX_ERROR_CHARS else "…" + text[-MAX_ERROR_CHARS:]


def failed(options: TaskOptions, lease: Lease, exc: BaseException, trace: str) -> Outcome:
    """The outcome of an attempt whose code raised ``exc`` (not ``Retry`` nor
    ``Permanent``): retried or not as its call's ``retry_on``/``permanent_on``
    say, else its task's (model/error_classes.py); when a list made it
    permanent, the error's last line says so."""
    rule = error_classes.effective(
        options.retry_on, options.permanent_on, lease.error_classes, lease.iid
    )
    verdict = error_classes.classify(exc, rule.retry_on, rule.permanent_on)
    reason = verdict.reason
    if reason and rule.unresolved:
        reason += f" ({', '.join(rule.unresolved)}: not found on this worker)"
    # on the last line, which lists show: "KeyError: 'k' (not retried: ...)"
    error = f"{trace.rstrip()} ({reason})" if reason else trace
    return Outcome(ok=False, outcome="failed", error=_trim(error), retryable=verdict.retryable)


def timeout_retryable(app: App, lease: Lease) -> bool:
    """Whether a timed-out attempt of a Python task is retried: yes, unless its
    call's (else its task's) ``permanent_on`` names ``TimeoutError`` or a base."""
    task = app.tasks.get(lease.name) if lease.kind == "python" else None
    if task is None:
        return True
    rule = error_classes.effective(
        task.options.retry_on, task.options.permanent_on, lease.error_classes, lease.iid
    )
    return error_classes.timeout_retryable(rule.permanent_on)


def with_params(
    names: Iterable[str], kwargs: dict[str, Any], params: dict[str, Any]
) -> dict[str, Any]:
    """``kwargs`` and, for each of ``names`` (the parameters the call leaves
    unset: ``CallShape.fillable``) that the run's ``params`` hold, that param
    by name: a DAG task takes a param as a keyword argument (issue 32 §3).
    :meth:`RunInputs.fill` does the same with upstream results first."""
    if not isinstance(params, dict):  # triggered with JSON that is no object
        return kwargs
    return RunInputs(params).fill(tuple(names), kwargs)


def read_inputs(broker: Engine, lease: Lease) -> RunInputs:
    """The run's params and the upstream results of a task of a run: one round
    trip (``inputs.lua``), once per attempt at most."""
    return broker.run_inputs(lease.shard, [lease.iid])[0]


def packed_result(app: App, value: Any) -> bytes:
    """A task's return value as msgpack, within ``max_result_bytes``; raises
    ``Permanent`` naming the size and the setting when it cannot be stored
    (not msgpack, or too large): no retry returns anything else."""
    try:
        result = _NONE if value is None else serde.dumps(value, field="result")
    except ValidationError as exc:
        raise Permanent(str(exc)) from None
    too_large = edges.result_too_large(len(result), app.settings.max_result_bytes)
    if too_large is not None:
        raise Permanent(too_large)
    return result


def prepare(app: App, attempt: Attempt, broker: Engine | None = None) -> Call | Outcome:
    """The call an attempt makes (the task function bound to its decoded arguments,
    a run's params it declares, and ``ctx`` when it asks for one), or the outcome
    of an attempt that cannot make it (an unknown task, arguments that are not
    msgpack or do not fit, a run's inputs that cannot be read).  Reads Redis
    only for a DAG task that takes an upstream result or a run's param."""
    lease = attempt.lease
    task = app.tasks.get(lease.name)
    if task is None:
        return Outcome(
            ok=False,
            outcome="failed",
            error=f"unknown task {lease.name!r} on this worker (registered: "
            f"{', '.join(sorted(app.tasks)) or 'none'}); is the worker running the right app?",
            retryable=True,
        )
    try:
        args, kwargs = serde.loads(lease.args)
        if not isinstance(args, list) or not isinstance(kwargs, dict):
            raise TypeError(f"[args, kwargs] expected, got {type(args).__name__}")
    except Exception as exc:  # written by hand into Redis: no retry will fix it
        return Outcome(
            ok=False,
            outcome="failed",
            error=f"malformed task arguments (args is not msgpack [args, kwargs]): {exc!r}",
            retryable=False,
        )
    run_id, _, task_name = lease.iid.rpartition("/")
    inputs = None
    fillable = task.shape.fillable(args, kwargs) if run_id else ()
    if fillable and broker is not None:
        # a parameter the call leaves unset may be an upstream task's result or
        # a param: both come in one read, which ctx.upstream and ctx.params reuse
        try:
            inputs = read_inputs(broker, lease)
        except Exception as exc:  # Redis unreachable: a later attempt may read them
            return Outcome(
                ok=False,
                outcome="failed",
                error=f"cannot read the run's params and upstream results: {exc}",
            )
        kwargs = inputs.fill(fillable, kwargs)
    bad = task.shape.mismatch(args, kwargs)
    if bad is not None:  # the call can never succeed: no retry, and the function never runs
        return Outcome(ok=False, outcome="failed", error=bad.message, retryable=False)
    if task.wants_ctx:
        ctx = Context(
            task_id=lease.iid,
            attempt=lease.attempt,
            # stable across attempts: the task id, or run_id:task_name in a run
            idem_key=f"{run_id}:{task_name}" if run_id else lease.iid,
            tenant=lease.tenant,
            queue=task.options.queue,
            shard=lease.shard,
            broker=broker,
            run_id=run_id or None,
            _inputs=inputs,  # read above: ctx.params and ctx.upstream need no second read
            _cancelled=attempt.was_killed,
            _progress=attempt.offer_progress,
        )
        args = [ctx, *args]
    return Call(task.fn, args, kwargs, task.options, lease)


@dataclass(slots=True)  # not frozen: one is made per attempt (frozen costs 4x)
class Call:
    """A task function and the arguments one attempt calls it with."""

    fn: Callable[..., Any]
    args: list[Any]
    kwargs: dict[str, Any]
    #: what decides whether an exception it raises is retried (``retry_on``...)
    options: TaskOptions
    lease: Lease

    def __call__(self) -> Any:
        return self.fn(*self.args, **self.kwargs)


def result_outcome(app: App, value: Any) -> Outcome:
    """The outcome of a task body that returned ``value``: stored as msgpack
    within ``max_result_bytes``, else failed (not retried: what it returned
    cannot be stored, whatever a retry returns)."""
    try:
        result = packed_result(app, value)
    except Permanent as exc:
        return Outcome(ok=False, outcome="failed", error=str(exc), retryable=False)
    return Outcome(ok=True, result=result)


def error_outcome(exc: BaseException, call: Call) -> Outcome:
    """The outcome of a task body that raised ``exc``: ``Retry``, ``Permanent``, or
    anything else, with its traceback, retried as the call's ``retry_on`` /
    ``permanent_on`` say (:func:`failed`)."""
    if isinstance(exc, Retry):
        delay = None if exc.delay is None else int(exc.delay * 1000)
        return Outcome(ok=False, outcome="failed", error=f"Retry: {exc}", delay_ms=delay)
    if isinstance(exc, Permanent):
        return Outcome(
            ok=False, outcome="failed", error=_trim(f"Permanent: {exc}"), retryable=False
        )
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return failed(call.options, call.lease, exc, text)


#: results that are never awaitable: no ABC check for them (~1 µs a task)
_PLAIN_RESULTS = frozenset({int, str, bytes, float, bool, type(None), dict, list, tuple})


def run_python(app: App, attempt: Attempt, broker: Engine | None = None) -> Outcome:
    """Run a registered (plain) task on the current thread, capturing its output.

    A coroutine function's attempts run on the worker's event loop instead
    (:mod:`redcron.worker.aio`); a plain function that returns an awaitable
    (a wrapper around an ``async def``) fails at once, its awaitable closed,
    rather than reporting an unencodable result."""
    call = prepare(app, attempt, broker)
    if isinstance(call, Outcome):
        return call
    capture.attach(attempt.buffer)
    try:
        value = call()
        if type(value) not in _PLAIN_RESULTS and inspect.isawaitable(value):
            close = getattr(value, "close", None)
            if close is not None:
                close()  # never awaited: no "coroutine was never awaited" warning
            return Outcome(
                ok=False,
                outcome="failed",
                retryable=False,
                error=f"task {attempt.lease.name!r} returned {type(value).__name__}, "
                "an awaitable, from a plain function: declare it `async def` (the worker "
                "runs coroutine functions on its event loop)",
            )
        return result_outcome(app, value)
    except BaseException as exc:  # task code may raise anything, SystemExit included
        if isinstance(exc, KeyboardInterrupt):
            raise
        return error_outcome(exc, call)
    finally:
        capture.attach(None)


@dataclass(frozen=True)
class CommandPolicy:
    """Which command and container tasks a worker runs.

    ``allowed`` False: none (``--allow-commands`` not given).  Otherwise every
    command task, unless ``programs`` lists some: then only those, and every
    container task, unless ``images`` lists some: then only those.

    A program with a ``/`` is a path (made absolute against the worker's
    directory); a bare name is looked up on the worker's ``PATH``.  A task's
    ``argv[0]`` is resolved the same way, with the worker's ``PATH`` (never the
    task's ``env``), and the worker executes the file it resolved, so a task
    cannot swap in another program of the same name.  An image matches
    exactly, and an image given without a tag or digest (``registry/x``)
    matches every tag and digest of it.
    """

    allowed: bool = False
    programs: tuple[str, ...] = ()
    images: tuple[str, ...] = ()

    @classmethod
    def build(
        cls, allowed: bool, programs: Iterable[str] = (), images: Iterable[str] = ()
    ) -> CommandPolicy:
        programs, images = tuple(programs), tuple(images)
        if (programs or images) and not allowed:
            raise ConfigError(
                "allow_programs/allow_images narrow what --allow-commands runs: "
                "give --allow-commands too"
            )
        for p in programs:
            if not isinstance(p, str) or not p or "\x00" in p:
                raise ConfigError(f"allow_programs: {p!r} is not a program path or name")
        for i in images:
            try:
                validation.image(i, "allow_images")
            except ValidationError as exc:
                raise ConfigError(str(exc)) from None
        return cls(allowed, programs, images)

    def _resolve(self, program: str, cwd: str | None) -> str | None:
        if "/" in program:
            return os.path.abspath(os.path.join(cwd or os.getcwd(), program))
        found = shutil.which(program, path=os.environ.get("PATH", os.defpath))
        return os.path.abspath(found) if found else None

    def check(self, kind: str, payload: Any) -> tuple[str | None, str | None]:
        """``(refusal, executable)``: why this worker will not run the task (None:
        it will), and the file to execute when an allowlist resolved one."""
        if not self.allowed:
            return (
                "this worker does not run command or container tasks; start one with "
                "--allow-commands",
                None,
            )
        if not isinstance(payload, dict):
            return f"malformed {kind} task arguments: {type(payload).__name__}", None
        if kind == "container":
            image = payload.get("image")
            if not self.images or any(_image_matches(image, i) for i in self.images):
                return None, None
            return (
                f"image {image!r} is not allowed on this worker; "
                f"start a worker with --allow-image {image} to run it",
                None,
            )
        if not self.programs:
            return None, None
        argv = payload.get("argv")
        program = argv[0] if isinstance(argv, list) and argv else None
        cwd = payload.get("cwd") if isinstance(payload.get("cwd"), str) else None
        if isinstance(program, str) and "\x00" not in program and program:
            resolved = self._resolve(program, cwd)
            allowed = {self._resolve(p, None) for p in self.programs} - {None}
            if resolved is not None and resolved in allowed:
                return None, resolved
        return (
            f"program {program!r} is not allowed on this worker; start a worker with "
            f"--allow-program {program} to run it",
            None,
        )


def _image_matches(image: object, allowed: str) -> bool:
    if not isinstance(image, str):
        return False
    if image == allowed:
        return True
    rest = image[len(allowed) :] if image.startswith(allowed) else ""
    # registry/x allows registry/x:tag and registry/x@sha256:..., not registry/x-evil
    # or (for an allowed "registry") registry:5000/other
    return rest[:1] in (":", "@") and "/" not in rest


def command_env(passed: dict[str, str], spec_env: dict[str, str]) -> dict[str, str]:
    """The whole environment of a command task (or of the container runtime).

    Task code is tenant code (DESIGN §8a): it gets ``PATH``, ``HOME`` and
    ``LANG`` of the worker, what the worker was told to pass (``--pass-env``),
    and the task spec's ``env`` (the way a job passes a value on purpose), never
    the rest of the worker's environment: no ``REDCRON_*`` settings, no Redis
    URL, no token.
    """
    env = {k: os.environ[k] for k in BASE_ENV if k in os.environ}
    env.setdefault("PATH", os.defpath)
    env.update(passed)
    env.update(spec_env)
    return env


def check_pass_env(names: Iterable[str]) -> tuple[str, ...]:
    """``--pass-env`` names, checked: a variable name, and none of the worker's own."""
    out = []
    for name in names:
        if not isinstance(name, str) or not name or "=" in name or "\x00" in name:
            raise ConfigError(f"pass_env: {name!r} is not an environment variable name")
        if name.upper().startswith(WORKER_ENV_PREFIX):
            raise ConfigError(
                f"pass_env: {name} is the worker's own setting; command tasks never get "
                f"{WORKER_ENV_PREFIX}* variables (give a task what it needs in its env)"
            )
        out.append(name)
    return tuple(out)


def container_argv(runtime: str, payload: dict[str, Any]) -> list[str]:
    """``<runtime> run --rm [--cpus N] [--memory M] [-e K=V...] IMAGE [COMMAND...]``.

    ``runtime`` is a docker-compatible CLI (docker, podman, nerdctl) or any
    stand-in executable taking the same arguments.
    """
    argv = [*runtime.split(), "run", "--rm"]
    if payload.get("cpu"):
        argv += ["--cpus", str(payload["cpu"])]
    if payload.get("mem"):
        argv += ["--memory", str(payload["mem"])]
    for key, value in sorted((payload.get("env") or {}).items()):
        argv += ["-e", f"{key}={value}"]
    return [*argv, str(payload["image"]), *(payload.get("command") or [])]


def run_command(
    attempt: Attempt,
    timeout_s: float | None,
    container_runtime: str = "docker",
    broker: Engine | None = None,
) -> Outcome:
    """Run a command (or container) task in its own process group; kill the group at
    the timeout.  Arguments that cannot be run (written by hand into Redis, or
    from before they were checked at the edge) fail the task permanently: this
    never raises, or the pool thread would die with the attempt unreported.

    A command task of a run gets its upstream results (``ctx.upstream``'s
    mapping, as JSON) in a file named by ``$UPSTREAM_FILE``, readable by the
    worker's user only and removed once the command ends; ``{}`` for a task
    that depends on none.  Not stdin: a command reading its stdin for
    something else would get them."""
    try:
        payload = serde.loads(attempt.lease.args) or {}
        if not isinstance(payload, dict):
            raise ValidationError("args", f"a mapping was expected, not {type(payload).__name__}")
        if attempt.lease.kind == "container":
            validation.image(payload.get("image"), "image")
            validation.env(payload.get("env"), "env")
            argv = container_argv(container_runtime, payload)
            # the spec's env goes into the container (-e), not to the runtime
            payload = {"argv": argv}
        argv = validation.argv(payload.get("argv"), "argv")
        env = command_env(attempt.passed_env, validation.env(payload.get("env"), "env"))
        cwd = validation.cwd(payload.get("cwd") or None, "cwd")
    except Exception as exc:
        return Outcome(
            ok=False,
            outcome="failed",
            error=f"malformed {attempt.lease.kind} task: {exc}",
            retryable=False,
        )
    upstream_file = None
    if attempt.lease.kind == "command" and broker is not None and run_of_task(attempt.lease.iid):
        try:
            upstream_file = _upstream_file(read_inputs(broker, attempt.lease))
        except Exception as exc:  # Redis unreachable, or the disk full: a later attempt may do
            return Outcome(
                ok=False, outcome="failed", error=f"cannot hand over the upstream results: {exc}"
            )
        env[UPSTREAM_ENV] = upstream_file
    try:
        return _run_process(attempt, argv, env, cwd, timeout_s)
    finally:
        if upstream_file is not None:
            with contextlib.suppress(OSError):
                os.unlink(upstream_file)


def _upstream_file(inputs: RunInputs) -> str:
    """A new file (mode 0600) holding ``inputs.upstream`` as JSON: its path."""
    fd, path = tempfile.mkstemp(prefix="redcron-upstream-", suffix=".json")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(edges.upstream_json(inputs.upstream))
    except BaseException:
        os.unlink(path)
        raise
    return path


def _run_process(
    attempt: Attempt, argv: list[str], env: dict[str, str], cwd: str | None, timeout_s: float | None
) -> Outcome:
    """Run ``argv`` (checked) in its own process group, to its outcome."""
    try:
        proc = subprocess.Popen(
            argv,
            executable=attempt.executable,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    except (OSError, ValueError, TypeError) as exc:
        return Outcome(
            ok=False, outcome="failed", error=f"cannot start {argv!r}: {exc}", retryable=False
        )
    with attempt.lock:
        attempt.pgid = proc.pid
        killed_early = attempt.kill_reason is not None
    if killed_early:
        attempt.kill(attempt.kill_reason or "cancelled")
    out = b""
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        attempt.kill("timed_out")
        out, _ = proc.communicate()
    with attempt.lock:
        attempt.pgid = None
    for line in out.decode(errors="replace").splitlines():
        attempt.buffer.write(line + "\n")
    code = proc.returncode
    if attempt.kill_reason == "timed_out":
        return Outcome(
            ok=False,
            outcome="timed_out",
            error=f"killed after timeout of {timeout_s}s",
            exit_code=code,
        )
    if attempt.kill_reason == "cancelled":
        return Outcome(ok=False, outcome="cancelled", error="cancelled", exit_code=code)
    if code == 0:
        return Outcome(ok=True, result=serde.dumps({"exit_code": 0}), exit_code=0)
    return Outcome(
        ok=False, outcome="failed", error=f"command exited with code {code}", exit_code=code
    )
