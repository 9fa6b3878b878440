"""Which Redis a command or an ``App()`` talks to, and the one-line errors when
the URL is malformed or nothing answers there (no Redis needed: the ports used
here have nothing listening)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
from cli_output import one_error_line  # tests/helpers
from click.testing import CliRunner, Result

from redcron import App, RedisUnavailable, config
from redcron.cli.main import main
from redcron.config import (
    DATA_DIR,
    DEFAULT_REDIS_URL,
    LOCAL_URL_FILE,
    Settings,
    find_redis_url,
    read_local_url,
    remove_local_url,
    write_local_url,
)
from redcron.embedded import free_port
from redcron.errors import ConfigError
from redcron.redact import masked_url

BAD_URLS = [
    ("http://127.0.0.1:6379/0", "scheme 'http://' is not Redis"),
    ("redis://127.0.0.1:99999", "Port out of range"),
    ("redis://127.0.0.1:port/0", "Port could not be cast"),
    ("redis://127.0.0.1:6379/zero", "database must be a number"),
    # str.isdigit() is true of "²": redis-py's int() then failed with a traceback
    ("redis://127.0.0.1:6379/²", "database must be a number"),
    ("redis://127.0.0.1:6379/٣", "database must be a number"),
]


@pytest.fixture(autouse=True)
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh working directory, no REDCRON_REDIS_URL, and a process that has
    not yet said which Redis it uses."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("REDCRON_REDIS_URL", raising=False)
    monkeypatch.delenv("REDCRON_PREFIX", raising=False)
    monkeypatch.setattr(config, "_NOTICE", config._Notice())
    return tmp_path


def dead_pid() -> int:
    """The pid of a process that has exited and been reaped."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def nowhere() -> str:
    return f"redis://127.0.0.1:{free_port()}/0"


# -- the order: --redis > REDCRON_REDIS_URL > a running `up` here > the default ----------


def test_default_when_nothing_names_one() -> None:
    assert Settings.from_env().redis_url == DEFAULT_REDIS_URL
    assert App().settings.redis_url == DEFAULT_REDIS_URL


def test_a_running_up_in_this_directory_beats_the_default(
    here: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_local_url("redis://127.0.0.1:6399/0", pid=os.getpid())
    assert (here / LOCAL_URL_FILE).read_text().splitlines()[0] == "redis://127.0.0.1:6399/0"
    assert Settings.from_env().redis_url == "redis://127.0.0.1:6399/0"
    assert App().settings.redis_url == "redis://127.0.0.1:6399/0"

    monkeypatch.chdir(here.parent)  # another directory: not that up's
    assert Settings.from_env().redis_url == DEFAULT_REDIS_URL


def test_the_environment_beats_a_running_up(monkeypatch: pytest.MonkeyPatch) -> None:
    write_local_url("redis://127.0.0.1:6399/0", pid=os.getpid())
    monkeypatch.setenv("REDCRON_REDIS_URL", "redis://10.0.0.1:6379/0")
    assert Settings.from_env().redis_url == "redis://10.0.0.1:6379/0"
    assert App().settings.redis_url == "redis://10.0.0.1:6379/0"


def test_an_explicit_url_beats_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    write_local_url("redis://127.0.0.1:6399/0", pid=os.getpid())
    monkeypatch.setenv("REDCRON_REDIS_URL", "redis://10.0.0.1:6379/0")
    assert Settings.from_env(redis_url="redis://10.0.0.2:6379/0").redis_url.startswith(
        "redis://10.0.0.2"
    )
    assert App("redis://10.0.0.2:6379/0").settings.redis_url == "redis://10.0.0.2:6379/0"


def test_a_file_left_by_a_crashed_up_is_ignored(
    here: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write_local_url("redis://127.0.0.1:6399/0", pid=dead_pid())
    assert Settings.from_env().redis_url == DEFAULT_REDIS_URL
    assert "is not running" in caplog.text
    assert str(LOCAL_URL_FILE) in caplog.text


@pytest.mark.parametrize(
    "content", ["", "redis://127.0.0.1:6399/0\n", "redis://x\nnot-a-pid\n", "redis://x\n²\n"]
)
def test_a_garbled_file_is_ignored(here: Path, content: str) -> None:
    (here / LOCAL_URL_FILE).parent.mkdir()
    (here / LOCAL_URL_FILE).write_text(content)
    assert read_local_url() is None


def test_up_removes_only_its_own_record(here: Path) -> None:
    write_local_url("redis://127.0.0.1:6399/0", pid=os.getpid())
    remove_local_url(pid=os.getpid() + 1)  # another up's stop: not ours to remove
    assert read_local_url() == "redis://127.0.0.1:6399/0"
    remove_local_url(pid=os.getpid())
    assert not (here / LOCAL_URL_FILE).exists()
    remove_local_url(pid=os.getpid())  # already gone: fine


def test_a_running_up_in_a_parent_directory_is_found_as_git_finds_dot_git(
    here: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    write_local_url("redis://127.0.0.1:6399/0", pid=os.getpid())
    nested = here / "src" / "pkg"
    nested.mkdir(parents=True)
    monkeypatch.chdir(nested)
    found = find_redis_url()
    assert (found.url, found.source, found.path) == (
        "redis://127.0.0.1:6399/0", "file", here / LOCAL_URL_FILE,
    )  # fmt: skip
    assert Settings.from_env().redis_url == "redis://127.0.0.1:6399/0"
    app = App()
    assert app.settings.redis_url == "redis://127.0.0.1:6399/0"
    with caplog.at_level(logging.DEBUG, logger="redcron.config"):
        app.broker  # noqa: B018 -- the first connection says where the URL came from
    app.close()
    # from a parent: INFO, naming the file (not a warning: nothing is wrong)
    (record,) = [r for r in caplog.records if r.name == "redcron.config"]
    assert record.levelno == logging.INFO
    assert str(here / LOCAL_URL_FILE) in record.getMessage()


def test_the_nearest_file_wins_and_a_crashed_ups_is_passed_over(
    here: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    write_local_url("redis://127.0.0.1:6399/0", pid=os.getpid())
    inner = here / "inner"
    write_local_url("redis://127.0.0.1:6400/0", pid=os.getpid(), data_dir=inner / DATA_DIR)
    monkeypatch.chdir(inner)
    assert find_redis_url().url == "redis://127.0.0.1:6400/0"
    write_local_url("redis://127.0.0.1:6400/0", pid=dead_pid(), data_dir=inner / DATA_DIR)
    assert find_redis_url().url == "redis://127.0.0.1:6399/0"
    assert "is not running" in caplog.text


def test_the_search_starts_where_it_is_told_and_ends_at_the_root(here: Path) -> None:
    found = find_redis_url(env={}, start=here)
    assert (found.url, found.source, found.start) == (DEFAULT_REDIS_URL, "default", here)
    # the environment and a given URL come first, and say so
    assert find_redis_url(env={"REDCRON_REDIS_URL": "redis://e:1/0"}).source == "env"
    assert find_redis_url("redis://g:1/0", env={"REDCRON_REDIS_URL": "redis://e:1/0"}).url == (
        "redis://g:1/0"
    )


def test_app_warns_once_per_process_which_default_it_uses(
    here: Path, caplog: pytest.LogCaptureFixture
) -> None:
    first, second = App(), App()
    assert not caplog.records  # said when it connects, not when it is made
    first.broker  # noqa: B018
    second.broker  # noqa: B018
    first.close()
    second.close()
    (record,) = caplog.records
    assert (record.levelno, record.name) == (logging.WARNING, "redcron.config")
    assert record.getMessage() == (
        f"no REDCRON_REDIS_URL and no .redcron/redis.url found from {here} up; "
        f"using {DEFAULT_REDIS_URL}"
    )


def test_an_app_told_its_url_says_nothing(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    App(DEFAULT_REDIS_URL).broker  # noqa: B018
    monkeypatch.setenv("REDCRON_REDIS_URL", DEFAULT_REDIS_URL)
    App().broker  # noqa: B018
    assert not caplog.records


# -- the CLI follows the same order -------------------------------------------------


def cli(*args: str) -> Result:
    return CliRunner().invoke(main, ["dlq", "list", *args])


def test_the_cli_talks_to_the_redis_a_running_up_started(monkeypatch: pytest.MonkeyPatch) -> None:
    up_url, env_url, flag_url = nowhere(), nowhere(), nowhere()
    write_local_url(up_url, pid=os.getpid())
    result = cli()
    assert result.exit_code == 1
    assert up_url in one_error_line(result)

    monkeypatch.setenv("REDCRON_REDIS_URL", env_url)
    assert env_url in one_error_line(cli())
    assert flag_url in one_error_line(cli("--redis", flag_url))


def test_the_cli_says_once_on_stderr_which_default_it_uses(
    here: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = nowhere()  # the default, here: never a Redis this machine may run
    monkeypatch.setattr(config, "DEFAULT_REDIS_URL", url)
    result = cli()
    assert result.exit_code == 1
    notice = f"no REDCRON_REDIS_URL and no .redcron/redis.url found from {here} up; using {url}"
    assert result.stderr.splitlines()[0] == f"warning: {notice}"
    assert result.stderr.count(notice) == 1
    assert f"cannot reach Redis at {url}" in result.stderr
    # once per process: the next command in it says nothing more
    again = cli()
    assert notice not in again.stderr
    assert f"cannot reach Redis at {url}" in again.stderr


def test_the_cli_says_nothing_when_told_the_url(monkeypatch: pytest.MonkeyPatch) -> None:
    result = cli("--redis", nowhere())
    assert "warning" not in result.stderr
    monkeypatch.setenv("REDCRON_REDIS_URL", nowhere())
    assert "warning" not in cli().stderr


def test_version_says_which_redis_and_why(here: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def lines() -> list[str]:
        result = CliRunner().invoke(main, ["--version"])
        assert result.exit_code == 0, result.output
        return result.stdout.splitlines()

    assert lines() == [
        f"redcron {version('redcron')}",
        f"redis: {DEFAULT_REDIS_URL} (no REDCRON_REDIS_URL and no .redcron/redis.url found "
        f"from {here} up: the default)",
    ]
    write_local_url("redis://:s3cret@127.0.0.1:6399/0", pid=os.getpid())
    (here / "sub").mkdir()
    monkeypatch.chdir(here / "sub")
    assert lines()[1] == (
        f"redis: redis://:***@127.0.0.1:6399/0 (from {here / LOCAL_URL_FILE}, written by the "
        "`redcron up` running there)"
    )
    monkeypatch.setenv("REDCRON_REDIS_URL", "rediss://u:pw@db:6380/2")
    assert lines()[1] == "redis: rediss://u:***@db:6380/2 (from REDCRON_REDIS_URL)"


# -- a malformed URL, and a Redis that does not answer -------------------------------


@pytest.mark.parametrize(("url", "needle"), BAD_URLS)
def test_a_malformed_url_is_a_config_error_naming_it(url: str, needle: str) -> None:
    with pytest.raises(ConfigError) as err:
        App(url)
    assert needle in str(err.value)
    assert repr(url) in str(err.value)
    assert "expected redis://" in str(err.value)  # the fix


@pytest.mark.parametrize(("url", "needle"), BAD_URLS)
def test_the_cli_prints_a_malformed_url_in_one_line(url: str, needle: str) -> None:
    result = cli("--redis", url)
    assert result.exit_code == 2
    line = one_error_line(result)
    assert needle in line
    assert url in line


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("localhost:6379", "redis_url 'localhost:6379': no scheme; write redis://localhost:6379/0"),
        (
            "127.0.0.1:6379/2",
            "redis_url '127.0.0.1:6379/2': no scheme; write redis://127.0.0.1:6379/2",
        ),
        ("u:s3cret@db:6380", "redis_url 'u:***@db:6380': no scheme; write redis://u:***@db:6380/0"),
        ("/run/redis.sock", "redis_url '/run/redis.sock': no scheme; write unix:///run/redis.sock"),
        ("", "redis_url '': empty; write e.g. redis://localhost:6379/0"),
    ],
)
def test_a_url_without_a_scheme_is_answered_with_the_url_it_means(url: str, message: str) -> None:
    # it was "no scheme is not Redis", and a password written there was shown
    with pytest.raises(ConfigError) as err:
        App(url)
    assert str(err.value).startswith(message)
    assert "s3cret" not in str(err.value)
    if url == "localhost:6379":
        assert str(err.value).endswith("(or rediss:// for TLS, unix:// for a socket)")
    result = cli("--redis", url) if url else None
    if result is not None:
        assert result.exit_code == 2
        assert one_error_line(result) == f"error: {err.value}"


def test_a_malformed_url_from_the_environment_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REDCRON_REDIS_URL", "http://127.0.0.1:6379/0")
    with pytest.raises(ConfigError, match="is not Redis"):
        App()
    assert cli().exit_code == 2


def test_the_password_is_never_shown() -> None:
    assert masked_url("redis://:s3cret@h:1/0") == "redis://:***@h:1/0"
    assert masked_url("rediss://user:s3cret@h:1/0") == "rediss://user:***@h:1/0"
    assert masked_url("redis://h:1/0") == "redis://h:1/0"
    with pytest.raises(ConfigError) as err:
        App("redis://:s3cret@127.0.0.1:99999/0")
    assert "s3cret" not in str(err.value)
    assert "redis://:***@127.0.0.1:99999/0" in str(err.value)


def test_enqueue_with_redis_down_raises_redis_unavailable() -> None:
    port = free_port()
    app = App(f"redis://:s3cret@127.0.0.1:{port}/0")

    @app.task
    def add(x: int, y: int) -> int:
        return x + y

    try:
        with pytest.raises(RedisUnavailable) as err:
            add.enqueue(1, 2)
    finally:
        app.close()
    message = str(err.value)
    assert f"redis://:***@127.0.0.1:{port}/0" in message
    assert "s3cret" not in message
    assert "REDCRON_REDIS_URL" in message  # the fix


def test_the_cli_prints_redis_down_in_one_line() -> None:
    url = nowhere()
    result = cli("--redis", url)
    assert result.exit_code == 1
    line = one_error_line(result)
    assert f"cannot reach Redis at {url}" in line
    assert "redcron up" in line
