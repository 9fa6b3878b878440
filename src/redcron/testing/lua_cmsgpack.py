"""``cmsgpack`` for the testing mode's Lua runtime.

Redis (6.2, 7) and Valkey give every script the ``cmsgpack`` library
(``deps/lua/src/lua_cmsgpack.c``); our scripts read their item rows with
``cmsgpack.unpack(ARGV[i])``.  fakeredis's runtime (lupa) has ``cjson`` but no
``cmsgpack``, so :func:`install` adds ``cmsgpack.unpack`` to it, decoding
with the ``msgpack`` package into what the C library builds:

- a map -> a table keyed by its decoded keys (string keys for ours), an array
  -> a table indexed from 1 (a nil element leaves a hole, as ``lua_rawseti``);
- str -> Lua strings (bytes); integers and floats -> numbers (Lua 5.1's
  doubles: an integer beyond 2^53 is rounded as Redis rounds it, and a uint64
  past 2^63 - 1 is read as int64, as the C library reads it); nil -> nil,
  true/false -> booleans;
- several values back to back -> as many return values; ``""`` -> none;
- the C library's errors, as Lua errors with its messages: "Missing bytes in
  input." for a truncated value, "Bad data format in input." for a byte no
  msgpack type starts with, or an ext type (which it does not decode).

``cmsgpack.pack`` is not provided: no script packs (a script that calls it
fails here with "attempt to call field 'pack'", and the parity suite would say so).
"""

from __future__ import annotations

from typing import Any

import msgpack

#: the messages of lua_cmsgpack.c's mp_unpack_full
MISSING_BYTES = b"Missing bytes in input."
BAD_FORMAT = b"Bad data format in input."

#: Lua 5.1 numbers are doubles: an integer past this is rounded as Redis rounds it
_EXACT = 2**53

#: wraps the Python decoder so that its failures are Lua errors carrying the C
#: library's message (a Python exception would reach pcall as a userdata), and
#: its values are the function's return values (nil ones included)
_WRAPPER = """
function(decode)
  return function(s)
    local kind = type(s)
    if kind ~= 'string' and kind ~= 'number' then
      error("bad argument #1 to 'unpack' (string expected, got " .. kind .. ")", 0)
    end
    local out = decode(tostring(s))
    if out.err then error(out.err, 0) end
    return unpack(out, 1, out.n)
  end
end
"""


class _Ext(Exception):
    """An ext type: lua_cmsgpack.c has no decoding for it."""


class _Bin(Exception):
    """A bin value: lua_cmsgpack.c has no decoding for it."""


class _NilIndex(Exception):
    """A map with a nil key: Lua's lua_settable refuses it."""


def _refuse_ext(code: int, data: bytes) -> Any:
    raise _Ext(code)


def _to_lua(runtime: Any, value: Any) -> Any:
    if isinstance(value, bool) or value is None or isinstance(value, float):
        return value
    if isinstance(value, str):  # a str (decoded losslessly): its bytes
        return value.encode("utf-8", "surrogateescape")
    if isinstance(value, bytes):  # a bin
        raise _Bin
    if isinstance(value, int):
        if value >= 2**63:
            value -= 2**64
        return float(value) if abs(value) > _EXACT else value
    if isinstance(value, (list, tuple)):
        table = runtime.table()
        for i, item in enumerate(value, 1):
            if item is not None:
                table[i] = _to_lua(runtime, item)
        return table
    if isinstance(value, dict):
        table = runtime.table()
        for key, item in value.items():
            if key is None:
                raise _NilIndex
            if item is not None:
                table[_to_lua(runtime, key)] = _to_lua(runtime, item)
        return table
    raise TypeError(f"msgpack decoded an unexpected {type(value).__name__}")


def _decoder(runtime: Any) -> Any:
    def decode(data: bytes) -> Any:
        # str -> str, any bytes kept (surrogateescape), so that a bin (bytes)
        # tells itself apart; tuples: an array may be a map key
        unpacker = msgpack.Unpacker(
            raw=False,
            unicode_errors="surrogateescape",
            strict_map_key=False,
            use_list=False,
            ext_hook=_refuse_ext,
        )
        unpacker.feed(data)
        values: list[Any] = []
        try:
            while unpacker.tell() < len(data):
                values.append(_to_lua(runtime, unpacker.unpack()))
        except msgpack.OutOfData:
            return runtime.table_from({b"err": MISSING_BYTES})
        except _NilIndex:
            return runtime.table_from({b"err": b"table index is nil"})
        except (_Ext, _Bin, msgpack.FormatError, msgpack.StackError, ValueError):
            return runtime.table_from({b"err": BAD_FORMAT})
        out = runtime.table_from({b"n": len(values)})
        for i, value in enumerate(values, 1):
            if value is not None:
                out[i] = value
        return out

    return decode


def install(runtime: Any) -> bytes:
    """Give ``runtime`` a global ``cmsgpack`` table with ``unpack``; returns the
    global's name as the runtime's ``globals()`` lists it."""
    table = runtime.table()
    table[b"unpack"] = runtime.eval(_WRAPPER)(_decoder(runtime))
    runtime.globals()[b"cmsgpack"] = table
    return b"cmsgpack"
