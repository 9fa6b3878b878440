"""config: defaults < REDCRON_* environment < explicit overrides; unknown keys raise."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from redcron.config import DEFAULT_REDIS_URL, Settings
from redcron.errors import ConfigError


def test_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no .redcron/redis.url of a running `redcron up` here
    s = Settings.from_env(env={})
    assert s == Settings()
    assert s.redis_url == DEFAULT_REDIS_URL
    assert s.prefix == "rc"
    assert s.shards is None  # the deployment's; 1 for a new one
    assert s.min_lease_ttl <= s.lease_ttl


def test_env_overrides_defaults_with_types() -> None:
    s = Settings.from_env(
        env={
            "REDCRON_REDIS_URL": "redis://example:6380/2",
            "REDCRON_SHARDS": "8",
            "REDCRON_LEASE_TTL": "12.5",
            "REDCRON_PREFIX": "prod",
            "REDCRON_UNRELATED": "ignored",
            "OTHER": "x",
        }
    )
    assert s.redis_url == "redis://example:6380/2"
    assert s.shards == 8
    assert isinstance(s.shards, int)
    assert s.lease_ttl == 12.5
    assert s.prefix == "prod"


def test_explicit_overrides_beat_env_and_none_falls_through() -> None:
    env = {"REDCRON_SHARDS": "8", "REDCRON_MAX_RETRIES": "7"}
    s = Settings.from_env(env=env, shards=2, max_retries=None)
    assert s.shards == 2
    assert s.max_retries == 7


def test_empty_env_value_is_ignored() -> None:
    assert Settings.from_env(env={"REDCRON_SHARDS": ""}).shards is None


def test_env_is_read_only_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REDCRON_SHARDS", "9")
    assert Settings.from_env(env={}).shards is None  # unset: the deployment's (1 when new)
    assert Settings.from_env().shards == 9
    assert Settings().shards is None


def test_unknown_override_raises() -> None:
    with pytest.raises(ConfigError, match="lease_tll"):
        Settings.from_env(env={}, lease_tll=5)


def test_unknown_constructor_field_raises() -> None:
    with pytest.raises(TypeError):
        Settings(lease_tll=5)  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("var", "raw"),
    [
        ("REDCRON_SHARDS", "many"),
        ("REDCRON_SHARDS", "2.5"),
        ("REDCRON_LEASE_TTL", "1m"),
        ("REDCRON_SHARDS", "٣"),  # int() reads Arabic-Indic and fullwidth digits
        ("REDCRON_LEASE_TTL", "\uff11.5"),
    ],
)
def test_bad_env_value_names_the_variable(var: str, raw: str) -> None:
    with pytest.raises(ConfigError) as info:
        Settings.from_env(env={var: raw})
    assert var in str(info.value)
    assert raw in str(info.value)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"shards": 0}, "shards"),
        ({"lease_ttl": 1.0, "min_lease_ttl": 2.0}, "lease_ttl"),
        ({"lease_ttl": 1.0, "min_lease_ttl": 0.0}, "min_lease_ttl"),
        ({"retry_base": 10.0, "retry_cap": 1.0}, "retry_cap"),
        ({"retry_base": -1.0}, "retry_base"),
        ({"max_retries": -1}, "max_retries"),
        ({"prefix": ""}, "prefix"),
        ({"prefix": "a{b"}, "prefix"),
        ({"prefix": "a b"}, "prefix"),
    ],
)
def test_invalid_values_are_refused_naming_the_field(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        Settings(**kwargs)  # type: ignore[arg-type]


def test_invalid_env_value_is_refused() -> None:
    with pytest.raises(ConfigError, match="shards"):
        Settings.from_env(env={"REDCRON_SHARDS": "0"})


def test_settings_are_frozen() -> None:
    s = Settings()
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.shards = 4  # type: ignore[misc]
