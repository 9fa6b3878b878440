"""docs/api.md's curl walkthrough works pasted in order: its ``sh`` blocks (those
of the "curl" section) run, in order, in one bash with ``-euo pipefail``,
against what ``make run`` starts (the worker and the dashboard of ``redcron
up``'s own child specs, on the session's Redis), from a directory holding
the admin token where ``make run`` writes it.  Only the dashboard's address is
rewritten (the doc says :8000; the test takes a free port), so the doc cannot
drift from the API."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from polling import wait_for  # tests/helpers is on sys.path

from redcron.cli.up import EXAMPLES_APP, child_specs
from redcron.cli.up_setup import write_admin_token
from redcron.config import DATA_DIR

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "api.md"
DOC_URL = "http://127.0.0.1:8000"
ADMIN = "walkthrough-admin-token"

pytestmark = pytest.mark.skipif(
    not (shutil.which("curl") and shutil.which("jq") and shutil.which("bash")),
    reason="the walkthrough needs bash, curl and jq",
)


def walkthrough_blocks(text: str) -> list[str]:
    """The ``sh`` blocks of the "## curl" section, in order."""
    section = text.split("\n## curl\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^```sh\n(.*?)^```$", section, flags=re.S | re.M)


def test_the_walkthrough_blocks_are_found() -> None:
    blocks = walkthrough_blocks(DOC.read_text())
    assert len(blocks) >= 4
    assert DOC_URL in blocks[0]
    # acme's token for acme's routes: the mismatch that made it 403 and 404
    assert '"kind": "tenant", "tenant": "acme"' in blocks[0]
    # no CLI: the admin mints acme's token over the API
    assert "redcron " not in "".join(blocks)
    assert "tenant=default" not in "".join(blocks)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def make_run(redis_url: str, key_prefix: str, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """``make run``'s worker and dashboard (``redcron up``'s child specs) on the
    session's Redis under the test's prefix; yields (base URL, the clone-like
    directory the admin token was written to)."""
    port = _free_port()
    every = child_specs(
        EXAMPLES_APP, redis_url, 2, 5.0, "INFO", dashboard_port=port, admin_token=ADMIN
    )
    specs = [s for s in every if s.name in ("worker", "dashboard")]  # no cron: no beat
    env = {
        **os.environ,
        "REDCRON_PREFIX": key_prefix.rstrip(":"),
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "src")]),
    }
    with contextlib.ExitStack() as stack:
        procs = []
        for spec in specs:
            log = stack.enter_context((tmp_path / f"{spec.name}.log").open("w"))
            proc = subprocess.Popen(
                spec.argv, env={**env, **spec.env}, cwd=ROOT, stdout=log, stderr=log
            )
            procs.append(proc)
        try:
            base = f"http://127.0.0.1:{port}"
            wait_for(lambda: _answers(f"{base}/v1/openapi.json"), "the dashboard listens")
            yield base, tmp_path
        finally:
            for proc in procs:
                proc.terminate()
            for proc in procs:
                proc.wait(15)
            for spec in specs:
                print(f"----- {spec.name} -----\n{(tmp_path / f'{spec.name}.log').read_text()}")


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


def test_the_walkthrough_runs_pasted_in_order(
    make_run: tuple[str, Path], key_prefix: str, redis_url: str
) -> None:
    base, clone = make_run
    write_admin_token(ADMIN, clone / DATA_DIR)
    script = "\n".join(walkthrough_blocks(DOC.read_text())).replace(DOC_URL, base)
    env = {
        **os.environ,
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]),
        "REDCRON_REDIS_URL": redis_url,
        "REDCRON_PREFIX": key_prefix.rstrip(":"),
    }
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=clone, env=env, capture_output=True, text=True, timeout=90,
    )  # fmt: skip
    assert done.returncode == 0, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    out = done.stdout
    assert '"weight": 3' in out  # the admin's PUT
    assert "attempt 4 fails on purpose (succeeds on 99)" in out  # the dead task's DLQ entry
    # the replay: back on its queue (the worker may have leased it already, or
    # run it: it fails again, as it fails until attempt 99, and waits to retry)
    assert out.split()[-1] in ('"ready"', '"leased"', '"running"', '"retry_wait"'), out
