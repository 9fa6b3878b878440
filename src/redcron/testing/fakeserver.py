"""The fake Redis of the testing mode: fakeredis running our real Lua scripts
(through lupa, Lua 5.1), on a clock the test moves.

These things differ from a plain ``fakeredis.FakeRedis()``, the four
differences of behaviour written up in docs/testing.md ("fakeredis
differences"), the speed-up in its "Speed" section:

- **RESP2 clients.**  fakeredis shapes a command's reply *inside a script* by
  the protocol of the client that called the script (a RESP3 client gets
  ``XREADGROUP``'s reply as a map), where Redis gives a script RESP2 shapes
  unless the script asks for RESP3 (``redis.setresp(3)``): ``lease.lua`` reads
  the reply as an array and fails on a RESP3 client.  Every client here is
  made with ``protocol=2``.
- **redis.pcall's error.**  fakeredis hands a script the error table of a
  failed ``redis.pcall`` with ``err`` as a Python ``str`` (a userdata to Lua,
  as its runtime has no encoding), so ``string.find(res.err, ...)`` raises;
  Redis gives a Lua string.  :meth:`_Socket._lua_redis_pcall` gives bytes.
- **cmsgpack.**  Redis and Valkey give scripts the ``cmsgpack`` library
  (our scripts decode their item rows with it); fakeredis's Lua runtime has
  only ``cjson``.  :meth:`_Socket._get_server_runtime` adds ``cmsgpack.unpack``
  (:mod:`redcron.testing.lua_cmsgpack`) to the runtime fakeredis makes once
  per server, and to the globals it expects, so that its check for globals a
  script leaves behind does not flag it.
- **The clock.**  fakeredis reads ``time.time()`` wherever Redis reads its
  clock (``TIME``, key expiry, stream ids and idle times), and has no way to
  inject another one.  While one of our sockets runs a command, the
  ``time`` those fakeredis modules see answers :class:`TestClock` instead;
  any other fakeredis client in the process (or a command outside ours)
  still sees the real clock.  Blocking commands (``BLPOP``) wait on the real
  clock, so a wait with a timeout ends.
- **Speed.**  fakeredis compiles a script's source at every ``EVALSHA``
  (0.3-0.5 ms for our 15-28 KB scripts), runs a full Lua garbage collection
  after each, and walks the Lua globals table from Python before every
  ``redis.call`` (a script makes 10-80): most of a drained task's or a cron
  fire's cost.  :class:`_CompiledScripts` compiles each script once per
  server and lets Lua's own incremental collector run; the globals are still
  checked once per script, when it ends (as fakeredis does), and a real Redis
  refuses a global at once (the parity suite and tests/lua run there).

These reach into fakeredis's internals (a socket subclass, four modules'
``time``, its per-server Lua runtime, its script call path):
``pyproject.toml`` pins the range they were checked on (the ``testing``
extra), :func:`check_supported` refuses a fakeredis that lacks them, and
tests/testing/test_parity.py runs the same scenarios here and on a real
server.
"""

from __future__ import annotations

import contextvars
import importlib
import importlib.util
import threading
import time as _real_time
from datetime import UTC, datetime
from types import ModuleType
from typing import Any

from redcron.errors import ConfigError
from redcron.testing import lua_cmsgpack

#: what to install when fakeredis or its Lua runtime is missing
INSTALL = "pip install 'redcron[testing]' (fakeredis with Lua: fakeredis[lua])"

#: the fakeredis modules that read the clock as ``time.time()``, and what for
CLOCKED_MODULES = {
    "fakeredis._helpers": "current_time(): stream idle times, hash field expiry",
    "fakeredis._socket._base": "each command's db.time: key expiry, TTLs",
    "fakeredis.commands_mixins.server_mixin": "the TIME command (every script's now)",
    "fakeredis.model._stream": "XADD * stream ids",
}

#: the clock of the socket running a command now (None: the real clock)
_ACTIVE: contextvars.ContextVar[TestClock | None] = contextvars.ContextVar(
    "redcron_testing_clock", default=None
)
_patch_lock = threading.Lock()
#: what fakeredis's eval runs after each script (a full garbage collection)
FULL_COLLECTION = "collectgarbage()"
#: compiled scripts kept per server (ours are 36; a test's own EVALs add theirs)
MAX_COMPILED = 512


class TestClock:
    """The test's clock: an instant in ms that stands still until moved.

    Every script reads it through ``TIME`` (the scripts' "now"), and so does
    the Python side (``broker.server_ms()``: the beat, the listings); it
    never moves by itself, so nothing in a test depends on how fast it runs.
    """

    __test__ = False  # not a pytest test class, whatever its name

    def __init__(self, start: datetime | None = None) -> None:
        if start is None:
            ms = int(_real_time.time() * 1000)
        else:
            if start.tzinfo is None:
                raise ConfigError(
                    f"now: {start!r} has no time zone; pass an aware datetime "
                    "(datetime(2026, 3, 8, tzinfo=UTC))"
                )
            ms = int(start.timestamp() * 1000)
        self._ms = ms
        self._lock = threading.Lock()

    @property
    def ms(self) -> int:
        """Now, in ms since the epoch."""
        return self._ms

    def now(self) -> datetime:
        """Now, as an aware UTC datetime."""
        return datetime.fromtimestamp(self._ms / 1000, UTC)

    def set_ms(self, ms: int) -> None:
        """Move to ``ms``; the clock never goes back (nor does Redis's, for us)."""
        with self._lock:
            if ms < self._ms:
                raise ValueError(
                    f"the test clock only moves forward: {ms} is before now ({self._ms})"
                )
            self._ms = int(ms)

    def time(self) -> float:
        """Now in seconds, as ``time.time()`` gives it."""
        return self._ms / 1000


class _ClockedTime:
    """Stands in for the ``time`` module inside fakeredis: ``time()`` is the
    active test clock's while one of our sockets runs a command, the real
    clock otherwise; everything else is the real module's."""

    def time(self) -> float:
        clock = _ACTIVE.get()
        return _real_time.time() if clock is None else clock.time()

    def __getattr__(self, name: str) -> Any:
        return getattr(_real_time, name)


def _import(name: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise ConfigError(f"redcron.testing needs fakeredis ({exc}): {INSTALL}") from None


def check_supported() -> None:
    """Raise :class:`ConfigError` naming the extra to install when fakeredis or
    lupa is missing, or when fakeredis is a version whose clock reads differ
    from what this module patches."""
    if importlib.util.find_spec("fakeredis") is None:
        raise ConfigError(f"redcron.testing needs fakeredis, which is not installed: {INSTALL}")
    if importlib.util.find_spec("lupa") is None:
        raise ConfigError(
            "redcron.testing runs redcron's Lua scripts on fakeredis, which needs lupa "
            f"(not installed): {INSTALL}"
        )
    module = _import("fakeredis.commands_mixins.scripting_mixin")
    if not hasattr(module.ScriptingCommandsMixin, "_get_server_runtime"):
        raise ConfigError(
            f"this fakeredis ({_version()}) makes its Lua runtime elsewhere than "
            f"_get_server_runtime (where cmsgpack is added); {INSTALL}"
        )
    helpers = ("decode_command_bytes", "COMMANDS_WITH_SUB", "_convert_redis_arg", "msgs")
    missing = [h for h in helpers if not hasattr(module, h)]
    if missing:
        raise ConfigError(
            f"this fakeredis ({_version()}) runs redis.call without {', '.join(missing)}; "
            f"redcron.testing supports the range its extra pins: {INSTALL}"
        )
    for name in CLOCKED_MODULES:
        held = getattr(_import(name), "time", None)
        if held is not _real_time and not isinstance(held, _ClockedTime):
            raise ConfigError(
                f"this fakeredis ({_version()}) has no module-level time in {name}; "
                f"redcron.testing supports the range its extra pins: {INSTALL}"
            )


def _version() -> str:
    module = _import("fakeredis")
    return str(getattr(module, "__version__", "unknown version"))


def _install_clock() -> None:
    """Point the clock reads of :data:`CLOCKED_MODULES` at :class:`_ClockedTime`
    (once per process; harmless to fakeredis clients that are not ours)."""
    with _patch_lock:
        proxy = _ClockedTime()
        for name in CLOCKED_MODULES:
            module = _import(name)
            if not isinstance(getattr(module, "time", None), _ClockedTime):
                setattr(module, "time", proxy)  # noqa: B010  (a module attribute mypy cannot see)


def _classes() -> tuple[type[Any], type[Any], type[Any]]:
    """The server, socket and connection classes (built on first use, so that
    importing redcron.testing never imports fakeredis)."""
    fakeredis = _import("fakeredis")
    socket_module = _import("fakeredis._socket")
    sync_clients = _import("fakeredis._clients._sync")
    scripting = _import("fakeredis.commands_mixins.scripting_mixin")

    class _Server(fakeredis.FakeServer):  # type: ignore[misc,name-defined]
        """A fake server with the test clock its sockets run on."""

        clock: TestClock

    class _Socket(socket_module.FakeSocket):  # type: ignore[misc,name-defined]
        """A connection's server side: commands run on the server's test clock."""

        def _process_command(self, fields: list[bytes]) -> None:
            token = _ACTIVE.set(self._server.clock)
            try:
                super()._process_command(fields)
            finally:
                _ACTIVE.reset(token)

        def _blocking(self, timeout: float | None, func: Any, shape: Any = None) -> Any:
            # a BLPOP's deadline is on the real clock: the test clock stands still
            token = _ACTIVE.set(None)
            try:
                return super()._blocking(timeout, func, shape)
            finally:
                _ACTIVE.reset(token)

        def _get_server_runtime(self, server: Any) -> Any:
            # fakeredis makes the runtime once per server and notes its globals
            # then: cmsgpack joins both, once; the scripts' eval goes through
            # _CompiledScripts from then on (fakeredis keeps the runtime on the server)
            runtime = super()._get_server_runtime(server)
            if not getattr(server, "_redcron_cmsgpack", False):
                server._lua_expected_globals.add(lua_cmsgpack.install(runtime))
                server._redcron_cmsgpack = True
                server._lua_runtime = runtime = _CompiledScripts(runtime)
            return runtime

        def _lua_redis_call(
            self, lua_runtime: Any, expected_globals: set[Any], op: bytes, *args: Any
        ) -> Any:
            # fakeredis's own, less its walk of the globals table before each
            # call (see the module docstring: the script's end still checks)
            cmd = scripting.decode_command_bytes(op)
            if cmd in scripting.COMMANDS_WITH_SUB and args:
                cmd += " " + scripting.decode_command_bytes(scripting._convert_redis_arg(args[0]))
                args = args[1:]
            func, sig = self._name_to_func(cmd)
            if func is None:
                raise scripting.SimpleError(scripting.msgs.WRONG_ARGS_MSG7)
            new_args = [scripting._convert_redis_arg(arg) for arg in args]
            result = self._run_command(func, sig, new_args, True)
            return self._convert_redis_result(lua_runtime, result)

        def _lua_redis_pcall(
            self, lua_runtime: Any, expected_globals: set[Any], op: bytes, *args: Any
        ) -> Any:
            # Redis gives the script {err = <Lua string>}; fakeredis a Python str
            try:
                return self._lua_redis_call(lua_runtime, expected_globals, op, *args)
            except Exception as exc:
                return lua_runtime.table_from({b"err": str(exc).encode()})

    class _Connection(sync_clients.FakeRedisConnection):  # type: ignore[misc,name-defined]
        def _connect(self) -> Any:
            if not self._server.connected:
                raise self._connection_error_class("the fake server is not connected")
            return _Socket(
                self._server,
                client_class=self._client_class,
                db=self.db,
                lua_modules=self._lua_modules,
                client_info=self._client_info,
            )

    return _Server, _Socket, _Connection


class _CompiledScripts:
    """fakeredis's Lua runtime, as its ``eval`` uses it, with each script
    compiled once: ``execute(source)`` calls the chunk compiled from that
    source the first time (a chunk called again gets fresh top-level locals, as
    a script run again does); the full collection fakeredis asks for after
    each script (``collectgarbage()``) is left to Lua's incremental collector.
    Anything else is the runtime's own."""

    def __init__(self, runtime: Any) -> None:
        self._runtime = runtime
        self._chunks: dict[Any, Any] = {}
        self.table_from = runtime.table_from
        self.globals = runtime.globals

    def execute(self, source: Any, *args: Any) -> Any:
        if source == FULL_COLLECTION:
            return None
        chunk = self._chunks.get(source)
        if chunk is None:
            if len(self._chunks) >= MAX_COMPILED:  # a test that EVALs made-up sources
                self._chunks.clear()
            chunk = self._chunks[source] = self._runtime.compile(source)
        return chunk(*args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._runtime, name)


class FakeServer:
    """One fake Redis server on a :class:`TestClock`; :meth:`client` gives
    RESP2 clients of it (every client of one TestApp shares the server)."""

    def __init__(self, clock: TestClock) -> None:
        check_supported()
        _install_clock()
        server_class, _socket, self._connection_class = _classes()
        self.clock = clock
        self._server = server_class(version=(7, 4))
        self._server.clock = clock

    def client(self) -> Any:
        """A ``redis.Redis`` (fakeredis's) of this server: bytes replies, RESP2."""
        fakeredis = _import("fakeredis")
        return fakeredis.FakeRedis(
            server=self._server,
            protocol=2,
            version=(7, 4),
            connection_class=self._connection_class,
        )
