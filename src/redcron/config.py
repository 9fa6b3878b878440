"""Settings: a frozen dataclass; defaults < environment (``REDCRON_*``) < explicit values.

Nothing is read from the environment at import time: call
:meth:`Settings.from_env`.  Unknown keys raise instead of being ignored.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from redcron.errors import ConfigError
from redcron.redact import masked_url
from redcron.urls import ascii_digits, check_redis_url

log = logging.getLogger(__name__)

#: the last resort of the Redis URL order: --redis > REDCRON_REDIS_URL > the
#: Redis a running ``redcron up`` in this directory or a parent started > this
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"

#: the data directory of ``redcron up`` (``--data-dir``; relative to its working
#: directory): the embedded Redis's AOF and log, its lock, and the files below
DATA_DIR = Path(".redcron")
#: where ``redcron up`` records the embedded Redis it started, in its data
#: directory: the URL on the first line, the server's pid on the second.  The
#: commands read the one in :data:`DATA_DIR` (:data:`LOCAL_URL_FILE`)
LOCAL_URL_NAME = "redis.url"
LOCAL_URL_FILE = DATA_DIR / LOCAL_URL_NAME

DURABILITY = ("normal", "strict")
#: what the follow-ups record (Settings.metrics): basic leaves out the per-minute figures
METRICS = ("full", "basic")
#: Settings.otel (REDCRON_OTEL): redcron.tracing.MODES, spelled here (config is a leaf)
OTEL_MODES = ("", "0", "1", "otlp", "console", "memory")

#: Worker defaults (``redcron worker``, :class:`redcron.worker.Worker`, and the
#: throughput benchmark), chosen from ``redcron bench throughput`` on a 2-core
#: box (docs/operations.md): 32 threads (the slots of a threads pool mostly
#: wait on I/O; 32 drained no-op tasks ~20 % faster than 8 or 16, INCR tasks
#: as fast), one process per core for the processes pool, and a prefetch of as
#: many leases again, so the lease loop takes the next batch while the slots
#: still have work and leases in batches big enough to spread its per-call
#: cost.  Long tasks want ``--prefetch 0``: a held lease waits behind them
#: while another worker might be idle.
WORKER_THREADS = 32
WORKER_PREFETCH_PER_SLOT = 1


def default_concurrency(pool: str) -> int:
    """Slots a worker runs when not told: 32 threads, or one process per core."""
    if pool == "processes":
        return os.cpu_count() or 1
    return WORKER_THREADS


@dataclass(frozen=True)
class Settings:
    """Deployment and process settings.

    Attributes:
        redis_url: where Redis is.
        prefix: key prefix (``rc``); several deployments can share one server.
        shards: number of shards of a new deployment (stored in its meta key at
            first use; None: 1).  Once stored it is the deployment's: None reads
            it, another number is refused (docs/operations.md, "Changing the
            shard count").
        lease_ttl: seconds a lease lives without a heartbeat.
        min_lease_ttl: the smallest TTL a worker may ask for.
        result_ttl: seconds a finished task's record (and result) is kept.
        retry_base: first retry's backoff ceiling, seconds.
        retry_cap: largest backoff ceiling, seconds.
        max_retries: retries after the first attempt, unless a task says otherwise.
        maintenance_interval: seconds between promote/reap passes per shard.
        log_max_lines: lines kept per attempt log stream.
        max_result_bytes: the largest result a task may return, in bytes of
            msgpack (1 MiB): a larger one fails the attempt that returned it,
            permanently (docs/operations.md, "Results along the DAG").  Read
            by the processes that store results: workers, and the dashboard
            for HTTP workers' reports.
        container_runtime: docker-compatible CLI that runs container tasks.
        dispatch_quantum: tasks credited per DRR visit per unit of tenant weight.
        aging: seconds ready work waits before it is served one priority class
            higher (per step); 0 turns aging off.
        durability: ``normal``, or ``strict``: every acknowledging write (an
            enqueue, a completion or failure, a fire, a job change...) returns
            only once ``durability_replicas`` replicas hold it (``WAIT``), else
            raises :class:`~redcron.errors.NotReplicated`; with
            ``durability_replicas`` 0 (one server), the server must run
            ``appendfsync always``.
        durability_replicas: replicas a strict write waits for.
        durability_timeout: seconds a strict write waits for them.
        notify_allow_hosts: hosts a notification channel may name, comma-separated
            (``hooks.slack.com``, ``.example.com`` for a domain, ``*`` for any);
            empty: no channel can be made (docs/operations.md, Notifications).
        dashboard_url: the dashboard's base URL, for the links notifications carry
            (empty: messages carry paths only).
        metrics: ``full`` (the default), or ``basic``: the follow-ups keep what
            ``/metrics`` and the pages' totals read (lifetime counters, the
            duration and trigger-lag histograms) but no per-minute figures (the
            dashboard's activity, lag and share-of-dispatch charts then stay
            empty); docs/operations.md, "Metrics".
        otel: OpenTelemetry tracing set up by redcron (``REDCRON_OTEL``,
            docs/observability.md): ``""`` or ``0`` none (a tracer provider the
            application configured is used all the same), ``1`` or ``otlp``
            export over OTLP/HTTP as the standard ``OTEL_*`` variables say,
            ``console``, or ``memory`` (an in-memory exporter: the benchmark's).
            Needs the ``otel`` extra.
    """

    redis_url: str = DEFAULT_REDIS_URL
    prefix: str = "rc"
    shards: int | None = None
    lease_ttl: float = 60.0
    min_lease_ttl: float = 2.0
    result_ttl: int = 86_400
    retry_base: float = 1.0
    retry_cap: float = 3_600.0
    max_retries: int = 3
    maintenance_interval: float = 0.2
    log_max_lines: int = 1_000
    max_result_bytes: int = 1_048_576
    container_runtime: str = "docker"
    dispatch_quantum: float = 1.0
    aging: float = 60.0
    durability: str = "normal"
    durability_replicas: int = 1
    durability_timeout: float = 1.0
    notify_allow_hosts: str = ""
    dashboard_url: str = ""
    metrics: str = "full"
    otel: str = ""

    def __post_init__(self) -> None:
        check_redis_url(self.redis_url)
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            # every comparison with NaN is false: the range checks below would pass it
            if isinstance(value, float) and not math.isfinite(value):
                raise ConfigError(f"{f.name}: {value!r} is not a finite number")
        if self.shards is not None and self.shards < 1:
            raise ConfigError("shards: must be >= 1")
        if self.lease_ttl < self.min_lease_ttl:
            raise ConfigError(
                f"lease_ttl: {self.lease_ttl}s is below min_lease_ttl {self.min_lease_ttl}s"
            )
        if self.min_lease_ttl <= 0:
            raise ConfigError("min_lease_ttl: must be > 0")
        if self.retry_base < 0 or self.retry_cap < self.retry_base:
            raise ConfigError("retry_base/retry_cap: need 0 <= retry_base <= retry_cap")
        if self.dispatch_quantum < 1:
            raise ConfigError("dispatch_quantum: must be >= 1 (a visit serves at least a task)")
        if self.aging < 0:
            raise ConfigError("aging: must be >= 0 seconds (0 = off)")
        if self.max_result_bytes < 1:
            raise ConfigError("max_result_bytes: must be >= 1 (a result of None is 1 byte)")
        if self.max_retries < 0:
            raise ConfigError("max_retries: must be >= 0")
        if self.durability not in DURABILITY:
            raise ConfigError(
                f"durability: {self.durability!r} is not one of {', '.join(DURABILITY)}"
            )
        if self.metrics not in METRICS:
            raise ConfigError(f"metrics: {self.metrics!r} is not one of {', '.join(METRICS)}")
        if self.otel not in OTEL_MODES:
            raise ConfigError(f"otel: {self.otel!r} is not one of {', '.join(OTEL_MODES[1:])}")
        if self.durability_replicas < 0:
            raise ConfigError("durability_replicas: must be >= 0")
        if self.durability_timeout <= 0:
            raise ConfigError("durability_timeout: must be > 0 seconds")
        if not self.prefix or any(c in self.prefix for c in "{} "):
            raise ConfigError("prefix: must be non-empty without '{', '}' or spaces")

    def task_defaults(self) -> dict[str, Any]:
        """What a job's task leaves out: retries and the retry backoff (a job's
        backoff is checked against them: ``JobSpec.check_backoff``)."""
        return {
            "retries": self.max_retries,
            "retry_base": self.retry_base,
            "retry_cap": self.retry_cap,
        }

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Build settings from ``REDCRON_<FIELD>`` variables, then ``overrides``.

        ``None`` overrides are ignored (so CLI flags left unset fall through).
        The Redis URL, when neither names it, is the one a running ``redcron up``
        in the working directory or a parent of it recorded, else
        :data:`DEFAULT_REDIS_URL` (:func:`find_redis_url`; an ``App`` says
        which, once per process, when it first connects: :func:`announce_redis_url`).
        """
        env = os.environ if env is None else env
        fields = {f.name: f for f in dataclasses.fields(cls)}
        values: dict[str, Any] = {}
        for name, field in fields.items():
            raw = env.get(f"REDCRON_{name.upper()}")
            if raw is not None and raw != "":
                values[name] = _coerce(name, field.type, raw)
        if "redis_url" not in values and overrides.get("redis_url") is None:
            # the environment was read above: not there
            values["redis_url"] = find_redis_url(env={}).url
        for name, value in overrides.items():
            if name not in fields:
                raise ConfigError(f"unknown setting {name!r}; known: {', '.join(fields)}")
            if value is not None:
                values[name] = value
        return cls(**values)


def _coerce(name: str, typ: Any, raw: str) -> Any:
    kind = typ if isinstance(typ, str) else getattr(typ, "__name__", str(typ))
    kind = kind.removesuffix(" | None")
    try:
        if kind in ("int", "float") and not raw.isascii():
            raise ValueError(raw)  # int() and float() read "٣" and fullwidth digits
        if kind == "int":
            return int(raw)
        if kind == "float":
            return float(raw)
    except ValueError:
        raise ConfigError(f"REDCRON_{name.upper()}={raw!r}: expected a {kind}") from None
    return raw


RedisUrlSource = Literal["given", "env", "file", "default"]


@dataclass(frozen=True)
class RedisUrlChoice:
    """The Redis URL a process uses, and why (:func:`find_redis_url`).

    Attributes:
        url: the URL.
        source: ``given`` (``--redis``, ``App(url)``), ``env``
            (``REDCRON_REDIS_URL``), ``file`` (a running ``redcron up``'s
            ``.redcron/redis.url``) or ``default`` (none of them).
        path: the ``.redcron/redis.url`` read, for ``file``.
        start: the directory the search for that file began in.
    """

    url: str
    source: RedisUrlSource
    path: Path | None = None
    start: Path | None = None

    def describe(self) -> str:
        """The URL (password masked) and where it came from, in one line."""
        shown = masked_url(self.url)
        if self.source == "given":
            return f"{shown} (given: --redis or App(url))"
        if self.source == "env":
            return f"{shown} (from REDCRON_REDIS_URL)"
        if self.source == "file":
            return f"{shown} (from {self.path}, written by the `redcron up` running there)"
        return f"{shown} ({self._nothing_found()}: the default)"

    def notice(self) -> str:
        """What a process says about this choice (:func:`announce_redis_url`)."""
        if self.source == "file":
            return f"using {masked_url(self.url)} from {self.path}"
        return f"{self._nothing_found()}; using {masked_url(self.url)}"

    def _nothing_found(self) -> str:
        return f"no REDCRON_REDIS_URL and no {LOCAL_URL_FILE} found from {self.start} up"


def find_redis_url(
    given: str | None = None, env: Mapping[str, str] | None = None, start: Path | None = None
) -> RedisUrlChoice:
    """The Redis URL to use: ``given``, else ``REDCRON_REDIS_URL`` in ``env``,
    else the URL in ``.redcron/redis.url`` of ``start`` (the working
    directory) or the nearest parent that has one whose ``redcron up`` is
    still running (as git finds ``.git``, up to the filesystem root), else
    :data:`DEFAULT_REDIS_URL`.  A file an ``up`` that crashed left is skipped
    with a warning (:func:`read_local_url`).
    """
    if given is not None:
        return RedisUrlChoice(given, "given")
    env = os.environ if env is None else env
    if env.get("REDCRON_REDIS_URL"):
        return RedisUrlChoice(env["REDCRON_REDIS_URL"], "env")
    here = Path.cwd() if start is None else start
    for directory in (here, *here.parents):
        url = read_local_url(directory)
        if url is not None:
            return RedisUrlChoice(url, "file", directory / LOCAL_URL_FILE, here)
    return RedisUrlChoice(DEFAULT_REDIS_URL, "default", start=here)


@dataclass
class _Notice:
    """Whether the process said which Redis it uses, and where it says it."""

    said: bool = False
    #: (level, text) -> None; None: the log (the library's); the CLI says it on stderr
    sink: Callable[[int, str], None] | None = None


_NOTICE = _Notice()


def announce_redis_url(choice: RedisUrlChoice) -> None:
    """Say once per process which Redis it uses when nobody named one: a
    WARNING for the default (a Redis that may belong to something else), INFO
    for a ``redcron up``'s file found in a parent directory, DEBUG for one in
    the working directory; nothing for a URL given or in the environment."""
    if choice.source in ("given", "env") or _NOTICE.said:
        return
    _NOTICE.said = True
    if choice.source == "default":
        level = logging.WARNING
    elif choice.path is not None and choice.path.parent.parent == choice.start:
        level = logging.DEBUG
    else:
        level = logging.INFO
    if _NOTICE.sink is not None:
        _NOTICE.sink(level, choice.notice())
    else:
        log.log(level, "%s", choice.notice())


@contextmanager
def redis_url_notices(sink: Callable[[int, str], None]) -> Iterator[None]:
    """Send :func:`announce_redis_url`'s notice to ``sink`` (level, text)
    instead of the log while in the block: the CLI prints it on stderr."""
    before = _NOTICE.sink
    _NOTICE.sink = sink
    try:
        yield
    finally:
        _NOTICE.sink = before


def read_local_url(directory: Path | None = None) -> str | None:
    """The URL of the Redis a running ``redcron up`` in ``directory`` (the
    working directory) started, or None.

    A file left behind by an ``up`` that crashed is ignored (with a warning):
    the pid it records must still be running.
    """
    path = (Path.cwd() if directory is None else directory) / LOCAL_URL_FILE
    try:
        lines = path.read_text(encoding="utf-8").split()
    except OSError:
        return None
    if len(lines) < 2 or not ascii_digits(lines[1]):
        log.warning("ignoring %s: expected a URL and a pid, one a line", path)
        return None
    url, pid = lines[0], int(lines[1])
    if not pid_running(pid):
        log.warning(
            "ignoring %s: the redis-server it names (pid %d, %s) is not running "
            "(a `redcron up` that crashed?); delete the file or start `redcron up` again",
            path,
            pid,
            masked_url(url),
        )
        return None
    return url


def write_local_url(url: str, pid: int, data_dir: Path = DATA_DIR) -> Path:
    """Record ``url`` (served by process ``pid``) in ``data_dir``: for
    :func:`read_local_url` when it is the working directory's :data:`DATA_DIR`."""
    return write_private_file(Path(LOCAL_URL_NAME), f"{url}\n{pid}\n", data_dir)


def write_private_file(name: Path, text: str, directory: Path | None = None) -> Path:
    """Write ``text`` to ``name`` under ``directory`` (the working directory), as
    ``redcron up`` does for the commands run next to it: whole (readers never
    see half a file), readable by its owner only."""
    path = (Path.cwd() if directory is None else directory) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    # 0600 from the start (never readable by others, not even for a moment); fchmod
    # too, for a tmp file an earlier crash left with other bits
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        os.fchmod(f.fileno(), 0o600)
        f.write(text)
    tmp.replace(path)
    return path


def remove_local_url(pid: int, data_dir: Path = DATA_DIR) -> None:
    """Remove the record :func:`write_local_url` made for ``pid`` in ``data_dir``;
    a record another ``up`` has written since is left alone."""
    path = data_dir / LOCAL_URL_NAME
    try:
        lines = path.read_text(encoding="utf-8").split()
        if lines[1:2] == [str(pid)]:
            path.unlink()
    except OSError:
        pass


def pid_running(pid: int) -> bool:
    """True while process ``pid`` exists (another user's included)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, but another user's
        return True
    return True
