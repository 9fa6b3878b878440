"""Command and container tasks: programs, not Python functions, with
timeouts and exit codes.

A *command* task runs an argv (no shell unless you ask for one: ``sh -c``) on
a worker started with ``--allow-commands``, in its own process group, with a
clean environment (``PATH``, ``HOME``, ``LANG``, the task's ``env``).  A
*container* task runs ``<runtime> run --rm [--cpus] [--memory] [-e K=V]
IMAGE COMMAND`` (``container_runtime``: ``docker`` by default, or podman,
nerdctl).  Both go to the ``commands`` queue, and a tenant may create them only
once an admin grants it: ``redcron tenants set default --allow-commands``
(``make run`` grants ``default``).  How an attempt ends:

=====================  =====================  =================================
the program            the attempt            the task
=====================  =====================  =================================
exits 0                ``succeeded``          result ``{"exit_code": 0}``
exits non-zero (3)     ``failed``, exit 3     retried while it has retries,
                                              then dead (the DLQ), exit code kept
outlives ``timeout``   ``timed_out``          its process group is killed
                                              (SIGKILL); retried or dead like a
                                              failure
=====================  =====================  =================================

With ``make run`` going (its worker serves ``commands``)::

    python examples/command_tasks.py      # enqueues the three, waits, prints how each ended

``tests/integration/test_command_tasks_example.py`` runs :func:`enqueue_examples`
and the jobs below on a real worker and Redis; the container part skips where
no docker-compatible runtime can run ``true`` in :data:`IMAGE`.
"""

from __future__ import annotations

import sys

from redcron import App, Task, TaskHandle

app = App()

#: the image of the container examples (small, and on every registry mirror)
IMAGE = "alpine:3.20"


def enqueue_examples(target: App) -> dict[str, TaskHandle]:
    """Three one-off command tasks: one succeeds, one exits 3, one times out."""
    return {
        "hello": target.enqueue_command(
            ["sh", "-c", 'echo "hello, $WHO"'], env={"WHO": "command tasks"}, timeout=30
        ),
        # exits 3 twice: a retry, then the DLQ with exit code 3 on record
        "exit3": target.enqueue_command(["sh", "-c", "echo failing; exit 3"], retries=1),
        # killed after 1 s (the whole process group: sh and its sleep)
        "too_slow": target.enqueue_command(["sleep", "30"], timeout=1, retries=0),
    }


# A nightly backup as a DAG of commands: `dump` has 60 s, `upload` 5 minutes
# and two retries; `verify` runs only once upload succeeded.
app.job(
    "nightly-backup",
    cron="15 3 * * *",
    tz="UTC",
    tasks={
        "dump": Task(command=["sh", "-c", "echo dumping 3 tables"], timeout=60),
        "upload": Task(
            command=["sh", "-c", "echo uploading the dump"],
            depends_on=["dump"],
            timeout=300,
            retries=2,
        ),
        "verify": Task(command=["sh", "-c", "echo verified"], depends_on=["upload"], timeout=30),
    },
)

# A container task: the image, its command, cpu and memory limits, a timeout.
# The same in the design's body form, as POST /v1/jobs and job files take it:
#   {"name": "container-report", "task": {"image": "alpine:3.20",
#    "cmd": "sh -c 'echo report from a container'", "cpu": 0.5, "mem": "64M"},
#    "timeout_s": 60}
app.job(
    "container-report",
    tasks={
        "report": Task(
            image=IMAGE,
            command=["sh", "-c", "echo report from a container"],
            cpu=0.5,
            mem="64M",
            timeout=60,
            retries=0,
        )
    },
)


def main() -> int:
    handles = enqueue_examples(app)
    try:
        for name, handle in handles.items():
            try:
                handle.result(timeout=60)
            except Exception as exc:  # TaskFailed: how it ended is the point here
                print(f"{name}: {type(exc).__name__}")
            info = handle.info()
            print(f"{name}: {info.state}, attempts {[a.outcome for a in info.attempts]}, "
                  f"exit code {info.exit_code}")  # fmt: skip
    finally:
        app.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
