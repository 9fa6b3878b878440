"""Redis URLs: which forms redcron connects with, taken apart and checked.

``redis://``, ``rediss://`` and ``unix://`` go to redis-py as they are;
``redis+sentinel://`` and ``redis+cluster://`` (``rediss+cluster://``) name
several hosts and are taken apart here (:class:`SentinelURL`,
:class:`ClusterURL`).  Errors name the URL without its password.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qsl, unquote, urlsplit

from redcron.errors import ConfigError
from redcron.redact import masked_url

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
    if "://" not in url:
        raise ConfigError(_no_scheme(url))
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 -- parsing the port is the check (out of range, not a number)
    except ValueError as exc:
        raise ConfigError(f"redis_url {shown}: {exc}; {_URL_FORMS}") from None
    if parts.scheme not in REDIS_SCHEMES:
        raise ConfigError(
            f"redis_url {shown}: scheme {parts.scheme + '://'!r} is not Redis; {_URL_FORMS}"
        )
    if parts.scheme == "unix":
        if not parts.path:
            raise ConfigError(f"redis_url {shown}: no socket path; {_URL_FORMS}")
    elif parts.path.strip("/") and not ascii_digits(parts.path.strip("/")):
        raise ConfigError(f"redis_url {shown}: database must be a number; {_URL_FORMS}")


def _no_scheme(url: str) -> str:
    """The error for ``host:port[/db]`` written without ``redis://``: the URL it
    most likely means, written out (``localhost:6379`` is not even a host
    to redis-py: it reads ``localhost`` as the scheme)."""
    if not url.strip():
        return "redis_url '': empty; write e.g. redis://localhost:6379/0"
    if url.startswith("/"):  # a socket's path
        return f"redis_url {url!r}: no scheme; write unix://{url} (or redis://host:port/0)"
    meant = urlsplit(f"redis://{url}")
    if not meant.path.strip("/"):
        meant = meant._replace(path="/0")
    fixed = masked_url(meant.geturl())
    # masked as the URL it means: bare, urlsplit finds no password to hide
    shown = masked_url(f"redis://{url}").removeprefix("redis://")
    return (
        f"redis_url {shown!r}: no scheme; write {fixed} "
        "(or rediss:// for TLS, unix:// for a socket)"
    )


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
    username, password, hosts = _credentials(netloc)
    sentinels: list[tuple[str, int]] = []
    for item in hosts.split(","):
        host, port = _host_port(item.strip(), shown)
        sentinels.append((host, port))
    master, _, db = path.strip("/").partition("/")
    if not master:
        raise ConfigError(f"redis_url {shown}: no master name; {_URL_FORMS}")
    if db and not ascii_digits(db):
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
    username, password, hosts = _credentials(netloc)
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


def ascii_digits(text: str) -> bool:
    """ASCII digits only: ``str.isdigit`` is also true of "²" (which ``int`` then
    refuses), and ``int`` reads "٣" and fullwidth digits."""
    return text.isascii() and text.isdigit()


def _credentials(netloc: str) -> tuple[str | None, str | None, str]:
    """``[[user]:password@]hosts`` taken apart: (username, password, hosts)."""
    userinfo, at, hosts = netloc.rpartition("@")
    if not at:
        return None, None, hosts
    user, colon, pw = userinfo.partition(":")
    return unquote(user) or None, unquote(pw) if colon else None, hosts
