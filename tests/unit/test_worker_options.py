"""WorkerOptions: the worker's parameters, checked once and frozen (issue 17)."""

from __future__ import annotations

import dataclasses

import pytest

from redcron import App, ConfigError, Settings, ValidationError
from redcron.config import WORKER_THREADS
from redcron.worker import Worker, WorkerOptions

NOWHERE = "redis://127.0.0.1:1/0"


def test_defaults_are_the_workers() -> None:
    o = WorkerOptions()
    assert (o.slots, o.capacity, o.queues, o.tenants) == (
        WORKER_THREADS,
        2 * WORKER_THREADS,
        ("default",),
        (),
    )
    assert o.concurrency is None and o.prefetch is None  # as given: worked out in slots, capacity
    assert o.mem_bytes is None and not o.commands.allowed


def test_given_sequences_become_tuples_and_the_options_are_frozen_and_hashable() -> None:
    o = WorkerOptions(queues=["a", "b"], tenants=["acme"], mem="1K", concurrency=2, prefetch=0)
    assert (o.queues, o.tenants, o.mem_bytes, o.capacity) == (("a", "b"), ("acme",), 1024, 2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        o.concurrency = 3  # type: ignore[misc]
    assert hash(o) == hash(WorkerOptions(queues=("a", "b"), tenants=("acme",), mem="1K",
                                         concurrency=2, prefetch=0))  # fmt: skip


def test_replace_works_the_derived_fields_out_again() -> None:
    o = dataclasses.replace(WorkerOptions(concurrency=2), concurrency=5)
    assert (o.slots, o.capacity) == (5, 10)  # the prefetch default follows the slots


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"concurrency": 0}, "concurrency"),
        ({"pool": "fibers"}, "pool"),
        ({"pool": "processes"}, "pool"),  # no app_path
        ({"queues": []}, "queues"),
        ({"queues": ["commands"]}, "queues"),  # without allow_commands
        ({"tenants": ["a b"]}, "tenants"),
        ({"prefetch": -1}, "prefetch"),
        ({"lease_ttl": 0}, "lease_ttl"),
        ({"grace": -1}, "grace"),
        ({"pass_env": ["REDCRON_REDIS_URL"], "allow_commands": True}, "pass_env"),
        ({"allow_programs": ["rsync"]}, "allow_programs"),  # without allow_commands
    ],
)
def test_each_bad_value_is_refused_at_construction(kwargs: dict[str, object], field: str) -> None:
    # as before the options existed: ConfigError, or ValidationError for a value
    # checked by the model's validators
    with pytest.raises((ConfigError, ValidationError), match=field):
        WorkerOptions(**kwargs)  # type: ignore[arg-type]


def test_the_lease_ttl_default_and_minimum_come_from_the_deployment() -> None:
    settings = Settings(lease_ttl=12.0, min_lease_ttl=2.0)
    assert WorkerOptions().lease_ttl_ms(settings) == 12_000
    assert WorkerOptions(lease_ttl=2.5).lease_ttl_ms(settings) == 2_500
    with pytest.raises(ConfigError, match="below the deployment minimum"):
        WorkerOptions(lease_ttl=1.0).lease_ttl_ms(settings)


def test_worker_takes_options_or_their_fields_as_keywords_not_both() -> None:
    app = App(NOWHERE)
    by_kwargs = Worker(app, queues=["q"], concurrency=3, name="w1")
    by_options = Worker(app, WorkerOptions(queues=["q"], concurrency=3, name="w1"))
    assert by_kwargs.options == by_options.options
    assert by_kwargs.id == by_options.id == "w1"
    with pytest.raises(TypeError, match="not both"):
        Worker(app, WorkerOptions(), concurrency=3)
    with pytest.raises(TypeError):
        Worker(app, concurrency=3, no_such_option=1)
