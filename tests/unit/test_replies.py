"""The one classifier of error replies (``engine/replies.py``): every server-state
reply is :class:`RedisUnavailable` (the call did nothing; HTTP 503, loops back
off), every script error code its own exception, anything else a ScriptError.

The exceptions are made by redis-py's own reply parser from the text a server
sends, so the classes and the stripped messages are the ones a real call sees
(``ClusterDownError("The cluster is down")``: its code is gone from the text).
"""

from __future__ import annotations

import pytest
import redis
import redis.exceptions
from redis._parsers.base import BaseParser

from redcron.engine.connection import raise_unreachable
from redcron.engine.replies import (
    UNAVAILABLE_CODES,
    error_of_reply,
    is_server_state,
    reply_code,
)
from redcron.errors import (
    CODES,
    Conflict,
    ConnectionLost,
    NotFound,
    RedisUnavailable,
    ScriptError,
    ValidationError,
)

#: what servers send in each state (Redis 7 / Valkey texts)
SERVER_STATE = {
    "CLUSTERDOWN": "CLUSTERDOWN The cluster is down",
    "TRYAGAIN": "TRYAGAIN Multiple keys request during rehashing of slot",
    "MOVED": "MOVED 3999 127.0.0.1:6381",
    "ASK": "ASK 3999 127.0.0.1:6381",
    "LOADING": "LOADING Redis is loading the dataset in memory",
    "MASTERDOWN": "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is 'no'.",
    "READONLY": "READONLY You can't write against a read only replica.",
    "NOREPLICAS": "NOREPLICAS Not enough good replicas to write.",
    "BUSY": "BUSY Redis is busy running a script. You can only call SCRIPT KILL or FUNCTION KILL.",
}


def test_the_list_is_the_brief_and_disjoint_from_the_script_codes() -> None:
    assert set(SERVER_STATE) == UNAVAILABLE_CODES
    assert not UNAVAILABLE_CODES & set(CODES)


@pytest.mark.parametrize("code", sorted(SERVER_STATE))
def test_each_server_state_reply_is_redis_unavailable(code: str) -> None:
    exc = BaseParser.parse_error(SERVER_STATE[code])
    assert reply_code(exc) == code
    assert is_server_state(exc)
    error = error_of_reply(exc, "redis://:secret@h:1/0")
    assert type(error) is RedisUnavailable
    assert not isinstance(error, ScriptError)
    assert error.reply_code == code
    assert code in str(error) and "secret" not in str(error)  # the code, never the password


@pytest.mark.parametrize("code", sorted(set(SERVER_STATE) - {"MOVED", "ASK"}))
def test_a_server_state_reply_from_inside_a_script_is_redis_unavailable(code: str) -> None:
    # a redis.call inside a script that meets the state: Redis 7 keeps the code
    # (a redirection is decided before a script runs, on its declared keys)
    exc = BaseParser.parse_error(f"{SERVER_STATE[code]} script: 1a2b, on @user_script:12.")
    assert isinstance(error_of_reply(exc), RedisUnavailable)


def test_redis_py_gave_up_following_redirections_is_unavailable() -> None:
    exc = redis.exceptions.ClusterError("TTL exhausted.")
    assert reply_code(exc) == "TRYAGAIN"
    assert isinstance(error_of_reply(exc), RedisUnavailable)


@pytest.mark.parametrize(
    ("text", "cls"),
    [
        ("NOTFOUND task 3-01H", NotFound),
        ("CONFLICT run ended", Conflict),
        ("INVALID cron bad expression", ValidationError),
        ("ERR user_script:3: attempt to index a nil value", ScriptError),
        ("WRONGTYPE Operation against a key holding the wrong kind of value", ScriptError),
    ],
)
def test_script_errors_keep_their_classes(text: str, cls: type[Exception]) -> None:
    exc = BaseParser.parse_error(text)
    assert not is_server_state(exc)
    assert type(error_of_reply(exc)) is cls


def test_no_script_is_not_a_server_state() -> None:
    # NOSCRIPT is handled by loading the script and running the call again
    assert not is_server_state(BaseParser.parse_error("NOSCRIPT No matching script."))


def test_a_pipeline_reply_of_server_state_raises_unavailable() -> None:
    replies: list[object] = [1, BaseParser.parse_error(SERVER_STATE["CLUSTERDOWN"]), 2]
    with pytest.raises(RedisUnavailable):
        raise_unreachable(replies)
    # a script's own error stays in place for the caller to map
    raise_unreachable([1, BaseParser.parse_error("NOTFOUND x")])
    with pytest.raises(ConnectionLost):
        raise_unreachable([redis.ConnectionError("reset")])


class _Pipe:
    """A pipeline whose replies are given (no Redis)."""

    def __init__(self, replies: list[object]) -> None:
        self.replies = replies

    def hmget(self, *_args: object) -> None:
        pass

    def execute(self, raise_on_error: bool = True) -> list[object]:
        return self.replies


class _Client:
    def __init__(self, replies: list[object]) -> None:
        self.replies = replies

    def pipeline(self, transaction: bool = True) -> _Pipe:
        return _Pipe(self.replies)


def test_the_doctor_takes_a_wrong_type_as_a_finding_and_clusterdown_as_no_answer() -> None:
    """A doctor scan during CLUSTERDOWN used to report every key "not a hash"
    (and could repair on that); now the examination stops instead."""
    from redcron.doctor.scan import _execute

    wrongtype = BaseParser.parse_error("WRONGTYPE Operation against a key holding the wrong kind")
    assert _execute(_Client([wrongtype]), [("hmget", "k", ["a"])], False) == [wrongtype]  # type: ignore[arg-type]
    down = BaseParser.parse_error(SERVER_STATE["CLUSTERDOWN"])
    with pytest.raises(RedisUnavailable):
        _execute(_Client([down]), [("hmget", "k", ["a"])], False)  # type: ignore[arg-type]
