"""Lua script loader: includes resolved at load time, called by SHA, NOSCRIPT reloads.

Each ``lua/<name>.lua`` becomes one :class:`redis.commands.core.Script`.  A
line ``-- @include lib/x.lua`` is replaced by that file (its own includes
first, each file once); the generated key
builders of :func:`redcron.keys.lua_key_functions`, state sets of
:func:`redcron.model.states.lua_state_tables` and named hash readers of
:func:`redcron.model.fields.lua_readers` go first, so scripts build keys from
``KEYS[1]`` (the shard prefix) exactly as ``keys.py`` does, decide which
states are terminal exactly as ``states.py`` does, and read wide hashes by
field name (``f.max_attempts``), never by position.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

import redis
import redis.cluster
from redis.commands.core import Script

from redcron.engine.connection import is_cluster, node_of_key, raise_unreachable
from redcron.engine.replies import error_of_reply
from redcron.errors import ConnectionLost, NotReplicated
from redcron.keys import lua_key_functions
from redcron.model.fields import lua_readers
from redcron.model.states import lua_state_tables

SCRIPT_NAMES: tuple[str, ...] = (
    "enqueue",
    "enqueue_check",
    "lease",
    "start",
    "heartbeat",
    "progress",
    "complete",
    "fail",
    "release",
    "reap",
    "promote",
    "follow_ends",
    "follow_runs",
    "follow_chain",
    "follow_cancel",
    "map_expand",
    "cancel",
    "dlq_replay",
    "dlq_discard",
    "dlq_prune",
    "dlq_unindex",
    "tenant_unpark",
    "watch",
    "inputs",
    "fire",
    "fire_batch",
    "job_put",
    "job_pause",
    "job_park",
    "job_delete",
    "run_cancel",
    "run_retry",
    "beat_own",
    "deadline_sweep",
    "notify_enqueue",
    "notify_digest_add",
    "notify_flush",
    "notify_claim",
    "notify_record",
    "channel_add",
)

_INCLUDE = re.compile(r"^-- @include (\S+)\s*$", re.MULTILINE)


def _expand(name: str) -> list[tuple[str, bool]]:
    """The script's lines with every include inlined once, each marked whether it
    comes from a library (an include) rather than the script's own file.

    An include names what it needs with its own ``-- @include`` lines at its top,
    so inlining depth-first puts every library after the ones it uses (a Lua
    ``local`` is visible only below its definition); a library already inlined
    is not inlined again, and a cycle is an error.
    """
    root = resources.files("redcron") / "lua"
    done: set[str] = set()
    open_: list[str] = []

    def lines_of(path: str, lib: bool) -> list[tuple[str, bool]]:
        open_.append(path)
        out: list[tuple[str, bool]] = []
        for line in (root / path).read_text().splitlines():
            match = _INCLUDE.match(line)
            if match is None:
                out.append((line, lib))
            elif match.group(1) in open_:
                raise ValueError(f"include cycle: {' -> '.join([*open_, match.group(1)])}")
            elif match.group(1) not in done:
                out += lines_of(match.group(1), True)
        done.add(open_.pop())
        return out

    return lines_of(f"{name}.lua", False)


@cache
def source(name: str) -> str:
    """The full source of script ``name`` with every include inlined (unpruned)."""
    return "\n".join(line for line, _lib in _expand(name)) + "\n"


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DEFINES = re.compile(r"^local function ([A-Za-z_]\w*)|^local ([A-Za-z_][\w, ]*?)\s*=")
_CONTINUES = ("end", "}", "else", "elseif", "until", ")")


@dataclass
class _Unit:
    """One top-level statement of the library (a function, a local, a comment)."""

    lines: list[str] = field(default_factory=list)
    lib: bool = True

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    def defines(self) -> set[str]:
        head = self.lines[0]
        match = _DEFINES.match(head)
        if match:
            names = match.group(1) or match.group(2)
            return {n.strip() for n in names.split(",")}
        return set()


def _units(lines: list[tuple[str, bool]]) -> list[_Unit]:
    """Split at top-level statements: a library line at column 0 starts a unit
    (block comments are one unit); the script's own lines are one unit each."""
    units: list[_Unit] = []
    in_comment = False
    for line, lib in lines:
        starts = not lib or (
            in_comment is False and line[:1].strip() != "" and not line.startswith(_CONTINUES)
        )
        if in_comment or not starts:
            units[-1].lines.append(line)
        else:
            units.append(_Unit([line], lib))
        if line.lstrip().startswith("--[[") and "]]" not in line:
            in_comment = True
        elif in_comment and "]]" in line:
            in_comment = False
    return units


def _prune(units: list[_Unit]) -> str:
    """Keep the script's own code and what it uses of the libraries, in order.

    Every script runs its whole chunk on every call, library definitions
    included: defining ~150 functions and tables cost ~50 us a call, more
    than a small script's own work.  A library unit stays when a name it
    defines is used by what stays; a statement that defines nothing stays;
    library comments go.

    The includes' declared dependencies cannot replace this (issue 17 §6):
    the generated Lua alone defines 203 top-level locals, past Lua's limit of
    200 per function, so it cannot be loaded whole, and listing by hand which
    generated names a script uses would type them twice; and an include is a
    file of one concern, not one function, so whole files would load 10-19
    functions a script never calls (measured +2.6 us a complete call, +11.5
    us a lease call).  One function per file would be ~130 files to get what
    this does from actual use.
    """
    used: set[str] = set()
    keep = [not u.lib for u in units]
    for i, u in enumerate(units):
        if not u.lib:
            used |= set(_IDENT.findall(u.text))
        elif not u.defines() and not u.text.lstrip().startswith("--"):
            keep[i] = True
            used |= set(_IDENT.findall(u.text))
    changed = True
    while changed:
        changed = False
        for i, u in enumerate(units):
            if keep[i] or not u.lib:
                continue
            if u.defines() & used:
                keep[i] = changed = True
                used |= set(_IDENT.findall(u.text))
    return "\n".join(u.text for u, k in zip(units, keep, strict=True) if k) + "\n"


@cache
def generated() -> str:
    """The Lua generated from Python definitions, ahead of every script: key
    builders (keys.py), state sets (model/states.py), named hash reads
    (model/fields.py)."""
    return lua_key_functions() + lua_state_tables() + lua_readers()


@cache
def full_source(name: str) -> str:
    """What is loaded into Redis: the generated Lua, the includes and the
    script, pruned to what the script uses."""
    lines = [(line, True) for line in generated().splitlines()]
    return _prune(_units(lines + _expand(name)))


@dataclass(frozen=True)
class Wait:
    """``durability="strict"``: ``WAIT replicas timeout_ms`` after an acknowledging
    write, on the connection that wrote (WAIT waits for that connection's writes).

    On a Redis Cluster each master replicates its own writes: a pipeline of
    writes to several masters sends one ``WAIT`` to each (:meth:`Scripts.queue_waits`),
    in the pipeline, so on the connection that carried that master's writes."""

    replicas: int
    timeout_ms: int

    def command(self) -> tuple[Any, ...]:
        return ("WAIT", self.replicas, self.timeout_ms)

    def check_all(self, replies: list[Any], what: str) -> None:
        """:meth:`check` each ``WAIT`` reply (one per master written to)."""
        for reply in replies:
            self.check(reply, what)

    def check(self, reply: Any, what: str) -> None:
        """Raise :class:`NotReplicated` unless ``reply`` (WAIT's) counts enough replicas."""
        if isinstance(reply, Exception):
            raise NotReplicated(f"{what}: WAIT failed ({reply}); the write is not confirmed")
        if int(reply) < self.replicas:
            raise NotReplicated(
                f"{what}: written on the master, but {int(reply)} of the {self.replicas} "
                f"replicas asked for confirmed it within {self.timeout_ms}ms "
                "(durability=strict); it may be lost if the master fails now"
            )


class Scripts:
    """The loaded scripts of one client; ``scripts.run("lease", keys, args)`` runs one.

    redis-py's :class:`Script` computes the SHA and, called directly, sends
    ``EVALSHA`` and loads the script on ``NOSCRIPT``.  On a pipeline it would
    also make every execute send ``SCRIPT EXISTS`` first, a round trip per
    batch on the worker's hot path (a measured throughput loss), so a pipeline
    gets a plain ``EVALSHA`` and :meth:`rerun_missing` handles ``NOSCRIPT``.
    """

    def __init__(self, client: redis.Redis) -> None:
        self._client = client
        self._scripts: dict[str, Script] = {
            name: client.register_script(full_source(name)) for name in SCRIPT_NAMES
        }

    def script(self, name: str) -> Script:
        return self._scripts[name]

    def run(self, name: str, keys: list[str], args: list[Any], client: Any = None) -> Any:
        """Run a script (queue it, on a pipeline ``client``); a Lua error
        ``"CODE msg"`` becomes the exception ``errors.CODES`` maps it to, a
        server-state reply (``CLUSTERDOWN``...) :class:`RedisUnavailable`
        (:func:`~redcron.engine.replies.error_of_reply`)."""
        script = self._scripts[name]
        try:
            if client is None:
                try:
                    return self._client.evalsha(script.sha, len(keys), *keys, *args)
                except redis.exceptions.NoScriptError:
                    self.load(script.script)
                    return self._client.evalsha(script.sha, len(keys), *keys, *args)
            return client.evalsha(script.sha, len(keys), *keys, *args)
        except redis.ConnectionError as exc:
            raise ConnectionLost(str(exc)) from exc
        except (redis.ResponseError, redis.exceptions.ClusterError) as exc:
            raise error_of_reply(exc) from exc

    def run_replicated(self, name: str, keys: list[str], args: list[Any], wait: Wait) -> Any:
        """:meth:`run`, then ``WAIT`` on the same connection (one pipeline, one
        round trip); :class:`NotReplicated` if the replicas did not confirm in time.

        A script error is raised first: a refused call wrote nothing.
        """
        script = self._scripts[name]
        pipe = self._client.pipeline(transaction=False)
        pipe.evalsha(script.sha, len(keys), *keys, *args)
        stack = list(pipe.command_stack)
        waits = self.queue_waits(pipe, stack, wait)
        try:
            results = pipe.execute(raise_on_error=False)
            raise_unreachable(results)
            waited = self.take_waits(pipe, results, waits)
            # NOSCRIPT: nothing ran, so that WAIT confirmed nothing; the re-run's counts
            rewaited = self.rerun_missing(stack, results, wait)
        except redis.ConnectionError as exc:
            raise ConnectionLost(str(exc)) from exc
        reply = results[0]
        if isinstance(reply, redis.ResponseError):
            raise error_of_reply(reply) from reply
        try:
            wait.check_all(waited if rewaited is None else rewaited, name)
        except NotReplicated as exc:
            exc.results = [reply]  # the write happened: what it answered (ids...)
            raise
        return reply

    def queue_waits(self, pipe: Any, calls: list[Any], wait: Wait) -> int:
        """Queue ``wait``'s ``WAIT`` on ``pipe`` after ``calls`` (its queued
        ``(args, options)`` that need confirming); returns how many were queued.

        One server: one ``WAIT``.  A cluster: one per master the calls' first
        keys map to (``target_nodes``), each after that master's writes on the
        same connection (redis-py sends a node's share of a pipeline on one).
        """
        if not is_cluster(self._client):
            pipe.execute_command(*wait.command())
            return 1
        nodes: dict[str, Any] = {}
        for args, _options in calls:
            if args[0] == "EVALSHA" and int(args[2]) > 0:
                node = node_of_key(self._client, args[3])
                nodes[node.name] = node
        for node in nodes.values():
            pipe.execute_command(*wait.command(), target_nodes=node)
        return len(nodes)

    @staticmethod
    def take_waits(pipe: Any, results: list[Any], waits: int) -> list[Any]:
        """The ``WAIT`` replies :meth:`queue_waits` queued, taken off the end of
        ``results``.  A cluster pipeline that sent a call again on its own (its
        slot moved: ``MOVED``/``ASK``/``TRYAGAIN``) ran it on another connection,
        which no queued ``WAIT`` covers: an error reply stands for it, so the
        write is reported as not confirmed rather than confirmed by mistake."""
        waited = results[len(results) - waits :]
        del results[len(results) - waits :]
        if getattr(pipe, "redirected", False):
            waited.append(
                redis.exceptions.ClusterError(
                    "a call was redirected to another node or connection while its "
                    "slot moved, so no WAIT covers it"
                )
            )
        return waited

    def load(self, source: str | bytes | memoryview) -> None:
        """``SCRIPT LOAD`` ``source``: on a cluster on every master that answers,
        one at a time.  redis-py sends it to every master at once and fails as
        a whole when one is down, so a process would run no script on any
        master until that one is back; a master that was down loads it on its
        own ``NOSCRIPT`` later (it restarts with an empty script cache anyway).
        Raises when no master answers."""
        client: Any = self._client
        if not is_cluster(client):
            client.script_load(source)
            return
        failure: Exception | None = None
        loaded = False
        for node in client.get_primaries():
            try:
                client.execute_command("SCRIPT LOAD", source, target_nodes=node)
                loaded = True
            except (ConnectionLost, redis.ConnectionError, redis.TimeoutError) as exc:
                failure = exc
        if not loaded and failure is not None:
            raise failure

    def _by_sha(self) -> dict[str, Script]:
        return {s.sha: s for s in self._scripts.values()}

    def ensure_loaded(self, stack: list[Any]) -> None:
        """Load the scripts a queued pipeline calls that the server does not hold."""
        shas = list({args[1] for args, _options in stack if args[0] == "EVALSHA"})
        if not shas:
            return
        by_sha = self._by_sha()
        client: Any = self._client
        if not is_cluster(client):
            for sha, present in zip(shas, client.script_exists(*shas), strict=True):
                if not present and sha in by_sha:
                    client.script_load(by_sha[sha].script)
            return
        # each master on its own (redis-py asks all at once, and fails as a whole
        # when one is down): a master that does not answer is skipped, its
        # shards' calls fail anyway; raises when none answers
        failure: Exception | None = None
        answered = False
        for node in client.get_primaries():
            try:
                present = client.execute_command("SCRIPT EXISTS", *shas, target_nodes=node)
                for sha, there in zip(shas, present, strict=True):
                    if not there and sha in by_sha:
                        client.execute_command("SCRIPT LOAD", by_sha[sha].script, target_nodes=node)
                answered = True
            except (ConnectionLost, redis.ConnectionError, redis.TimeoutError) as exc:
                failure = exc
        if not answered and failure is not None:
            raise failure

    def rerun_missing(
        self, stack: list[Any], results: list[Any], wait: Wait | None = None
    ) -> list[Any] | None:
        """Re-run, in place, the pipelined script calls that found no script.

        ``stack`` is the pipeline's command stack as it was before execute.  A
        ``NOSCRIPT`` reply means that call did nothing, so loading the script and
        running the call again is exactly once (a new master after a failover,
        or a restarted server, holds no scripts: Redis 7 does not replicate the
        script cache).  The calls run again in one pipeline, with ``wait``'s
        ``WAIT`` (one per master on a cluster) last when given; returns their
        replies (None: nothing re-ran, or no ``wait``).
        """
        by_sha = self._by_sha()
        again: list[int] = []
        for i, res in enumerate(results):
            if isinstance(res, redis.exceptions.NoScriptError) and stack[i][0][1] in by_sha:
                again.append(i)
        if not again:
            return None
        for sha in {stack[i][0][1] for i in again}:
            self.load(by_sha[sha].script)
        pipe = self._client.pipeline(transaction=False)
        for i in again:
            args, _options = stack[i]  # ("EVALSHA", sha, numkeys, *keys_and_args)
            pipe.evalsha(args[1], args[2], *args[3:])
        waits = self.queue_waits(pipe, [stack[i] for i in again], wait) if wait else 0
        replies = pipe.execute(raise_on_error=False)
        raise_unreachable(replies)
        waited = self.take_waits(pipe, replies, waits) if wait else None
        for i, reply in zip(again, replies, strict=True):
            results[i] = reply
        return waited
