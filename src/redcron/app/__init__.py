"""The public Python API: ``App``, the ``@app.task`` decorator and task handles.

:class:`App` (here) holds the settings, the broker and the registry of tasks
and declared jobs, and turns a submission into an enqueue row (``_row``);
the registered task and the handle on one instance are in
:mod:`redcron.app.tasks`.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any, ParamSpec, TypeVar, overload

from redcron import serde, tracing
from redcron.app.tasks import MapCall, TaskDef, TaskHandle, TaskOptions, first_parameter
from redcron.clock import ulid
from redcron.config import RedisUrlChoice, Settings, announce_redis_url, find_redis_url
from redcron.engine import Broker, Enqueued, EnqueueRow, JobStore
from redcron.errors import ValidationError
from redcron.keys import shard_of, shard_of_id
from redcron.model import JobChange, concurrency, dedupe, error_classes, validation
from redcron.model import rate as _rate
from redcron.model.binding import CallShape
from redcron.model.jobs import COMMAND_TASK, MAP_MAX, MAP_PARAMS, JobSpec, Task, job_spec
from redcron.model.retry_rule import with_registered
from redcron.store import TenantStore

__all__ = ["COMMAND_TASK", "App", "TaskDef", "TaskHandle", "TaskOptions"]

P = ParamSpec("P")
R = TypeVar("R")

#: what a call may override (``task.enqueue(..., _countdown=5)``)
PER_CALL_OPTIONS = frozenset(
    (
        *("_countdown", "_tenant", "_priority", "_queue", "_timeout", "_retries", "_cpu", "_mem"),
        "_concurrency_key",  # concurrency keys: model/concurrency.py
        *("_retry_on", "_permanent_on"),  # model/error_classes.py
    )
) | frozenset(("_unique_for", "_unique_key", "_debounce", "_max_wait"))  # issue 21 §4


class App:
    """A redcron application: settings, a broker and a registry of tasks.

    Args:
        redis_url: where Redis is; ``None``: ``REDCRON_REDIS_URL``, else the
            ``.redcron/redis.url`` of a running ``redcron up`` in the working
            directory or a parent, else ``redis://127.0.0.1:6379/0``
            (:func:`~redcron.config.find_redis_url`); the last two are logged
            once per process when the App first connects (the default at WARNING).
        settings: full settings (overrides ``redis_url`` and ``overrides``).
        overrides: any :class:`Settings` field.
    """

    def __init__(
        self, redis_url: str | None = None, *, settings: Settings | None = None, **overrides: Any
    ) -> None:
        #: the URL this App found and the settings made with it: said at the first
        #: connection, unless the settings were replaced by then (the CLI's --redis)
        self._found: tuple[Settings, RedisUrlChoice] | None = None
        if settings is None:
            found = find_redis_url(redis_url)
            settings = Settings.from_env(redis_url=found.url, **overrides)
            self._found = (settings, found)
        self.settings = settings
        self.tasks: dict[str, TaskDef[Any, Any]] = {}
        self.declared_jobs: dict[tuple[str, str], JobSpec] = {}
        #: the chord jobs (tenant, name) this App wrote (:meth:`chord`)
        self._chords: set[tuple[str, str]] = set()
        self._broker: Broker | None = None
        self._pid = os.getpid()
        if settings.otel:  # REDCRON_OTEL: once per process (docs/observability.md)
            tracing.setup(settings.otel)

    @property
    def broker(self) -> Broker:
        # A forked child must not share the parent's sockets.
        if self._broker is None or self._pid != os.getpid():
            if self._found is not None and self._found[0] is self.settings:
                announce_redis_url(self._found[1])
            self._broker = Broker(self.settings)
            self._pid = os.getpid()
        return self._broker

    def close(self) -> None:
        if self._broker is not None:
            self._broker.close()
            self._broker = None

    @overload
    def task(self, fn: Callable[P, R], /) -> TaskDef[P, R]: ...

    @overload
    def task(
        self,
        fn: None = None,
        /,
        *,
        name: str | None = None,
        retries: int | None = None,
        timeout: float | None = None,
        priority: str = "normal",
        tenant: str = "default",
        queue: str = "default",
        retry_base: float | None = None,
        retry_cap: float | None = None,
        cpu: float | None = None,
        mem: int | str | None = None,
        unique_for: float | None = None,
        debounce: float | None = None,
        max_wait: float | None = None,
        concurrency_key: str | None = None,
        max_concurrent: int | None = None,
        retry_on: Any = None,
        permanent_on: Any = None,
        rate: str | None = None,
        rate_key: str | None = None,
    ) -> Callable[[Callable[P, R]], TaskDef[P, R]]: ...

    def task(
        self,
        fn: Callable[P, R] | None = None,
        /,
        *,
        name: str | None = None,
        retries: int | None = None,
        timeout: float | None = None,
        priority: str = "normal",
        tenant: str = "default",
        queue: str = "default",
        retry_base: float | None = None,
        retry_cap: float | None = None,
        cpu: float | None = None,
        mem: int | str | None = None,
        unique_for: float | None = None,
        debounce: float | None = None,
        max_wait: float | None = None,
        concurrency_key: str | None = None,
        max_concurrent: int | None = None,
        retry_on: Any = None,
        permanent_on: Any = None,
        rate: str | None = None,
        rate_key: str | None = None,
    ) -> Any:
        """Register a task (``@app.task`` or ``@app.task(retries=3, ...)``).

        ``unique_for`` (seconds): an enqueue matching a task of the same key that
        has not ended, within the window, returns that task (``duplicate``);
        ``debounce`` (seconds, with an optional ``max_wait`` cap): calls of one key
        fold into one task that starts ``debounce`` after the last of them, with
        its arguments.  Exclusive; docs/operations.md "Unique windows and
        debounce" has the exact semantics.

        ``rate`` (``"10/s"``, ``"100/m"``, ``"5/h"``): at most that many of its
        instances handed to the workers in any window of that unit, per tenant;
        with ``rate_key`` (an argument's name), per value of that argument.
        docs/operations.md "Rate limits" has the exact semantics.
        """
        if fn is not None and not callable(fn):
            raise TypeError(
                f"app.task({fn!r}): a task's name is a keyword, e.g. @app.task(name={fn!r})"
            )
        validation.timeout_ms(timeout)
        base, cap = validation.backoff(
            self.settings.retry_base if retry_base is None else retry_base,
            self.settings.retry_cap if retry_cap is None else retry_cap,
        )
        opts = TaskOptions(
            retries=validation.non_negative_int(
                self.settings.max_retries if retries is None else retries, "retries"
            ),
            timeout=timeout,
            priority=validation.priority(priority),
            tenant=validation.name("tenant", tenant),
            queue=validation.name("queue", queue),
            retry_base=base,
            retry_cap=cap,
            cpu=None if cpu is None else validation.cpus(cpu),
            mem=None if mem is None else validation.mem_bytes(mem),
            unique_for=unique_for,
            debounce=debounce,
            max_wait=max_wait,
            concurrency_key=concurrency_key,
            max_concurrent=max_concurrent,
            retry_on=error_classes.declared(retry_on, "retry_on"),
            permanent_on=error_classes.declared(permanent_on, "permanent_on"),
            rate=None if rate is None else _rate.parse(rate),
            rate_key=rate_key,
        )
        opts.dedupe  # noqa: B018 - checked at declaration, not at the first call

        def register(f: Callable[P, R]) -> TaskDef[P, R]:
            task_name = name or f"{f.__module__}.{f.__qualname__}"
            if not task_name or "\n" in task_name:
                # a worker passes its names to lease.lua between newlines
                raise ValidationError("name", "a task name is not empty and holds no newline")
            if task_name in self.tasks:
                raise ValidationError("name", f"task {task_name!r} is already registered")
            td = TaskDef(self, f, task_name, opts)
            # concurrency keys: the key must be an argument the function takes
            concurrency.check_declaration(td.shape, concurrency_key, max_concurrent)
            _rate.check_declaration(td.shape, rate, rate_key)  # rate_key: an argument
            self.tasks[task_name] = td
            return td

        return register(fn) if fn is not None else register

    # -- jobs ---------------------------------------------------------------------

    @property
    def jobs(self) -> JobStore:
        """Job and run operations (list, pause, trigger, runs, cancel, retry...).
        A job's Python task that leaves out its retries takes its registered
        task's here (``model.retry_rule``)."""
        return JobStore(self.broker, self.retry_rules(), self.job_concurrency)

    def job_concurrency(self, spec: JobSpec) -> dict[str, dict[str, Any]]:
        """Each of ``spec``'s Python tasks whose registered task declares a
        concurrency key or a rate: task name -> the fields of its template row
        (``ck``/``ckn``: key value from the job's arguments, cap; ``rate_ms``,
        ``rate_n``, and ``rate_key``/``rate_group`` with a rate_key).  Raises
        ValidationError naming ``tasks.<name>....``."""
        out: dict[str, dict[str, Any]] = {}
        for tname, task in spec.tasks.items():
            td = self.tasks.get(task.ref or "") if task.kind == "python" else None
            if td is None:
                continue
            o, row = td.options, dict[str, Any]()
            try:
                if o.max_concurrent is not None:
                    ck, ckn = concurrency.for_call(
                        td.shape, o.concurrency_key, o.max_concurrent, task.args, task.kwargs
                    )
                    if ck:
                        row |= {"ck": ck, "ckn": ckn}
                if o.rate is not None:
                    row |= {"rate_ms": o.rate.unit_ms, "rate_n": o.rate.n}
                    group = o.rate_key and _rate.group_of(
                        td.shape, o.rate_key, task.args, task.kwargs
                    )
                    if group:
                        row |= {"rate_key": o.rate_key, "rate_group": group}
            except ValidationError as exc:
                raise ValidationError(f"tasks.{tname}.{exc.field}", exc.message) from exc
            if row:
                out[tname] = row
        return out

    def retry_rules(self) -> dict[str, dict[str, Any]]:
        """Each registered task's retries, retry_base and retry_cap: what a job's
        task naming it takes where it gives none (one rule for jobs and enqueues)."""
        return {
            name: {"retries": o.retries, "retry_base": o.retry_base, "retry_cap": o.retry_cap}
            for name, td in self.tasks.items()
            for o in (td.options,)
        }

    @property
    def tenants(self) -> TenantStore:
        """Tenant settings: weight, caps, rate limits, admission bounds."""
        return TenantStore(self.broker)

    def job(
        self,
        name: str,
        *,
        tasks: dict[str, Task],
        cron: str | None = None,
        every: str | None = None,
        at: datetime | None = None,
        tz: str = "UTC",
        tenant: str = "default",
        **policies: Any,
    ) -> JobSpec:
        """Declare a job (keyed by tenant + name) and return its spec.

        Nothing is written: declared jobs are upserted by ``redcron jobs apply
        -A``, ``redcron beat`` or ``redcron up`` (or :meth:`apply_declared`),
        so importing the module in every process never re-creates a job that
        was deleted.  Validation (cron syntax, time zone, DAG cycles, unknown
        dependencies, timeouts...) happens here.  To write a job now, from a
        client, use ``app.jobs.put(name, ...)`` with the same arguments.
        """
        spec = job_spec(
            name, tasks=tasks, cron=cron, every=every, at=at, tz=tz, tenant=tenant, **policies
        )
        # tasks registered by now are checked now; the rest when the job is applied
        self.check_task_args(spec)
        # the backoff as writing the job checks it: the registered task's retry rule
        # and the deployment's defaults fill in what the job leaves out (a retry_cap
        # under the registered retry_base was refused by jobs.put only)
        with_registered(spec, self.retry_rules()).check_backoff(self.settings.task_defaults())
        self._declare(spec)
        return spec

    def cron(
        self,
        expr: str | None = None,
        *,
        every: str | None = None,
        tenant: str = "default",
        tz: str = "UTC",
        name: str | None = None,
        **policies: Any,
    ) -> Callable[[Callable[P, R]], TaskDef[P, R]]:
        """Declare a one-task job from a function (registered as a task too).

        Nothing is written at import time: declared jobs are upserted by
        ``redcron jobs apply -A``, ``redcron beat`` or ``redcron up`` (or
        :meth:`apply_declared`).
        """

        def declare(fn: Callable[P, R]) -> TaskDef[P, R]:
            plain = fn.fn if isinstance(fn, TaskDef) else fn
            job_name = name or plain.__name__
            # each run calls it with no arguments: it must take none
            bad = CallShape.of(plain).mismatch([], {})
            if bad is not None:
                raise ValidationError(f"tasks.{job_name}.{bad.field}", bad.message)
            td: TaskDef[P, R] = fn if isinstance(fn, TaskDef) else self.task(fn)
            spec = job_spec(
                job_name,
                tasks={job_name: Task(td.name)},
                cron=expr,
                every=every,
                tz=tz,
                tenant=tenant,
                **policies,
            )
            self._declare(spec)
            return td

        return declare

    def _declare(self, spec: JobSpec) -> None:
        key = (spec.tenant, spec.name)
        if key in self.declared_jobs:
            raise ValidationError(
                "name", f"job {spec.name!r} of tenant {spec.tenant!r} is already declared"
            )
        self.declared_jobs[key] = spec

    def check_task_names(self, specs: Iterable[JobSpec]) -> None:
        """Raise ValidationError when a job's Python task names a function this
        app has not registered, or passes it arguments that do not fit it (its
        runs would retry to exhaustion and dead-letter): the message names the
        job, the task and the name or the argument."""
        for spec in specs:
            for task_name, task in spec.tasks.items():
                if task.kind == "python" and task.ref not in self.tasks:
                    known = ", ".join(sorted(self.tasks)) or "none"
                    close = difflib.get_close_matches(task.ref or "", sorted(self.tasks), n=3)
                    hint = f"did you mean {' or '.join(map(repr, close))}? " if close else ""
                    raise ValidationError(
                        "tasks",
                        f"job {spec.tenant}/{spec.name}: task {task_name!r} runs "
                        f"{task.ref!r}, which is not a registered task ({hint}registered: "
                        f"{known})",
                    )
            self.check_task_args(spec)

    def check_task_args(self, spec: JobSpec) -> None:
        """Raise ValidationError (field ``tasks.<task>.args`` or
        ``tasks.<task>.kwargs.<name>``) when a Python task of ``spec`` that this
        app registers is given arguments that do not fit its function; tasks
        this app does not know are not checked here.  A parameter named after
        one of the task's upstream tasks counts as given: the worker passes it
        that task's result (issue 32 §1)."""
        for task_name, task in spec.tasks.items():
            registered = self.tasks.get(task.ref or "") if task.kind == "python" else None
            if registered is not None:
                fillable = registered.shape.fillable(task.args, task.kwargs)
                given = [*task.upstream(), (task.map_over or "").removeprefix(MAP_PARAMS)]
                upstream = {d: None for d in given if d in fillable}
                kwargs = {**task.kwargs, **upstream} if upstream else task.kwargs
                registered.check_args(task.args, kwargs, f"tasks.{task_name}")

    def apply_declared(
        self, *, prune: bool = False, keep: Iterable[tuple[str, str]] = ()
    ) -> list[JobChange]:
        """Upsert every declared job (``app.job``, ``@app.cron``) after checking
        their task names against the registry.

        With ``prune``, also delete the jobs of the tenants the app declares
        jobs in that are neither declared nor in ``keep`` (tenant, name); no
        other tenant is touched.
        """
        specs = list(self.declared_jobs.values())
        self.check_task_names(specs)
        out = self.jobs.put_many(specs) if specs else []
        if prune:
            tenants = {tenant for tenant, _name in self.declared_jobs}
            out += self.jobs.prune(tenants, [*self.declared_jobs, *keep])
        return out

    def enqueue(self, name: str, *args: Any, **kwargs: Any) -> TaskHandle:
        """Enqueue a registered task by name."""
        if name not in self.tasks:
            known = ", ".join(sorted(self.tasks)) or "none"
            raise ValidationError("task", f"unknown task {name!r}; registered tasks: {known}")
        return self.tasks[name].enqueue(*args, **kwargs)

    def enqueue_command(
        self,
        argv: Sequence[str],
        *,
        tenant: str = "default",
        timeout: float | None = None,
        queue: str = "commands",
        priority: str = "normal",
        retries: int | None = None,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        countdown: float | None = None,
    ) -> TaskHandle:
        """Enqueue a shell command; it runs only on workers started with ``--allow-commands``."""
        validation.argv(argv, "argv")
        validation.env(env, "env")
        validation.cwd(cwd, "cwd")
        opts = TaskOptions(
            retries=self.settings.max_retries if retries is None else retries,
            timeout=timeout,
            priority=priority,
            tenant=tenant,
            queue=queue,
            retry_base=self.settings.retry_base,
            retry_cap=self.settings.retry_cap,
        )
        payload = {"argv": list(argv), "env": env or {}, "cwd": cwd}
        row = self._row(COMMAND_TASK, "command", payload, opts, {"_countdown": countdown})
        self._submit([row])
        return TaskHandle(self, row.iid)

    def _submit(self, rows: list[EnqueueRow]) -> Enqueued:
        """Write ``rows`` (one task's calls, as ``_row`` made them).  With tracing on
        (redcron/tracing.py), inside a PRODUCER span ``send <queue>`` whose W3C
        context every row carries into its instance hash: a batch is one span, as
        one call is one message sent; off, the rows go as they are."""
        if tracing.tracer() is None:
            return self.broker.submit(rows)
        first = rows[0]
        attributes: dict[str, Any] = {
            "messaging.system": tracing.SYSTEM,
            "messaging.destination.name": first.queue,
            "messaging.operation.type": "send",
            "messaging.operation": "publish",
            "redcron.tenant": first.tenant,
            "redcron.task": first.name,
        }
        if len(rows) == 1:
            attributes["messaging.message.id"] = first.iid
        else:
            attributes["messaging.batch.message_count"] = len(rows)
        with tracing.producer(f"send {first.queue}", attributes) as carrier:
            if carrier:
                tp, ts = carrier.get("traceparent", ""), carrier.get("tracestate", "")
                rows = [row._replace(traceparent=tp, tracestate=ts) for row in rows]
            return self.broker.submit(rows)

    def chord(
        self, header: MapCall, callback: TaskDef[Any, Any], *, tenant: str | None = None
    ) -> TaskHandle:
        """Celery's chord as a one-off run (issue 32 §2): ``header.task`` runs once
        per element of ``header.items`` (each element its first parameter), then
        ``callback`` runs once with the list of their results, in order, as its
        first parameter; returns the callback's handle (``.result()`` waits for it).

        ``app.chord(square.map([1, 2, 3]), total)`` is a run of the manual-only job
        ``chord.<header>.<callback>`` (written on first use, per tenant: the
        header's, unless ``tenant`` is given) whose mapped task is named after
        the callback's parameter and maps over the run's param named after the
        header's: the items and ``header.kwargs`` are the run's params (JSON).
        Each element is a task instance of its own: retries, the DLQ, cancel and
        fairness apply to each; a header instance that fails for good leaves the
        callback upstream_failed.

        Raises:
            ValidationError: the items are not JSON or more than :data:`MAP_MAX`,
                or a function has no parameter to take them.
        """
        element, joined = header.element_name(), first_parameter(callback, "callback")
        if len(header.items) > MAP_MAX:
            raise ValidationError(
                "items", f"{len(header.items):,} items; a chord maps over at most {MAP_MAX:,}"
            )
        params = {**header.kwargs, element: header.items}
        try:
            json.dumps(params, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ValidationError(
                "items", f"a chord's items and kwargs travel as the run's params (JSON): {exc}"
            ) from None
        tenant = tenant or header.task.options.tenant
        node = "callback" if joined != "callback" else "chord_callback"
        name = _chord_job_name(header.task.name, callback.name)
        if (tenant, name) not in self._chords:
            tasks = {
                joined: Task(header.task.name, map_over=MAP_PARAMS + element),
                node: Task(callback.name, depends_on=[joined]),
            }
            self.jobs.put(name, tasks=tasks, tenant=tenant)
            self._chords.add((tenant, name))
        run_id = self.jobs.trigger(name, tenant=tenant, params=params)
        return TaskHandle(self, f"{run_id}/{node}")

    def get(self, task_id: str) -> TaskHandle:
        shard_of_id(task_id)
        return TaskHandle(self, task_id)

    def _row(
        self, name: str, kind: str, payload: Any, defaults: TaskOptions, opts: dict[str, Any]
    ) -> EnqueueRow:
        """Validate one submission and build its enqueue.lua row (nothing written)."""
        unknown = opts.keys() - PER_CALL_OPTIONS if opts else ()
        if unknown:
            raise ValidationError(
                sorted(unknown)[0],
                f"unknown option; per-call options are {', '.join(sorted(PER_CALL_OPTIONS))}",
            )

        checked = defaults.checked
        tenant, queue, priority = checked.tenant, checked.queue, checked.priority
        timeout, max_attempts = checked.timeout_ms, checked.max_attempts
        cpu, mem, delay = defaults.cpu, defaults.mem, 0
        deduped = defaults.dedupe
        errors = ""
        if opts:  # each given option replaces its default (None: the default)
            get = opts.get
            if get("_tenant") is not None:
                tenant = validation.name("tenant", opts["_tenant"])
            if get("_queue") is not None:
                queue = validation.name("queue", opts["_queue"])
            if get("_priority") is not None:
                priority = validation.priority(opts["_priority"])
            if get("_timeout") is not None:
                timeout = validation.timeout_ms(opts["_timeout"])
            if get("_retries") is not None:
                max_attempts = validation.non_negative_int(opts["_retries"], "retries") + 1
            delay = validation.delay_ms(get("_countdown"))
            if get("_cpu") is not None:
                cpu = validation.cpus(opts["_cpu"], "_cpu")
            if get("_mem") is not None:
                mem = validation.mem_bytes(opts["_mem"], "_mem")
            call = error_classes.for_call(get("_retry_on"), get("_permanent_on"))
            if call is not None:
                errors = call.wire()
        wire = ""
        if deduped is not None or opts:  # -- unique windows and debounce (issue 21 §4) --
            deduped, wire = self._dedupe(name, payload, defaults, deduped, opts, delay)
            if deduped is not None and deduped.mode == dedupe.DEBOUNCE:
                delay = deduped.window_ms  # a debounced task waits that long first
        # [concurrency keys] the call's key value and cap (model/concurrency.py)
        ck, ckn = "", 0
        if defaults.max_concurrent is not None or (opts and "_concurrency_key" in opts):
            td = self.tasks.get(name) if kind == "python" else None
            ck, ckn = concurrency.for_call(
                td.shape if td is not None else None,
                defaults.concurrency_key,
                defaults.max_concurrent,
                payload[0],
                payload[1],
                opts.get("_concurrency_key") if opts else None,
            )
        # [/concurrency keys]
        limit, group = defaults.rate, ""  # rate limits (model/rate.py)
        if limit is not None and defaults.rate_key is not None and kind == "python":
            td = self.tasks.get(name)
            if td is not None:
                group = _rate.group_of(td.shape, defaults.rate_key, payload[0], payload[1])
        if ck and deduped is not None and deduped.mode == dedupe.DEBOUNCE:
            # a debounce call replaces the arguments of the task it folds into,
            # and with them the value its concurrency key was read from
            raise ValidationError(
                "_debounce" if opts and "_debounce" in opts else "debounce",
                "a debounced task cannot also have a concurrency key (the last call's "
                "arguments win, so the key could change under a waiting task); drop "
                "one of the two, or use a unique window (unique_for) instead",
            )
        args = serde.dumps(payload)
        shard = shard_of(tenant, self.broker.shards)
        return EnqueueRow(
            iid=f"{shard}-{ulid()}",
            name=name,
            kind=kind,
            args=args,
            queue=queue,
            tenant=tenant,
            priority=priority,
            timeout_ms=timeout,
            max_attempts=max_attempts,
            retry_base_ms=checked.retry_base_ms,
            retry_cap_ms=checked.retry_cap_ms,
            delay_ms=delay,
            result_ttl_s=self.settings.result_ttl,
            cpu=cpu,
            mem=mem,
            dedupe=wire,
            ck=ck,
            ckn=ckn,
            error_classes=errors,
            rate_ms=limit.unit_ms if limit else 0,
            rate_n=limit.n if limit else 0,
            rate_key=(defaults.rate_key or "") if group else "",
            rate_group=group,
        )

    def _dedupe(
        self,
        name: str,
        payload: Any,
        defaults: TaskOptions,
        declared: dedupe.Dedupe | None,
        opts: dict[str, Any],
        delay_ms: int,
    ) -> tuple[dedupe.Dedupe | None, str]:
        """A call's unique window or debounce and its enqueue.lua field ("" =
        none): the declared one, unless the call gives its own (``_unique_for``
        replaces a declared debounce, ``_debounce`` a declared window and keeps
        the declared ``max_wait`` unless ``_max_wait`` is given too)."""
        got = opts.get
        u, d, w = got("_unique_for"), got("_debounce"), got("_max_wait")
        if (u, d, w) != (None, None, None):
            if u is None and d is None:  # only _max_wait: the declared mode's
                u, d = defaults.unique_for, defaults.debounce
            if u is None and w is None:
                w = defaults.max_wait
            declared = dedupe.options(u, d, w, prefix="_")
        key = got("_unique_key")
        if key is not None:
            key = dedupe.explicit_key(key)
        if declared is None:
            if key is not None:
                raise ValidationError(
                    "_unique_key", "applies with unique_for or debounce only; give one of them"
                )
            return None, ""
        if declared.mode == dedupe.DEBOUNCE and delay_ms:
            raise ValidationError(
                "_countdown", "cannot be combined with debounce (the debounce is the delay)"
            )
        return declared, dedupe.wire(declared, name, key, payload)


def _chord_job_name(header: str, callback: str) -> str:
    """``chord.<header>.<callback>``, made a valid job name (1-64 of letters,
    digits, ``_ . -``): other characters become ``_``, a longer one is cut and
    keeps a digest of the whole, so two chords never share a job."""
    name = re.sub(r"[^A-Za-z0-9_.\-]", "_", f"chord.{header}.{callback}")
    if len(name) <= 64:
        return name
    digest = hashlib.sha1(name.encode()).hexdigest()[:10]
    return f"{name[:53]}.{digest}"
