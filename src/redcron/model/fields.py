"""Hash fields the Lua scripts read together, defined once.

A wide ``HMGET`` read by position (``f[11]``) breaks silently when a field is
added in the middle of its list.  Each read named here becomes a generated Lua
reader (:func:`lua_readers`, prepended to every script by ``broker/scripts.py``
and pruned from those that do not call it)::

    local f = read_ti_lease(ti)    -- one HMGET
    if f.state == 'ready' and f.max_attempts ...

A missing field reads ``false``, as an ``HMGET`` reply's nil does.  The reader
builds its table with one constructor (its size known when the script is
compiled), which costs well under a microsecond a call: side by side, the
throughput benchmark could not tell it from positional reads (see
docs/architecture.md, "Named reads in Lua").
"""

from __future__ import annotations

import re

#: read name -> the hash fields it returns, in HMGET order.  The name says
#: which hash (``ti``: an instance, ``tenant``: a tenant's settings) and who
#: reads it; a script calls ``read_<name>(key)``.
LUA_READS: dict[str, tuple[str, ...]] = {
    # lease.lua: an entry's hash, checked (one place, malformed) and handed out
    "ti_lease": (
        "state", "loc", "attempt", "name", "kind", "args", "timeout_ms", "epoch", "run",
        "cpu", "mem", "queue", "tenant", "priority", "max_attempts", "budget",
    ),
    # lease.lua: the capacity peek of entries not yet read (lib/capacity.lua)
    "ti_fit": ("state", "loc", "cpu", "mem", "queue", "tenant", "priority"),
    # lease.lua: a tenant's cap, rate and grant (lib/limits.lua)
    "tenant_limits": (
        "weight", "max_in_flight", "rate", "burst", "tokens", "tokens_ts", "allow_commands",
    ),
    # start.lua: the token, and the attempt whose start it stamps
    "ti_start": ("state", "worker", "epoch", "attempt"),
    # heartbeat.lua: the token, the cancel flag and where the lease's entry is
    "ti_heartbeat": (
        "state", "worker", "epoch", "tenant", "cancel_requested", "queue", "priority",
        "lease_entry",
    ),
    # complete.lua: the token and everything a success ends
    "ti_complete": (
        "state", "worker", "epoch", "attempt", "tenant", "result_ttl_s", "waiters", "run",
        "queue", "priority", "lease_entry", "kind", "error",
    ),
    # lib/attempts.lua: the token alone (fail, release)
    "ti_token": ("state", "worker", "epoch"),
    # lib/attempts.lua end_attempt: what ending an attempt and moving it on needs
    "ti_end": (
        "attempt", "tenant", "max_attempts", "retry_base_ms", "retry_cap_ms", "budget",
        "cancel_requested", "queue", "priority", "name", "run", "lease_entry",
    ),
    # reap.lua: an expired lease's candidate
    "ti_reap": (
        "state", "deadline", "timeout_ms", "attempt", "lease_entry", "queue", "tenant",
        "priority",
    ),
    # lib/runs.lua run_check_end: has every task of the run ended, and how
    "run_end": (
        "total", "n_done", "n_failed", "cancel_requested", "state", "job", "n_cancelled", "tenant",
    ),
    # lib/fire.lua: the job a fire checks (version, pause) and makes a run of
    "job_fire": ("version", "paused", "overlap", "template", "tenant", "name", "keep_s"),
    # lib/run_create.lua: a run made without a fire's read (a buffered fire)
    "job_run": ("template", "tenant", "name", "keep_s"),
}  # fmt: skip

_LUA_KEYWORDS = frozenset(
    {
        "and", "break", "do", "else", "elseif", "end", "false", "for", "function", "if", "in",
        "local", "nil", "not", "or", "repeat", "return", "then", "true", "until", "while",
    }
)  # fmt: skip
_NAME = re.compile(r"^[a-z_][a-z0-9_]*$")


def _lua_key(field: str) -> str:
    if _NAME.match(field) and field not in _LUA_KEYWORDS:
        return field
    return f"['{field}']"


def lua_readers() -> str:
    """Lua source defining one ``read_<name>(key)`` per entry of :data:`LUA_READS`."""
    out = ["-- generated from redcron/model/fields.py: do not edit"]
    for name, fields in LUA_READS.items():
        assert len(set(fields)) == len(fields), name
        listed = ", ".join(f"'{f}'" for f in fields)
        named = ", ".join(f"{_lua_key(f)} = v[{i}]" for i, f in enumerate(fields, 1))
        out += [
            f"local function read_{name}(key)",
            f"  local v = redis.call('HMGET', key, {listed})",
            f"  return {{{named}}}",
            "end",
        ]
    return "\n".join(out) + "\n"
