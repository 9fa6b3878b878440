"""The pure parts of ``store/stats.py``: minutes, quantiles from buckets, parsing
the hashes the scripts write (no Redis: the hashes are plain dicts here)."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime

import pytest

from redcron.errors import ValidationError
from redcron.keys import (
    DURATION_BUCKETS_S,
    DURATION_NAMES,
    LAG_BUCKETS_S,
    lag_bucket_label,
    lag_bucket_labels,
    lua_key_functions,
)
from redcron.model import LagSummary, MinuteActivity
from redcron.store import stats

T = 1_800_000_000_000  # a minute boundary (ms)
M = T // 60_000


def counts(**by_label: int) -> list[int]:
    """Per-bucket counts from {label: n}; labels written with _ for . (0_05 = 0.05)."""
    want = {k.replace("_", ".").replace("inf", "+Inf"): n for k, n in by_label.items()}
    return [want.get(label, 0) for label in stats.LABELS]


def test_bucket_labels_are_prometheus_le_values() -> None:
    assert lag_bucket_label(0.025) == "0.025"
    assert lag_bucket_label(1) == "1"
    assert lag_bucket_label(300) == "300"
    assert lag_bucket_label(math.inf) == "+Inf"
    labels = lag_bucket_labels()
    assert labels[-1] == "+Inf" and len(labels) == len(LAG_BUCKETS_S) + 1
    assert list(LAG_BUCKETS_S) == sorted(LAG_BUCKETS_S)


def test_lua_gets_the_same_bucket_bounds() -> None:
    # defined once in keys.py, generated into every script that uses them
    line = next(x for x in lua_key_functions().splitlines() if "LAG_BUCKETS =" in x)
    pairs = re.findall(r'\{(\d+|math\.huge), "([^"]+)"\}', line)
    assert [label for _ms, label in pairs] == list(lag_bucket_labels())
    assert [int(ms) for ms, _label in pairs[:-1]] == [round(b * 1000) for b in LAG_BUCKETS_S]
    assert pairs[-1][0] == "math.huge"


def test_window_ends_with_the_current_minute() -> None:
    assert stats.minute_of(T) == M
    assert stats.minute_of(T + 59_999) == M
    assert list(stats.window(T + 30_000, 3)) == [M - 2, M - 1, M]
    assert len(stats.window(T, 60)) == 60


@pytest.mark.parametrize("bad", [0, -1, stats.MAX_MINUTES + 1, 1.5, True])
def test_a_window_longer_than_the_figures_live_is_refused(bad: object) -> None:
    with pytest.raises(ValidationError, match="minutes"):
        stats.check_minutes(bad)  # type: ignore[arg-type]


def test_quantile_is_the_upper_bound_of_its_bucket() -> None:
    assert stats.quantile_bound([0] * len(stats.LABELS), 0.5) is None
    c = counts(**{"0_01": 50, "1": 49, "30": 1})
    assert stats.quantile_bound(c, 0.5) == 0.01  # rank 50: the first bucket holds it
    assert stats.quantile_bound(c, 0.51) == 1
    assert stats.quantile_bound(c, 0.99) == 1  # rank 99
    assert stats.quantile_bound(c, 1.0) == 30
    one = counts(**{"2_5": 1})
    assert stats.quantile_bound(one, 0.01) == 2.5 == stats.quantile_bound(one, 0.99)
    assert stats.quantile_bound(counts(inf=1), 0.5) == math.inf


def test_summary_reads_a_lag_past_the_last_bound_as_that_bound() -> None:
    assert stats.summarize_lag(counts(), 60) == LagSummary(60, 0, None, None, None, 0)
    s = stats.summarize_lag(counts(**{"0_05": 98, "5": 1, "inf": 1}), 60)
    assert s == LagSummary(
        minutes=60, fires=100, p50_s=0.05, p99_s=5, max_bucket_s=300, beyond_last_bucket=1
    )


def test_tenant_fields_split_on_the_last_bar() -> None:
    assert stats.split_field(b"acme|timed_out") == ("acme", "timed_out")
    assert stats.split_field("a.b-c|+Inf") == ("a.b-c", "+Inf")
    got = stats.per_tenant({b"acme|succeeded": b"3", "beta|failed": "2"})
    assert got == {("acme", "succeeded"): 3, ("beta", "failed"): 2}
    total = dict(got)
    stats.add_counts(total, {("acme", "succeeded"): 1, ("acme", "lost"): 1})
    assert total == {("acme", "succeeded"): 4, ("beta", "failed"): 2, ("acme", "lost"): 1}


def test_lifetime_histogram_is_summed_over_shards_and_made_cumulative() -> None:
    h = stats.lag_histogram(
        [
            {b"0.01": b"2", b"5": b"1", b"count": b"3", b"sum_ms": b"4020"},
            {"+Inf": "1", "count": "1", "sum_ms": "400000"},
            {},
        ]
    )
    assert h.count == 4 and h.sum_s == pytest.approx(404.02)
    cum = dict(h.cumulative())
    assert list(cum) == list(stats.LABELS)
    assert cum["0.01"] == 2 and cum["2.5"] == 2 and cum["5"] == 3 and cum["300"] == 3
    assert cum["+Inf"] == 4 == h.count
    assert stats.lag_histogram([]).cumulative()[-1] == ("+Inf", 0)


def test_activity_is_zero_filled_and_sums_shards() -> None:
    span = stats.window(T + 120_000, 3)  # M, M+1, M+2
    shard0 = [{b"acme|succeeded": b"3", b"acme|failed": b"1"}, {}, {b"acme|failed": b"2"}]
    shard1 = [{}, {b"beta|succeeded": b"5"}, {b"beta|failed": b"1"}]
    minute = [datetime.fromtimestamp((M + i) * 60, tz=UTC) for i in range(3)]
    assert stats.activity_of(span, None, shard0 + shard1) == [
        MinuteActivity(minute[0], 3, 1),
        MinuteActivity(minute[1], 5, 0),
        MinuteActivity(minute[2], 0, 3),
    ]
    assert [(a.succeeded, a.failed) for a in stats.activity_of(span, "acme", shard0)] == [
        (3, 1),
        (0, 0),
        (0, 2),
    ]
    assert stats.activity_of(span, "acme", [{}, {}, {}])[0] == MinuteActivity(minute[0], 0, 0)


def test_lag_counts_per_tenant_or_all() -> None:
    hashes = [{b"acme|0.05": b"2", b"beta|0.05": b"1"}, {b"acme|+Inf": b"1", b"x|junk": b"9"}]
    assert stats.lag_counts("acme", hashes) == counts(**{"0_05": 2, "inf": 1})
    assert stats.lag_counts(None, hashes) == counts(**{"0_05": 3, "inf": 1})
    assert stats.lag_counts_by_tenant(hashes) == {
        "acme": counts(**{"0_05": 2, "inf": 1}),
        "beta": counts(**{"0_05": 1}),
    }  # a field that names no bucket is not read


def test_a_tenants_duration_hash_reads_as_one_histogram_per_name() -> None:
    labels = stats.DURATION_LABELS
    fields = {
        b"task:#names": b"2",
        b"task:etl.load|0.1": b"2",
        b"task:etl.load|+Inf": b"1",
        b"task:etl.load|sum_ms": b"7200150",
        "task:a|b|1": "1",  # a name holding the separator: split at the last one
        "task:a|b|sum_ms": "900",
        "task:(other)|1": "4",
        "task:(other)|sum_ms": "2000",
        "task:stray|nonsense": "9",  # no such bucket: ignored
        "job:nightly|1": "5",  # the runs' histograms: another prefix
        "job:nightly|sum_ms": "800",
    }
    assert sorted(stats.durations_of(fields, "job:")) == ["nightly"]
    got = stats.durations_of(fields, "task:")
    assert sorted(got) == ["(other)", "a|b", "etl.load"]
    load = got["etl.load"]
    assert load.count == 3 and load.sum_s == 7200.15
    assert load.counts[labels.index("0.1")] == 2 and load.counts[-1] == 1
    cumulative = dict(load.cumulative())
    assert cumulative["0.025"] == 0 and cumulative["0.1"] == 2 and cumulative["+Inf"] == 3
    assert got["a|b"].count == 1 and got["(other)"].count == 4
    assert labels[-1] == "+Inf" and len(labels) == len(DURATION_BUCKETS_S) + 1


def test_the_scripts_get_the_duration_buckets_and_cap_from_keys_py() -> None:
    lua = lua_key_functions().splitlines()
    line = next(x for x in lua if "DURATION_BUCKETS =" in x)
    pairs = re.findall(r'\{(\d+|math\.huge), "([^"]+)"\}', line)
    assert [label for _ms, label in pairs] == list(stats.DURATION_LABELS)
    assert [int(ms) for ms, _label in pairs[:-1]] == [round(b * 1000) for b in DURATION_BUCKETS_S]
    assert f'local DURATION_NAMES, DURATION_OTHER = {DURATION_NAMES}, "(other)"' in lua
