"""Settings: a frozen dataclass; defaults < environment (``REDCRON_*``) < explicit values.

Nothing is read from the environment at import time: call
:meth:`Settings.from_env`.  Unknown keys raise instead of being ignored.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from redcron.errors import ConfigError
from redcron.redact import masked_url

log = logging.getLogger(__name__)

#: the last resort of the Redis URL order: --redis > REDCRON_REDIS_URL > the
#: Redis a running ``redcron up`` in this directory started > this
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"

#: where ``redcron up`` records the embedded Redis it started (relative to its
#: working directory): the URL on the first line, the server's pid on the second
LOCAL_URL_FILE = Path(".redcron") / "redis.url"

SENTINEL_SCHEME = "redis+sentinel"
#: Redis Cluster through redis-py's RedisCluster; ``rediss+`` is the TLS one
CLUSTER_SCHEMES = ("redis+cluster", "rediss+cluster")
REDIS_SCHEMES = ("redis", "rediss", "unix", SENTINEL_SCHEME)
_URL_FORMS = (
    "expected redis://[[user]:password@]host[:port][/db], rediss://... (TLS), "
    "unix:///path/to/redis.sock, "
    "redis+sentinel://[[user]:password@]host[:port][,host[:port]...]/master-name[/db] or "
    "redis+cluster://[[user]:password@]host[:port][,host[:port]...] (rediss+cluster:// TLS)"
)
#: the port of a sentinel named without one
SENTINEL_PORT = 26379
#: the port of a cluster node named without one
CLUSTER_PORT = 6379
#: query fields of a sentinel URL that are for the sentinels, not the master
SENTINEL_QUERY = ("sentinel_username", "sentinel_password")

DURABILITY = ("normal", "strict")

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
    container_runtime: str = "docker"
    dispatch_quantum: float = 1.0
    aging: float = 60.0
    durability: str = "normal"
    durability_replicas: int = 1
    durability_timeout: float = 1.0

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
        if self.max_retries < 0:
            raise ConfigError("max_retries: must be >= 0")
        if self.durability not in DURABILITY:
            raise ConfigError(
                f"durability: {self.durability!r} is not one of {', '.join(DURABILITY)}"
            )
        if self.durability_replicas < 0:
            raise ConfigError("durability_replicas: must be >= 0")
        if self.durability_timeout <= 0:
            raise ConfigError("durability_timeout: must be > 0 seconds")
        if not self.prefix or any(c in self.prefix for c in "{} "):
            raise ConfigError("prefix: must be non-empty without '{', '}' or spaces")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Build settings from ``REDCRON_<FIELD>`` variables, then ``overrides``.

        ``None`` overrides are ignored (so CLI flags left unset fall through).
        The Redis URL, when neither names it, is the one a running ``redcron up``
        in the working directory recorded (:func:`read_local_url`), else
        :data:`DEFAULT_REDIS_URL`.
        """
        env = os.environ if env is None else env
        fields = {f.name: f for f in dataclasses.fields(cls)}
        values: dict[str, Any] = {}
        for name, field in fields.items():
            raw = env.get(f"REDCRON_{name.upper()}")
            if raw is not None and raw != "":
                values[name] = _coerce(name, field.type, raw)
        if "redis_url" not in values and overrides.get("redis_url") is None:
            local = read_local_url()
            if local is not None:
                values["redis_url"] = local
        for name, value in overrides.items():
            if name not in fields:
                raise ConfigError(f"unknown setting {name!r}; known: {', '.join(fields)}")
            if value is not None:
                values[name] = value
        return cls(**values)


def _digits(text: str) -> bool:
    """ASCII digits only: ``str.isdigit`` is also true of "²" (which ``int`` then
    refuses), and ``int`` reads "٣" and fullwidth digits."""
    return text.isascii() and text.isdigit()


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


def check_redis_url(url: str) -> None:
    """Refuse a URL redis-py cannot connect with, naming it (without password).

    Raises:
        ConfigError: an unknown scheme, a bad port, a database that is not a number.
    """
    shown = repr(masked_url(url))
    if url.startswith(f"{SENTINEL_SCHEME}://"):
        parse_sentinel_url(url)
        return
    if is_cluster_url(url):
        parse_cluster_url(url)
        return
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 -- parsing the port is the check (out of range, not a number)
    except ValueError as exc:
        raise ConfigError(f"redis_url {shown}: {exc}; {_URL_FORMS}") from None
    if parts.scheme not in REDIS_SCHEMES:
        what = f"scheme {parts.scheme + '://'!r}" if "://" in url else "no scheme"
        raise ConfigError(f"redis_url {shown}: {what} is not Redis; {_URL_FORMS}")
    if parts.scheme == "unix":
        if not parts.path:
            raise ConfigError(f"redis_url {shown}: no socket path; {_URL_FORMS}")
    elif parts.path.strip("/") and not _digits(parts.path.strip("/")):
        raise ConfigError(f"redis_url {shown}: database must be a number; {_URL_FORMS}")


@dataclass(frozen=True)
class SentinelURL:
    """A ``redis+sentinel://`` URL taken apart.

    Attributes:
        sentinels: (host, port) of each sentinel, in the order given.
        master: the master name the sentinels monitor.
        db: the database number.
        username, password: the master's (and its replicas') credentials.
        sentinel_username, sentinel_password: the sentinels' own, when they
            ask for some (``?sentinel_password=...``).
        query: the other query fields (redis-py's connection options, such as
            ``socket_timeout``), for the master connections.
    """

    sentinels: tuple[tuple[str, int], ...]
    master: str
    db: int = 0
    username: str | None = None
    password: str | None = None
    sentinel_username: str | None = None
    sentinel_password: str | None = None
    query: tuple[tuple[str, str], ...] = ()


def parse_sentinel_url(url: str) -> SentinelURL:
    """Take apart ``redis+sentinel://[[user]:password@]host[:port][,host[:port]...]/master[/db]``.

    Raises:
        ConfigError: no sentinel, a bad port, no master name, a database that is
            not a number (named without the password).
    """
    shown = repr(masked_url(url))
    rest = url[len(SENTINEL_SCHEME) + 3 :]
    rest, _, query = rest.partition("?")
    netloc, _, path = rest.partition("/")
    userinfo, at, hosts = netloc.rpartition("@")
    username = password = None
    if at:
        user, colon, pw = userinfo.partition(":")
        username = unquote(user) or None
        password = unquote(pw) if colon else None
    sentinels: list[tuple[str, int]] = []
    for item in hosts.split(","):
        host, port = _host_port(item.strip(), shown)
        sentinels.append((host, port))
    master, _, db = path.strip("/").partition("/")
    if not master:
        raise ConfigError(f"redis_url {shown}: no master name; {_URL_FORMS}")
    if db and not _digits(db):
        raise ConfigError(f"redis_url {shown}: database must be a number; {_URL_FORMS}")
    fields = parse_qsl(query, keep_blank_values=True)
    own = {k: v for k, v in fields if k in SENTINEL_QUERY}
    return SentinelURL(
        sentinels=tuple(sentinels),
        master=unquote(master),
        db=int(db or 0),
        username=username,
        password=password,
        sentinel_username=own.get("sentinel_username") or None,
        sentinel_password=own.get("sentinel_password") or None,
        query=tuple((k, v) for k, v in fields if k not in SENTINEL_QUERY),
    )


def _host_port(
    item: str, shown: str, what: str = "sentinel", default: int = SENTINEL_PORT
) -> tuple[str, int]:
    if not item:
        raise ConfigError(f"redis_url {shown}: a {what} address is empty; {_URL_FORMS}")
    try:
        parts = urlsplit(f"//{item}")
        port = parts.port
    except ValueError as exc:
        raise ConfigError(f"redis_url {shown}: {exc}; {_URL_FORMS}") from None
    if not parts.hostname:
        raise ConfigError(f"redis_url {shown}: {what} {item!r} has no host; {_URL_FORMS}")
    return parts.hostname, default if port is None else port


def is_cluster_url(url: str) -> bool:
    """Whether ``url`` names a Redis Cluster (``redis+cluster://``, ``rediss+cluster://``)."""
    return url.partition("://")[0] in CLUSTER_SCHEMES


@dataclass(frozen=True)
class ClusterURL:
    """A ``redis+cluster://`` URL taken apart.

    Attributes:
        nodes: (host, port) of each startup node, in the order given; redis-py
            asks the first that answers for the slot map (``CLUSTER SLOTS``)
            and finds the others from it.
        tls: ``rediss+cluster://``.
        username, password: every node's credentials.
        query: the other query fields (redis-py's connection options, such as
            ``socket_timeout``), for every node's connections.
    """

    nodes: tuple[tuple[str, int], ...]
    tls: bool = False
    username: str | None = None
    password: str | None = None
    query: tuple[tuple[str, str], ...] = ()


def parse_cluster_url(url: str) -> ClusterURL:
    """Take apart ``redis+cluster://[[user]:password@]host[:port][,host[:port]...][?query]``.

    A cluster has one database (0): a path other than ``/`` or ``/0`` is refused.

    Raises:
        ConfigError: no node, a bad port, a database (named without the password).
    """
    shown = repr(masked_url(url))
    scheme, _, rest = url.partition("://")
    rest, _, query = rest.partition("?")
    netloc, _, path = rest.partition("/")
    userinfo, at, hosts = netloc.rpartition("@")
    username = password = None
    if at:
        user, colon, pw = userinfo.partition(":")
        username = unquote(user) or None
        password = unquote(pw) if colon else None
    nodes = tuple(
        _host_port(item.strip(), shown, "cluster node", CLUSTER_PORT) for item in hosts.split(",")
    )
    if path.strip("/") not in ("", "0"):
        raise ConfigError(f"redis_url {shown}: a Redis Cluster has only database 0; {_URL_FORMS}")
    return ClusterURL(
        nodes=nodes,
        tls=scheme == "rediss+cluster",
        username=username,
        password=password,
        query=tuple(parse_qsl(query, keep_blank_values=True)),
    )


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
    if len(lines) < 2 or not _digits(lines[1]):
        log.warning("ignoring %s: expected a URL and a pid, one a line", path)
        return None
    url, pid = lines[0], int(lines[1])
    if not _running(pid):
        log.warning(
            "ignoring %s: the redis-server it names (pid %d, %s) is not running "
            "(a `redcron up` that crashed?); delete the file or start `redcron up` again",
            path,
            pid,
            masked_url(url),
        )
        return None
    return url


def write_local_url(url: str, pid: int, directory: Path | None = None) -> Path:
    """Record ``url`` (served by process ``pid``) for :func:`read_local_url`."""
    return write_private_file(LOCAL_URL_FILE, f"{url}\n{pid}\n", directory)


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


def remove_local_url(pid: int, directory: Path | None = None) -> None:
    """Remove the record :func:`write_local_url` made for ``pid``; a record
    another ``up`` has written since is left alone."""
    path = (Path.cwd() if directory is None else directory) / LOCAL_URL_FILE
    try:
        lines = path.read_text(encoding="utf-8").split()
        if lines[1:2] == [str(pid)]:
            path.unlink()
    except OSError:
        pass


def _running(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, but another user's
        return True
    return True
