"""Lua script loader: includes resolved at load time, called by SHA, NOSCRIPT reloads.

Each ``lua/<name>.lua`` becomes one :class:`redis.commands.core.Script`.  A
line ``-- @include lib/x.lua`` is replaced by that file; the generated key
builders of :func:`redcron.keys.lua_key_functions` and state sets of
:func:`redcron.states.lua_state_tables` go first, so scripts build keys from
``KEYS[1]`` (the shard prefix) exactly as ``keys.py`` does, and decide which
states are terminal exactly as ``states.py`` does.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources
from typing import Any

import redis
from redis.commands.core import Script

from redcron.errors import ConnectionLost, from_script_error
from redcron.keys import lua_key_functions
from redcron.states import lua_state_tables

SCRIPT_NAMES: tuple[str, ...] = (
    "enqueue",
    "enqueue_check",
    "lease",
    "start",
    "heartbeat",
    "complete",
    "fail",
    "release",
    "reap",
    "promote",
    "cancel",
    "dlq_replay",
    "watch",
    "fire",
    "fire_batch",
    "job_put",
    "job_pause",
    "job_delete",
    "run_cancel",
    "run_retry",
    "beat_own",
)

_INCLUDE = re.compile(r"^-- @include (\S+)\s*$", re.MULTILINE)


@cache
def source(name: str) -> str:
    """The full source of script ``name`` with includes and key builders inlined."""
    root = resources.files("redcron") / "lua"
    text = (root / f"{name}.lua").read_text()

    seen: set[str] = set()

    def include(match: re.Match[str]) -> str:
        # each lib once, nested includes resolved (common.lua pulls in runs.lua)
        path = match.group(1)
        if path in seen:
            return ""
        seen.add(path)
        return _INCLUDE.sub(include, (root / path).read_text())

    return _INCLUDE.sub(include, text)


@cache
def full_source(name: str) -> str:
    return lua_key_functions() + lua_state_tables() + source(name)


class Scripts:
    """The loaded scripts of one client; ``scripts.lease(keys, args)`` runs one."""

    def __init__(self, client: redis.Redis) -> None:
        self._client = client
        self._scripts: dict[str, Script] = {
            name: client.register_script(full_source(name)) for name in SCRIPT_NAMES
        }

    def script(self, name: str) -> Script:
        return self._scripts[name]

    def run(self, name: str, keys: list[str], args: list[Any], client: Any = None) -> Any:
        """Run a script; Lua ``{err = "CODE msg"}`` becomes the matching exception.

        Direct ``EVALSHA`` with a reload on ``NOSCRIPT``.  On a pipeline, a plain
        ``EVALSHA`` is queued: redis-py's ``Script`` would make every execute send
        ``SCRIPT EXISTS`` first, one more round trip per batch on the worker's hot
        path; a ``NOSCRIPT`` reply is rare (a flushed or restarted Redis) and is
        re-run after the pipeline by :meth:`rerun_missing`.
        """
        script = self._scripts[name]
        try:
            if client is None:
                try:
                    return self._client.evalsha(script.sha, len(keys), *keys, *args)
                except redis.exceptions.NoScriptError:
                    script.sha = self._client.script_load(script.script)
                    return self._client.evalsha(script.sha, len(keys), *keys, *args)
            return client.evalsha(script.sha, len(keys), *keys, *args)
        except redis.ConnectionError as exc:
            raise ConnectionLost(str(exc)) from exc
        except redis.ResponseError as exc:
            if isinstance(exc, redis.exceptions.NoScriptError):
                raise
            raise from_script_error(str(exc)) from exc

    def ensure_loaded(self, stack: list[Any]) -> None:
        """Load the scripts a queued pipeline calls that the server does not hold."""
        shas = list({args[1] for args, _options in stack if args[0] == "EVALSHA"})
        if not shas:
            return
        by_sha = {s.sha: s for s in self._scripts.values()}
        for sha, present in zip(shas, self._client.script_exists(*shas), strict=True):
            if not present and sha in by_sha:
                self._client.script_load(by_sha[sha].script)

    def rerun_missing(self, stack: list[Any], results: list[Any]) -> None:
        """Re-run, in place, the pipelined script calls that found no script.

        ``stack`` is the pipeline's command stack as it was before execute.  A
        ``NOSCRIPT`` reply means that call did nothing, so loading the script and
        running the call again is exactly once.
        """
        missing = [
            i for i, res in enumerate(results) if isinstance(res, redis.exceptions.NoScriptError)
        ]
        if not missing:
            return
        by_sha = {s.sha: s for s in self._scripts.values()}
        for i in missing:
            args, _options = stack[i]  # ("EVALSHA", sha, numkeys, *keys_and_args)
            script = by_sha.get(args[1])
            if script is None:
                continue
            self._client.script_load(script.script)
            try:
                results[i] = self._client.evalsha(args[1], args[2], *args[3:])
            except redis.ResponseError as exc:
                results[i] = exc
