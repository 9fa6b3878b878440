"""``redis+cluster://`` and ``rediss+cluster://`` URLs taken apart and checked, and
the pieces of the cluster client that need no Redis."""

from __future__ import annotations

import pytest

from redcron.config import Settings
from redcron.engine.connection import connect
from redcron.errors import ConfigError, RedisUnavailable
from redcron.redact import masked_url
from redcron.urls import ClusterURL, check_redis_url, parse_cluster_url


def test_a_cluster_url_names_the_nodes_the_credentials_and_the_options() -> None:
    got = parse_cluster_url("redis+cluster://rc:p%40ss@n1:7000,n2,[::1]:7002?socket_timeout=2")
    assert got == ClusterURL(
        nodes=(("n1", 7000), ("n2", 6379), ("::1", 7002)),
        tls=False,
        username="rc",
        password="p@ss",
        query=(("socket_timeout", "2"),),
    )


def test_rediss_cluster_is_tls_and_a_password_alone_is_the_default_users() -> None:
    got = parse_cluster_url("rediss+cluster://:pw@n1:7000/0")
    assert (got.tls, got.username, got.password, got.nodes) == (True, None, "pw", (("n1", 7000),))


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("redis+cluster://n1:7000/3", "only database 0"),
        ("redis+cluster://n1:port", "Port could not be cast"),
        ("redis+cluster://n1:7000,,n2", "a cluster node address is empty"),
        ("redis+cluster://:pw@", "a cluster node address is empty"),
    ],
)
def test_bad_cluster_urls_are_refused_without_the_password(url: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says) as exc:
        check_redis_url(url)
    assert "pw" not in str(exc.value).replace("password", "")


def test_settings_take_a_cluster_url_and_mask_its_password() -> None:
    s = Settings(redis_url="redis+cluster://u:secret@n1:7000,n2:7001")
    assert s.redis_url.startswith("redis+cluster://")
    assert masked_url(s.redis_url) == "redis+cluster://u:***@n1:7000,n2:7001"


def test_an_unreachable_cluster_is_redis_unavailable_naming_the_url_not_the_password() -> None:
    with pytest.raises(RedisUnavailable) as exc:
        connect("redis+cluster://u:secret@127.0.0.1:1", socket_connect_timeout=0.5)
    assert "redis+cluster://u:***@127.0.0.1:1" in str(exc.value)
    assert "secret" not in str(exc.value)
