"""The parity suite: chosen scenarios run on the testing mode (fakeredis) and
on a real Redis server, with identical outcomes, so that a fakeredis release
that runs our scripts differently is caught here rather than in a user's tests.

Each scenario is a function of a TestApp factory that returns a transcript
(plain data: states, counts, orders, fire times); the test runs it on both
and compares.  Each transcript is also checked against what the scenario
means, so two backends that agree on nonsense do not pass.  Retry backoffs
are jittered at random (lib/attempts.lua): transcripts carry states and
counts, not the retry times.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import msgpack
import pytest
import redis

from redcron import Context, Permanent, Task
from redcron.model import TaskRecord
from redcron.testing import TestApp
from redcron.testing.fakeserver import FakeServer, TestClock

#: a TestApp factory (tests/testing/conftest.py: make_fake, make_real); named
#: here, not imported from that conftest: with the whole suite collected,
#: ``conftest`` is another directory's
Make = Callable[..., TestApp]

T0 = datetime(2027, 3, 12, 12, 0, tzinfo=UTC)


def _counts(app: Any, **kw: Any) -> tuple[int, ...]:
    return dataclasses.astuple(app.drain(**kw))


def retry_dlq_replay(make: Make) -> list[Any]:
    """A task that fails twice more than its retries allow, then a replay."""
    app = make(now=T0, retry_base=2.0, retry_cap=10.0)
    broken = {"on": True}

    @app.task(name="flaky", retries=2)
    def flaky(n: int) -> int:
        if broken["on"]:
            raise RuntimeError(f"boom {n}")
        return n * 10

    h = flaky.enqueue(7)
    out: list[Any] = [_counts(app), h.state]
    due = h.info().due_at
    out.append(due is not None and T0 < due <= app.now.replace(second=10))
    out += [_counts(app, with_scheduled=True), h.state, h.attempts]
    out.append([(e.name, e.attempts, e.outcome, "boom 7" in (e.error or "")) for e in app.dlq()])
    broken["on"] = False
    out.append(app.broker.dlq.replay([h.id]))
    out += [_counts(app), h.state, h.result(), len(app.dlq())]
    return out


def diamond_dag(make: Make) -> list[Any]:
    """a -> (b, c) -> d, and a second run whose b fails permanently."""
    app = make(now=T0)
    order: list[str] = []

    @app.task(name="step")
    def step(label: str, fail: bool = False) -> str:
        order.append(label)
        if fail:
            raise Permanent(f"{label} refused")
        return label

    def spec(fail_b: bool) -> dict[str, Task]:
        return {
            "a": Task("step", args=["a"]),
            "b": Task("step", args=["b"], kwargs={"fail": fail_b}, depends_on=["a"]),
            "c": Task("step", args=["c"], depends_on=["a"]),
            "d": Task("step", args=["d"], depends_on=["b", "c"]),
        }

    app.jobs.put("diamond", tasks=spec(False), cron="0 0 1 1 *")
    app.jobs.put("broken", tasks=spec(True), cron="0 0 1 1 *")
    out: list[Any] = []
    for job in ("diamond", "broken"):
        app.jobs.trigger(job)
        out.append(_counts(app))
        (run,) = app.runs(job)
        out.append((job, run.state, [(t.task, t.state) for t in run.tasks or ()]))
    out.append(order)
    return out


def upstream_results(make: Make) -> list[Any]:
    """Results along the edges (issue 32 §1): keyword arguments named after the
    upstream tasks, ``ctx.upstream``, and a result over ``max_result_bytes``
    failing its attempt for good."""
    app = make(now=T0, max_result_bytes=64)

    @app.task(name="one")
    def one() -> int:
        return 1

    @app.task(name="plus_one")
    def plus_one(a: int) -> int:
        return a + 1

    @app.task(name="total")
    def total(a: int, b: int) -> int:
        return a + b

    @app.task(name="seen")
    def seen(ctx: Context) -> dict[str, Any]:
        return dict(ctx.upstream)

    @app.task(name="big", retries=2)
    def big() -> str:
        return "x" * 100

    app.jobs.put("sums", cron="0 0 1 1 *", tasks={
        "a": Task("one"),
        "b": Task("plus_one", depends_on=["a"]),
        "c": Task("total", depends_on=["a", "b"]),
        "d": Task("seen", depends_on=["c", "a"]),
    })  # fmt: skip
    app.jobs.put("huge", cron="0 0 1 1 *", tasks={
        "h": Task("big"),
        "after": Task("seen", depends_on=["h"]),
    })  # fmt: skip
    out: list[Any] = []
    for job in ("sums", "huge"):
        app.jobs.trigger(job)
        out.append(_counts(app))
        (run,) = app.runs(job)
        out.append((job, str(run.state), [
            (t.task, str(t.state), t.decoded_result(), len(t.attempts),
             (t.error or "").split(":")[0])
            for t in run.tasks or () if isinstance(t, TaskRecord)
        ]))  # fmt: skip
    return out


def cron_across_dst(make: Make) -> list[Any]:
    """A 02:30 New York job over the spring-forward night (2027-03-14 has no
    02:30) and a 01:30 one over the fall-back night (2027-11-07 has two),
    each run run as it fires (the default overlap policy skips none)."""
    app = make(now=T0)

    @app.task(name="tick")
    def tick() -> None:
        return None

    every_fire = {"tz": "America/New_York", "tasks": {"t": Task("tick")}}
    app.job("spring", cron="30 2 * * *", **every_fire)
    spring = app.advance(to=datetime(2027, 3, 16, 12, tzinfo=UTC))
    out: list[Any] = [dataclasses.astuple(spring), [_fire(r) for r in app.runs("spring")]]
    app.jobs.delete("spring")
    app.advance(to=datetime(2027, 11, 5, 12, tzinfo=UTC))  # nothing scheduled: one step
    app.jobs.put("fall", cron="30 1 * * *", **every_fire)
    fall = app.advance(to=datetime(2027, 11, 8, 12, tzinfo=UTC))
    out += [dataclasses.astuple(fall), [_fire(r) for r in app.runs("fall")]]
    return out


def _fire(run: Any) -> tuple[str | None, str]:
    when = run.scheduled_for
    return (None if when is None else when.isoformat(), str(run.state))


def fairness_order(make: Make) -> list[Any]:
    """Two tenants with weights 3 and 1, eight tasks each: the order served.

    On the real clock's day: lease.lua ages ready work by its stream entry id,
    which a real server stamps on its own clock."""
    app = make()
    served: list[str] = []

    @app.task(name="work")
    def work(tenant: str) -> None:
        served.append(tenant)

    app.tenants.set("big", weight=3)
    app.tenants.set("small", weight=1)
    for _ in range(8):
        work.enqueue("small", _tenant="small")
    for _ in range(8):
        work.enqueue("big", _tenant="big")
    return [_counts(app), "".join(t[0] for t in served)]


def breaker(make: Make) -> list[Any]:
    """A job whose task fails opens its breaker; held work waits the cool-down,
    one trial closes it and the held runs go on.  On the real clock's day, as
    fairness_order."""
    app = make()
    broken = {"on": True}

    @app.task(name="fragile", retries=0)
    def fragile() -> str:
        if broken["on"]:
            raise RuntimeError("down")
        return "up"

    app.jobs.put(
        "brk",
        tasks={"t": Task("fragile", retries=0)},
        cron="0 0 1 1 *",
        overlap="allow",
        breaker_min_attempts=3,
        breaker_threshold=0.5,
        breaker_cooldown_s=60,
    )
    out: list[Any] = []
    for _ in range(3):
        app.jobs.trigger("brk")
    out.append(_counts(app))
    job = app.jobs.get("brk")
    out.append(job.breaker)
    for _ in range(2):
        app.jobs.trigger("brk")
    out.append(_counts(app))
    out.append(sorted(str(t.state) for t in app.tasks_in(tenant="default")))
    broken["on"] = False
    out.append(dataclasses.astuple(app.advance(30)))  # cooling down: the held wait
    out.append(dataclasses.astuple(app.advance(31)))  # the trial, then the held runs
    out.append(app.jobs.get("brk").breaker)
    out.append(sorted(str(r.state) for r in app.runs("brk")))
    return out


def hand_made_stream(make: Make) -> list[Any]:
    """A ready stream re-made by hand without its consumer group: lease.lua's
    redis.pcall gets NOGROUP, reads the error text and makes the group."""
    app = make()

    @app.task(name="job")
    def job() -> str:
        return "ran"

    handle = job.enqueue()
    client, keys = app.broker.client, app.broker.keys
    stream = keys.q(0, "default", "default", "normal")
    ((entry_id, fields),) = client.xrange(stream)
    client.delete(stream)  # the group goes with it; the entry is put back by hand
    client.xadd(stream, fields, id=entry_id)  # (the instance records its entry id)
    return [_counts(app), handle.state, handle.result()]


#: what each transcript must say, whatever the backend
MEANS = {
    "mapped_dag": lambda t: (
        t[1] == [("numbers", "succeeded"), ("doubled", "failed"), ("joined", "upstream_failed")]
        and t[2] == 1
        and t[4] == [0, 2, 4, 6]
        and t[6] == [10, 12]
    ),
    "error_classes": lambda t: (
        t[1:]
        == [
            ["succeeded", 2, None, None],
            ["dead", 1, None, None],
            ["succeeded", 2, None, None],
            ["succeeded", 2, ("builtins.KeyError",), None],
            ["dead", 1, None, ("builtins.ValueError",)],
            "KeyError: 'q' (not retried: retry_on lists ValueError only)",
        ]
    ),
    "retry_dlq_replay": lambda t: (
        t[1] == "retry_wait" and t[4:6] == ["dead", 3] and t[-2:] == [70, 0]
    ),
    "diamond_dag": lambda t: t[-1] == ["a", "b", "c", "d", "a", "b", "c"],
    "upstream_results": lambda t: (
        t[1]
        == (
            "sums",
            "succeeded",
            [
                ("a", "succeeded", 1, 1, ""),
                ("b", "succeeded", 2, 1, ""),
                ("c", "succeeded", 3, 1, ""),
                ("d", "succeeded", {"c": 3, "a": 1}, 1, ""),
            ],
        )
        and t[3]
        == (
            "huge",
            "failed",
            [
                ("h", "dead", None, 1, "result too large"),
                ("after", "upstream_failed", None, 0, ""),
            ],
        )
    ),
    "cron_across_dst": lambda t: (
        t[0][:2] == (4, 0)
        and t[2][:2] == (3, 0)
        and {s for _f, s in t[1] + t[3]} == {"succeeded"}
        and [f for f, _s in t[1]]
        == [
            "2027-03-13T07:30:00+00:00",  # 02:30 EST
            "2027-03-14T07:00:00+00:00",  # no 02:30 that night: 03:00 EDT
            "2027-03-15T06:30:00+00:00",  # 02:30 EDT
            "2027-03-16T06:30:00+00:00",
        ]
        and [f for f, _s in t[3]]
        == [
            "2027-11-06T05:30:00+00:00",  # 01:30 EDT
            "2027-11-07T05:30:00+00:00",  # the first of that night's two 01:30s
            "2027-11-08T06:30:00+00:00",  # 01:30 EST
        ]
    ),
    "fairness_order": lambda t: t[1].startswith("sbbbsbbb"),
    "breaker": lambda t: (
        t[1] == "open"
        and "held" in t[3]
        and t[4][0] == 0
        and t[5][0] == 2  # the trial, then the other held run
        and t[-2] == "closed"
    ),
    "hand_made_stream": lambda t: t[1:] == ["succeeded", "ran"],
    "rate_limits": lambda t: (
        t[0] == ["scheduled"] * 3 + ["cancelled", "scheduled"]
        and t[1] == "2/s"
        and t[2][:3] == (4, 1, 1)
        and t[4]
        == [
            ["a", 0, 0],
            ["b", 9, 0],  # another group: its own turns
            ["a", 1, 500],  # one turn every 500 ms
            ["a", 2, 1000],
            ["a", 1, 1500],  # the retry: a turn of its own, after a 2's
            ["d", 10, 1500],  # the DAG's group: the root, then each downstream task
            ["d", 11, 2000],
            ["d", 12, 2500],
        ]
    ),
    "unique_and_debounce": lambda t: (
        t[:6] == [True, True, True, True, True, 25.0]
        and t[7] == [["once", 1], ["settle", 3]]
        and t[8:] == [False, True, 3]
    ),
}


def unique_and_debounce(make: Make) -> list[Any]:
    """A unique window's duplicate, then a key freed by its task's end; a
    debounce moved twice, capped by max_wait, run once with the last args."""
    app = make(now=T0)
    ran: list[Any] = []

    @app.task(name="once", unique_for=60)
    def once(n: int) -> None:
        ran.append(["once", n])

    @app.task(name="settle", debounce=10, max_wait=25)
    def settle(n: int) -> None:
        ran.append(["settle", n])

    a, b = once.enqueue(1), once.enqueue(1)
    out: list[Any] = [b.duplicate, a.id == b.id]
    first = settle.enqueue(1)
    app.advance(8)
    second = settle.enqueue(2)
    app.advance(8)
    third = settle.enqueue(3)  # due 26 s after the first: capped at 25
    due = third.info().due_at
    out += [second.duplicate, third.duplicate, first.id == third.id]
    out.append(None if due is None else (due - T0).total_seconds())
    out += [dataclasses.astuple(app.advance(30)), sorted(ran)]
    c = once.enqueue(1)  # within the window, but its task ended
    out += [c.duplicate, c.id != a.id, first.info().debounce_calls]
    return out


def error_classes(make: Make) -> list[Any]:
    """retry_on and permanent_on (issue 32 §4): a task's lists, a subclass, a
    call's lists replacing the task's, and ``perform`` classifying the same way."""
    app = make(now=T0, retry_base=1.0, retry_cap=2.0)
    seen: dict[str, int] = {}

    @app.task(name="picky", retries=2, retry_on=(ValueError,))
    def picky(key: str, exc: str) -> int:
        seen[key] = seen.get(key, 0) + 1
        if seen[key] == 1:
            raise {"value": ValueError, "key": KeyError, "unicode": UnicodeError}[exc](key)
        return seen[key]

    handles = [
        picky.enqueue("v", "value"),  # listed: retried
        picky.enqueue("k", "key"),  # not listed: dead at once
        picky.enqueue("u", "unicode"),  # a ValueError subclass: retried
        picky.enqueue("c", "key", _retry_on="KeyError"),  # the call's list instead
        picky.enqueue("p", "value", _permanent_on=[ValueError]),  # the reverse
    ]
    out: list[Any] = [_counts(app, with_scheduled=True)]
    out += [[h.state, h.attempts, h.info().retry_on, h.info().permanent_on] for h in handles]
    try:
        app.perform(picky, "q", "key")
    except Exception as exc:
        out.append(str(exc).splitlines()[-1])
    return out


def rate_limits(make: Make) -> list[Any]:
    """Rate limits (issue 32 §5): a keyed group's turns one per unit/n, another
    group apart, a retry taking a turn of its own, a waiting instance cancelled,
    and a DAG's tasks taking turns as they become ready.  The retry's backoff
    (jittered, at most 0.2 s) ends before its turn, so its time is its turn's."""
    app = make(now=T0, retry_base=0.1, retry_cap=0.2)
    ran: list[Any] = []
    failed: set[int] = set()

    @app.task(name="api", rate="2/s", rate_key="cust", retries=1)
    def api(cust: str, n: int, fail: bool = False) -> None:
        ran.append([cust, n, app.clock.ms - int(T0.timestamp() * 1000)])
        if fail and n not in failed:
            failed.add(n)
            raise RuntimeError("once")

    hs = [api.enqueue("a", n, fail=n == 1) for n in range(4)] + [api.enqueue("b", 9)]
    app.broker.cancel(hs[3].id)
    out: list[Any] = [[h.state for h in hs], hs[2].info().rate]
    out.append(_counts(app, with_scheduled=True))
    app.jobs.put(
        "dag",
        tasks={
            "x": Task("api", args=["d", 10]),
            "y": Task("api", args=["d", 11], depends_on=["x"]),
            "z": Task("api", args=["d", 12], depends_on=["x"]),
        },
        cron="0 0 1 1 *",
    )
    app.jobs.trigger("dag")
    out.append(_counts(app, with_scheduled=True))
    out.append(ran)
    return out


def mapped_dag(make: Make) -> list[Any]:
    """Fan-out at run time (issue 32 §2): a task mapped over its upstream's
    list, an element that fails for good failing the map and its join, the
    DLQ replay of it (fixed) joining the results in order; a chord."""
    app = make(now=T0)
    broken = [True]

    @app.task(name="numbers")
    def numbers(n: int) -> list[int]:
        return list(range(n))

    @app.task(name="double", retries=0)
    def double(ctx: Context, numbers: int) -> int:
        if numbers == 2 and broken:
            raise Permanent("two is broken")
        return numbers * 2 + (ctx.map_index or 0) * 0

    @app.task(name="collect")
    def collect(doubled: list[int]) -> list[int]:
        return doubled

    app.jobs.put("mapped", cron="0 0 1 1 *", tasks={
        "numbers": Task("numbers", kwargs={"n": 4}),
        "doubled": Task("double", map_over="numbers"),
        "joined": Task("collect", depends_on=["doubled"]),
    })  # fmt: skip
    rid = app.jobs.trigger("mapped")
    out: list[Any] = [_counts(app)]
    run = app.jobs.run(rid)
    out.append([(t.task, str(t.state)) for t in run.tasks or () if isinstance(t, TaskRecord)])
    broken.clear()
    out.append(app.broker.dlq.replay([f"{rid}/doubled[2]"]))
    out.append(_counts(app))
    out.append(app.get(f"{rid}/joined").result())
    handle = app.chord(double.map([5, 6]), collect)
    out.append(_counts(app))
    out.append(handle.result())
    return out


SCENARIOS = {
    "mapped_dag": mapped_dag,
    "rate_limits": rate_limits,
    "error_classes": error_classes,
    "retry_dlq_replay": retry_dlq_replay,
    "diamond_dag": diamond_dag,
    "upstream_results": upstream_results,
    "cron_across_dst": cron_across_dst,
    "fairness_order": fairness_order,
    "breaker": breaker,
    "hand_made_stream": hand_made_stream,
    "unique_and_debounce": unique_and_debounce,
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_the_testing_mode_and_a_real_server_agree(
    name: str, make_fake: Make, make_real: Make
) -> None:
    fake = SCENARIOS[name](make_fake)
    real = SCENARIOS[name](make_real)
    assert fake == real
    assert MEANS[name](fake), fake


# -- cmsgpack: the fake runtime's unpack (redcron/testing/lua_cmsgpack.py) -------

#: what a script sees of cmsgpack.unpack(ARGV[1]): each value as type:text,
#: a table's entries sorted by key; an error as err:<message>
DESCRIBE_UNPACKED = """
local function describe(v)
  if type(v) ~= 'table' then return type(v) .. ':' .. tostring(v) end
  local parts = {}
  for k, x in pairs(v) do parts[#parts + 1] = describe(k) .. '=' .. describe(x) end
  table.sort(parts)
  return '{' .. table.concat(parts, ',') .. '}'
end
local res = {pcall(cmsgpack.unpack, ARGV[1])}
if not res[1] then return 'err:' .. tostring(res[2]) end
local out = {}
for i = 2, table.maxn(res) do out[#out + 1] = describe(res[i]) end
return select('#', unpack(res)) - 1 .. ' ' .. table.concat(out, ' ')
"""

PACKED = {
    "an enqueue row": msgpack.packb(
        {
            "iid": "0-01J",
            "name": "send",
            "args": b"\x92\x01\xa1x",
            "timeout_ms": "30000",
            "max_attempts": 3,
            "cpu": "0.1",
            "delay_ms": 0,
            "ck": "",
        },
        use_bin_type=False,
    ),
    "nested": msgpack.packb({"a": [1, 2, {"b": [True, False]}], "n": {"x": {}}, "e": []}),
    "numbers": msgpack.packb(
        [
            0,
            -1,
            127,
            128,
            -33,
            65_536,
            2**31,
            -(2**31) - 1,
            2**40,
            2**53,
            2**60,
            -(2**62),
            2**63,
            2**64 - 1,
            0.5,
            -0.1,
            1e300,
            1.5e-7,
        ],
    ),
    "float32": b"\xca\x3f\xc0\x00\x00",
    "str": msgpack.packb(
        ["", "é", b"", b"\x00\xff", "x" * 300, b"\xff" * 70_000], use_bin_type=False
    ),
    "str8": b"\xd9\x02ab",  # the new spec's str 8 (use_bin_type=True packs short str so)
    # no bin: cmsgpack refuses it (rows pack bytes as str, use_bin_type=False)
    "bin": msgpack.packb(b"\x00\xff", use_bin_type=True),
    "integer keys": msgpack.packb({1: "a", 2: "b", -3: "c"}, strict_types=False),
    "nil map value": msgpack.packb({"a": None, "b": 1}),
    "several values": msgpack.packb(1) + msgpack.packb("two") + msgpack.packb([3]),
    "nil values": msgpack.packb(None) + msgpack.packb(1) + msgpack.packb(None),
    "empty": b"",
    "truncated": msgpack.packb({"a": "bcd"})[:-1],
    "bad byte": b"\xc1",
    "ext": msgpack.packb(msgpack.ExtType(5, b"xy")),
    "bad after good": msgpack.packb(7) + b"\xc1",
}


@pytest.mark.parametrize("name", sorted(PACKED))
def test_cmsgpack_unpack_is_what_the_server_decodes(name: str, redis_url: str) -> None:
    real = redis.Redis.from_url(redis_url)
    fake = FakeServer(TestClock()).client()
    try:
        want = real.eval(DESCRIBE_UNPACKED, 0, PACKED[name])
        got = fake.eval(DESCRIBE_UNPACKED, 0, PACKED[name])
    finally:
        real.close()
        fake.close()
    assert got == want
    refused = {"bin", "truncated", "bad byte", "ext", "bad after good"}
    assert want.startswith(b"err:") == (name in refused)
