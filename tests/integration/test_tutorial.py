"""docs/tutorial.md runs: every ```sh and ```python block, in the page's order,
against what ``make run`` starts (its worker: ``redcron up``'s own child spec,
with the grant ``up`` gives the ``default`` tenant) on the session's Redis
under the test's prefix.

The convention, as the page states it: a ```console block is shown, not run;
it is for commands that start a process that runs until stopped (``make
run``), which the test starts itself.  Any other fence fails the test, so a
block cannot be skipped by a typo.

Each ``sh`` block runs on its own in ``bash -euo pipefail``, in one
directory (a file one block writes, a later one reads); ``redcron`` is the
test's interpreter's, and finds Redis through ``REDCRON_REDIS_URL`` as it
finds ``make run``'s through ``.redcron/redis.url``.  The ``python`` blocks
share one namespace, with the same environment and directory."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from grants import grant_commands
from polling import wait_for  # tests/helpers is on sys.path

from redcron import App
from redcron.cli.up import EXAMPLES_APP, child_specs
from redcron.engine.workers import WorkerRegistry

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "tutorial.md"
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```$", re.M | re.S)
#: languages run, and the one shown only (long-running processes)
RUN = {"sh", "python"}
SHOWN = {"console"}


def blocks() -> list[tuple[int, str, str]]:
    """(line, language, source) of every fenced block of the page."""
    text = DOC.read_text(encoding="utf-8")
    return [
        (text.count("\n", 0, m.start()) + 2, m.group(1), m.group(2)) for m in FENCE.finditer(text)
    ]


def test_every_block_is_run_or_is_the_one_long_running_start() -> None:
    found = blocks()
    odd = [(line, lang) for line, lang, _src in found if lang not in RUN | SHOWN]
    assert not odd, f"docs/tutorial.md: fences neither run nor shown as console: {odd}"
    shown = [src for _line, lang, src in found if lang in SHOWN]
    # kept minimal: the one block that starts make run
    assert len(shown) == 1 and "make run" in shown[0]
    assert sum(lang == "sh" for _l, lang, _s in found) >= 4
    assert sum(lang == "python" for _l, lang, _s in found) >= 1


def test_the_guarantees_are_named_with_a_link_to_the_concepts() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert "docs/concepts.md" in text
    assert "at least once" in text and "exactly once" in text and "idem_key" in text


@pytest.fixture
def make_run(redis_url: str, key_prefix: str, tmp_path: Path) -> Iterator[None]:
    """``make run``'s worker on the session's Redis under the test's prefix,
    and the grant ``redcron up`` gives the default tenant."""
    prefix = key_prefix.rstrip(":")
    app = App(redis_url, prefix=prefix)
    grant_commands(app)
    (spec,) = [
        s for s in child_specs(EXAMPLES_APP, redis_url, 4, 5.0, "INFO") if s.name == "worker"
    ]
    env = {
        **os.environ,
        **spec.env,
        "REDCRON_PREFIX": prefix,
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "src")]),
    }
    log_path = tmp_path / "worker.log"
    with contextlib.ExitStack() as stack:
        log = stack.enter_context(log_path.open("w"))
        proc = subprocess.Popen(spec.argv, env=env, cwd=ROOT, stdout=log, stderr=log)
        try:
            # the page's `workers list` shows it: wait until it registered
            registry = WorkerRegistry(app.broker)
            wait_for(lambda: registry.list(), "make run's worker registers")
            yield
        finally:
            proc.terminate()
            proc.wait(15)
            app.close()
            print(f"----- worker -----\n{log_path.read_text()}")


# slow: the page runs `redcron` ten times, and each is a new interpreter that
# imports the CLI (about 1 s on an idle machine, 3 s on a loaded one); the
# run itself takes 2 s.  Running the page as a user pastes it is the point.
@pytest.mark.slow
def test_the_tutorial_runs_in_order(
    make_run: None,
    redis_url: str,
    key_prefix: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    here = tmp_path / "clone"
    here.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("REDCRON_")}
    env.update(
        PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]),
        REDCRON_REDIS_URL=redis_url,
        REDCRON_PREFIX=key_prefix.rstrip(":"),
    )
    for name in ("REDCRON_REDIS_URL", "REDCRON_PREFIX"):
        monkeypatch.setenv(name, env[name])
    monkeypatch.chdir(here)
    namespace: dict[str, object] = {"__name__": "tutorial"}
    outputs: list[str] = []
    for line, lang, source in blocks():
        if lang == "sh":
            done = subprocess.run(
                ["bash", "-euo", "pipefail", "-c", source],
                cwd=here, env=env, capture_output=True, text=True, timeout=150,
            )  # fmt: skip
            assert done.returncode == 0, (
                f"docs/tutorial.md:{line}: exit {done.returncode}\n"
                f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
            )
            outputs.append(done.stdout)
        elif lang == "python":
            # padded so a traceback names the line in the page
            exec(compile("\n" * (line - 1) + source, str(DOC), "exec"), namespace)
    out = "\n".join(outputs)
    assert "daily-sales" in out and "cron 0 6 * * *" in out  # jobs show
    assert re.search(r"merge\s+succeeded\s+2/", out), out  # runs show: merge's retry
    assert "1 job: 1 created" in out
    # the clean-up ran: both jobs are gone
    app = App(redis_url, prefix=key_prefix.rstrip(":"))
    try:
        assert [j.name for j in app.jobs.list_jobs("default")] == []
    finally:
        app.close()
