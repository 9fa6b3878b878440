"""The data-directory lock of ``redcron up`` (cli/up_lock.py): on a temporary
directory, no Redis and no child process (two descriptors of one process
conflict as two processes do: ``flock`` locks an open file, not a process)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from redcron.cli.up import next_free_port
from redcron.cli.up_lock import (
    LOCK_FILE,
    DataDirBusy,
    DataDirLock,
    Holder,
    busy_message,
    read_holder,
)


def dead_pid() -> int:
    """The pid of a process that has exited and been reaped."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_second_lock_is_refused_naming_the_holder_until_the_first_is_released(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    first = DataDirLock(data)
    first.acquire()  # creates the directory
    first.record_server(4242)
    with pytest.raises(DataDirBusy) as refused:
        DataDirLock(data).acquire()
    assert refused.value.holder == Holder(os.getpid(), 4242)
    assert refused.value.data_dir == data.resolve()

    first.release()
    first.release()  # idempotent
    second = DataDirLock(data)
    second.acquire()
    assert read_holder(data / LOCK_FILE) == Holder(os.getpid(), None)
    second.release()
    assert (data / LOCK_FILE).exists()  # never unlinked


@pytest.mark.parametrize(
    ("content", "holder"),
    [("", Holder(None, None)), ("12\n", Holder(12, None)), ("x\n7\n", Holder(None, 7))],
)
def test_read_holder_takes_what_it_can(tmp_path: Path, content: str, holder: Holder) -> None:
    (tmp_path / LOCK_FILE).write_text(content)
    assert read_holder(tmp_path / LOCK_FILE) == holder
    assert read_holder(tmp_path / "missing") == Holder(None, None)


def test_the_message_names_the_holder_the_directory_and_a_second_deployment(
    tmp_path: Path,
) -> None:
    hint = "--data-dir .redcron-2 --port 6400"
    text = busy_message(DataDirBusy(tmp_path, Holder(os.getpid(), 99)), hint)
    assert (
        f"data directory {tmp_path} is in use by another `redcron up` (pid {os.getpid()})" in text
    )
    assert "one deployment per data directory" in text
    assert f"kill {os.getpid()}" in text
    assert text.endswith(f"run a second one with a data directory and ports of its own: {hint}")
    assert "\n" not in text

    gone = dead_pid()  # up was killed; its server still shuts down
    text = busy_message(DataDirBusy(tmp_path, Holder(gone, 4242)), hint)
    assert f"the redis-server (pid 4242) of a `redcron up` (pid {gone}) that has exited" in text
    assert "kill 4242" in text

    text = busy_message(DataDirBusy(tmp_path, Holder(None, None)), hint)
    assert "in use by another `redcron up`;" in text


def test_the_suggested_port_of_a_second_deployment_is_one_nothing_listens_on() -> None:
    """A second `up` is told the next free port, not the next one: with the first
    on custom ports, `port + 1` may be the first's other port."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert next_free_port(port - 1) != port
        assert next_free_port(port - 1) > port - 1
