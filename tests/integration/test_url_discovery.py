"""Which Redis a command talks to, against the test server: from a
subdirectory, the one a ``redcron up`` in a parent directory recorded in
``.redcron/redis.url`` (found as git finds ``.git``; a real command in a
subprocess); and a database the server does not have is refused naming the URL."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_output import one_error_line  # tests/helpers
from click.testing import CliRunner

from redcron import App, ConfigError
from redcron.cli.main import main
from redcron.config import DATA_DIR, LOCAL_URL_FILE, write_local_url

JOB = """\
name: found-from-below
every: 1h
tasks:
  only: examples.tasks.add
"""


@pytest.fixture
def app(redis_url: str, key_prefix: str) -> Iterator[App]:
    a = App(redis_url, prefix=key_prefix.rstrip(":"))
    yield a
    a.close()


def test_a_command_in_a_subdirectory_uses_the_redis_recorded_in_a_parent(
    tmp_path: Path, redis_url: str, key_prefix: str, app: App
) -> None:
    # this process stands in for the `redcron up` that serves it: its pid is alive
    write_local_url(redis_url, pid=os.getpid(), data_dir=tmp_path / DATA_DIR)
    nested = tmp_path / "services" / "billing"
    nested.mkdir(parents=True)
    (nested / "job.yaml").write_text(JOB)
    env = {k: v for k, v in os.environ.items() if not k.startswith("REDCRON_")}
    env["REDCRON_PREFIX"] = key_prefix.rstrip(":")  # no REDCRON_REDIS_URL: the file decides
    done = subprocess.run(
        [sys.executable, "-m", "redcron.cli.main", "--loglevel", "info",
         "jobs", "apply", "-f", "job.yaml", "--allow-unregistered"],
        cwd=nested, env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert app.jobs.get("found-from-below").name == "found-from-below"
    # where the URL came from is said at INFO (not a warning: nothing is wrong)
    assert f"using {redis_url} from {tmp_path / LOCAL_URL_FILE}" in done.stderr
    assert "no REDCRON_REDIS_URL" not in done.stderr


def test_a_database_the_server_does_not_have_is_named_with_its_url(redis_url: str) -> None:
    url = redis_url.rsplit("/", 1)[0] + "/9999"
    app = App(url)
    app.task(name="t.noop")(lambda: None)
    try:
        # it was redis-py's bare "DB index is out of range", and the check of the
        # eviction policy before it said "cannot read maxmemory-policy"
        with pytest.raises(ConfigError) as err:
            app.enqueue("t.noop")
    finally:
        app.close()
    assert f"redis_url {url!r}: the server has no such database" in str(err.value)
    result = CliRunner().invoke(main, ["dlq", "list", "--redis", url])
    assert result.exit_code == 2
    assert url in one_error_line(result)
