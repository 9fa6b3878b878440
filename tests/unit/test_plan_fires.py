"""schedule.plan: the catch-up window is decided per fire (invariant 2). Pure: explicit now.

A fire overdue by at most the window is always fired (recorded under the trigger's
kind, "cron" or "every"); only the fires
older than that follow the job's catch-up policy, and every fire left out is
counted.  The fire calls must chain (each one's expected score is the previous
one's next due time) so fire.lua's compare-and-set accepts them in order.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from redcron.model.jobs import JobSpec, Task
from redcron.schedule.plan import CHAIN_LIMIT, Fire, plan_fires

TASKS = {"t": Task("noop")}
WINDOW = 60_000
# on the 5 s (and 1 s, and hourly) grid of the epoch, as next_fire's every= grid is
N = 1_700_000_000_000 - 1_700_000_000_000 % 3_600_000


@dataclass
class Outcome:
    """What a beat would do with a due job: fires run (by trigger), fires skipped."""

    fired: dict[int, str] = field(default_factory=dict)
    skipped: int = 0
    next_ms: int | None = None
    passes: int = 0


def spec(**kw: object) -> JobSpec:
    return JobSpec(name="j", tasks=TASKS, overlap="allow", **kw)  # type: ignore[arg-type]


def check_chain(calls: list[Fire], score: int) -> None:
    """Each call expects the score the previous one stores (fire.lua's compare-and-set)."""
    expected = score
    for f in calls:
        assert f.expected == expected
        assert f.next_due is not None
        expected = f.next_due


def run(job: JobSpec, nominal: int, now: int, window: int = WINDOW) -> Outcome:
    """Plan passes at one ``now`` until the schedule points past it, as the beat does."""
    out = Outcome()
    score = nominal
    trigger = job.trigger()
    while score <= now:
        calls = plan_fires("0-j", job.fire_policy(), trigger, nominal, score, now, window)
        assert 1 <= len(calls) <= CHAIN_LIMIT
        check_chain(calls, score)
        for f in calls:
            if f.trigger != "skip":
                assert f.fire_ms not in out.fired  # one run per fire time
                out.fired[f.fire_ms] = f.trigger
            out.skipped += f.skipped
        last = calls[-1]
        out.passes += 1
        out.next_ms = last.next_ms
        if last.next_ms is None or last.next_due is None:
            break
        nominal, score = last.next_ms, last.next_due
    return out


# A 65.5 s beat outage of an every=5s job: fires at N, N+5 s, ..., N+65 s (14 of them);
# now - 60 s = N+5.5 s, so N and N+5 s are older than the window and the 12 fires
# from N+10 s to N+65 s are within it.
NOW = N + 65_500
RECENT = list(range(N + 10_000, N + 65_001, 5_000))


def test_every_fire_within_the_window_is_fired_after_a_65s_outage() -> None:
    out = run(spec(every="5s"), N, NOW)
    assert len(RECENT) == 12
    assert [t for t, trig in out.fired.items() if trig == "every"] == RECENT
    # latest (the default): the newest of the two old fires, the older one counted
    assert {t: trig for t, trig in out.fired.items() if trig != "every"} == {N + 5_000: "catchup"}
    assert out.skipped == 1
    assert out.next_ms == N + 70_000


def test_the_plan_of_a_65s_outage_is_one_pass_oldest_first() -> None:
    job = spec(every="5s")
    calls = plan_fires("0-j", job.fire_policy(), job.trigger(), N, N, NOW, WINDOW)
    assert [(f.fire_ms, f.trigger, f.skipped) for f in calls] == [
        (N + 5_000, "catchup", 1),
        *((t, "every", 0) for t in RECENT),
    ]
    assert calls[-1].next_ms == calls[-1].next_due == N + 70_000


def test_catchup_all_fires_the_old_ones_and_the_recent_ones() -> None:
    out = run(spec(every="5s", catchup="all"), N, NOW)
    assert out.fired == {N: "catchup", N + 5_000: "catchup", **dict.fromkeys(RECENT, "every")}
    assert out.skipped == 0


def test_catchup_all_bounds_only_the_old_ones() -> None:
    # 10 min down, every second: 540 old fires, of which the newest 3 are kept
    now = N + 600_000
    out = run(spec(every="1s", catchup="all", catchup_limit=3), N, now)
    old = [t for t, trig in out.fired.items() if trig == "catchup"]
    recent = [t for t, trig in out.fired.items() if trig == "every"]
    assert old == [now - 63_000, now - 62_000, now - 61_000]
    assert recent == list(range(now - 60_000, now + 1, 1000))  # all 61 of them
    assert out.skipped == 540 - 3
    assert out.passes == 1


def test_catchup_none_skips_the_old_ones_and_fires_the_recent_ones() -> None:
    out = run(spec(every="5s", catchup="none"), N, NOW)
    assert out.fired == dict.fromkeys(RECENT, "every")
    assert out.skipped == 2
    job = spec(every="5s", catchup="none")
    first = plan_fires("0-j", job.fire_policy(), job.trigger(), N, N, NOW, WINDOW)[0]
    assert (first.fire_ms, first.trigger, first.skipped) == (N, "skip", 2)
    assert first.next_ms == RECENT[0]


@pytest.mark.parametrize("policy", ["latest", "all", "none"])
def test_a_backlog_within_the_window_is_all_fired_whatever_the_policy(policy: str) -> None:
    now = N + 60_000  # the oldest fire is overdue by exactly the window: still in it
    out = run(spec(every="5s", catchup=policy), N, now)
    assert out.fired == dict.fromkeys(range(N, now + 1, 5_000), "every")
    assert out.skipped == 0


@pytest.mark.parametrize(("policy", "fired_old"), [("latest", 1), ("all", 100), ("none", 0)])
def test_every_fire_is_either_fired_or_counted(policy: str, fired_old: int) -> None:
    # 1 h 10 min down, every 5 s: 841 fires; the chain spans several passes
    now = N + 4_200_000
    out = run(spec(every="5s", catchup=policy), N, now)
    total = (now - N) // 5_000 + 1
    recent = [t for t, trig in out.fired.items() if trig == "every"]
    assert recent == list(range(now - 60_000, now + 1, 5_000))
    assert len(out.fired) - len(recent) == fired_old
    assert len(out.fired) + out.skipped == total
    assert sorted(out.fired) == list(out.fired)  # oldest first


def test_a_long_chain_is_cut_and_goes_on_next_pass_without_skipping() -> None:
    # 200 s down, every second, keep all 139 old ones: 200 calls, over two passes
    now = N + 199_000
    out = run(spec(every="1s", catchup="all", catchup_limit=500), N, now)
    assert out.passes == 2
    assert list(out.fired) == list(range(N, now + 1, 1000))
    assert out.skipped == 0
    assert sum(trig == "every" for trig in out.fired.values()) == 61


def test_an_hourly_cron_job_down_for_hours_fires_its_latest_and_moves_on() -> None:
    # no fire lies within the window: the policy alone decides
    now = N + 3 * 3_600_000 + 1_800_000
    out = run(spec(cron="0 * * * *"), N, now)
    assert out.fired == {N + 3 * 3_600_000: "catchup"}
    assert out.skipped == 3
    assert out.next_ms == N + 4 * 3_600_000


def test_cron_jobs_are_planned_per_fire_too() -> None:
    out = run(spec(cron="*/5 * * * * *", catchup="none"), N, NOW)
    # a run records the trigger kind that started it: "cron" here, "every" above
    assert out.fired == dict.fromkeys(RECENT, "cron")
    assert out.skipped == 2


def test_jittered_fires_are_judged_by_their_nominal_time() -> None:
    job = spec(every="5s", jitter_s=3)
    out = run(job, N, NOW)
    # the last fires may wait for their jittered due time; the others are all there
    on_time = [t for t, trig in out.fired.items() if trig == "every"]
    assert on_time == RECENT[: len(on_time)] and len(on_time) >= len(RECENT) - 1
    assert out.fired[N + 5_000] == "catchup" and out.skipped == 1
