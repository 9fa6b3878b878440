"""``redis+sentinel://`` URLs taken apart and checked, the durability settings, and
passwords masked in every URL form (no Redis needed)."""

from __future__ import annotations

import pytest

from redcron.config import Settings
from redcron.errors import ConfigError
from redcron.redact import masked_url
from redcron.urls import SentinelURL, parse_sentinel_url


def test_a_sentinel_url_names_the_sentinels_the_master_the_db_and_the_options() -> None:
    got = parse_sentinel_url(
        "redis+sentinel://rc:p%40ss@s1:26380,s2,[::1]:5/mymaster/3"
        "?socket_timeout=2&sentinel_password=sp&sentinel_username=su"
    )
    assert got == SentinelURL(
        sentinels=(("s1", 26380), ("s2", 26379), ("::1", 5)),
        master="mymaster",
        db=3,
        username="rc",
        password="p@ss",
        sentinel_username="su",
        sentinel_password="sp",
        query=(("socket_timeout", "2"),),
    )


def test_the_db_defaults_to_0_and_a_password_alone_is_the_default_users() -> None:
    got = parse_sentinel_url("redis+sentinel://:pw@s1/mymaster")
    assert (got.db, got.username, got.password) == (0, None, "pw")


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("redis+sentinel://s1:26379/", "no master name"),
        ("redis+sentinel://s1:26379", "no master name"),
        ("redis+sentinel://s1:port/m", "Port could not be cast"),
        ("redis+sentinel://s1,,s2/m", "a sentinel address is empty"),
        ("redis+sentinel://:pw@s1/m/zero", "database must be a number"),
        ("redis+sentinel://:pw@s1/m/²", "database must be a number"),  # int() refused it
    ],
)
def test_a_bad_sentinel_url_is_a_config_error_without_the_password(url: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says) as exc:
        Settings(redis_url=url)
    assert "redis+sentinel://" in str(exc.value)
    assert ":pw@" not in str(exc.value)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis+sentinel://u:pw@s1,s2:1/m", "redis+sentinel://u:***@s1,s2:1/m"),
        (
            "redis+sentinel://s1/m?sentinel_password=pw",
            "redis+sentinel://s1/m?sentinel_password=***",
        ),
        ("rediss://u:pw@h:1/0?ssl_ca_certs=/ca.crt", "rediss://u:***@h:1/0?ssl_ca_certs=/ca.crt"),
    ],
)
def test_passwords_are_masked_in_every_url_form(url: str, shown: str) -> None:
    assert masked_url(url) == shown


def test_durability_settings_are_checked_and_read_from_the_environment() -> None:
    s = Settings.from_env(
        {"REDCRON_DURABILITY": "strict", "REDCRON_DURABILITY_REPLICAS": "2"},
        redis_url="redis://127.0.0.1:1/0",
    )
    assert (s.durability, s.durability_replicas, s.durability_timeout) == ("strict", 2, 1.0)
    with pytest.raises(ConfigError, match="durability: 'always' is not one of normal, strict"):
        Settings(durability="always")
    with pytest.raises(ConfigError, match="durability_replicas"):
        Settings(durability_replicas=-1)
    with pytest.raises(ConfigError, match="durability_timeout"):
        Settings(durability_timeout=0)
