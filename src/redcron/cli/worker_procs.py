"""``redcron worker --procs N``: N worker processes under one supervisor.

The supervisor (the process ``redcron worker --procs N`` runs in) runs no task
and holds no lease.  It starts N children, each a plain ``redcron worker``
with the same options (its own lease loop and ``-c`` slots) and an id of its
own, ``<supervisor id>.<k>`` (``<supervisor id>.<k>.<n>`` after its n-th
restart), and each publishes the supervisor's id in the worker registry, so
``redcron workers list``, the Workers page and ``GET /v1/workers`` show them
together.

- A child that exits while the supervisor is not stopping is restarted (one
  WARNING line with its exit code), after a delay that doubles while it keeps
  dying young (:class:`Restarts`); its registry entry goes at once, and its
  leases expire and are reaped like any dead worker's.  One that dies young
  :data:`FAILED_STARTS` times in a row (a bad setting, a broken deployment)
  stops them all: one error line, exit code 1, no restart storm.
- The first SIGINT/SIGTERM/SIGHUP is passed on to every child, which drains (its
  prefetched leases go back at once, running tasks get ``--grace``); a second
  SIGINT/SIGTERM is passed on too (each hands back what still runs), and what
  is left 10 s later is killed.
- The children are started with a parent-death signal
  (:func:`~redcron.lifeline.terminate_with_parent`): a SIGKILLed supervisor
  takes them with it (each gets SIGTERM and drains).

Starting, signalling and stopping the children is cli/supervise.py's, as for
``redcron up``.  The children get the Redis URL through their environment,
never in argv (``ps`` shows argv to every user).
"""

from __future__ import annotations

import contextlib
import logging
import signal
import sys
import time
from dataclasses import dataclass, field

import click

from redcron.cli.supervise import ChildSpec, Stopper, terminate
from redcron.engine import TRANSIENT, WorkerRegistry

log = logging.getLogger(__name__)

#: the most worker processes one supervisor runs
MAX_PROCS = 64
#: a child that ran this long before it exited did not die young: its next
#: restart waits :data:`RESTART_MIN_S` and its count of young deaths starts over
STABLE_S = 10.0
#: young deaths in a row of one child after which the supervisor gives up
FAILED_STARTS = 5
#: the first restart delay after a young death (doubled for each next one), and its cap
RESTART_MIN_S = 0.5
RESTART_CAP_S = 30.0
#: extra seconds a child gets past its --grace, once told to stop, before SIGKILL
KILL_MARGIN_S = 5.0
#: ``redcron worker`` parameters a child is not given in argv: the supervisor's
#: own, and the Redis URL (a password in argv shows in ``ps``: the environment)
NOT_PASSED = frozenset({"procs", "redis_url", "name", "supervisor"})


@dataclass
class Restarts:
    """When one child is restarted, from how long each run lasted (pure)."""

    #: its young deaths in a row (runs shorter than :data:`STABLE_S`)
    young: int = 0

    def after_exit(self, ran_s: float) -> float | None:
        """Seconds to wait before the restart of a child that exited after
        ``ran_s`` seconds; None: it died young :data:`FAILED_STARTS` times in a
        row, give up."""
        if ran_s >= STABLE_S:
            self.young = 0
            return RESTART_MIN_S
        self.young += 1
        if self.young >= FAILED_STARTS:
            return None
        return min(RESTART_CAP_S, RESTART_MIN_S * 2.0 ** (self.young - 1))


def exit_text(code: int) -> str:
    """``with code 3``, or ``killed by SIGKILL`` (a negative Popen returncode)."""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"with code {code}"


def child_argv(ctx: click.Context) -> list[str]:
    """The ``redcron worker`` options of ``ctx`` that were given (command line,
    environment), as a child's argv: all but :data:`NOT_PASSED`; options left at
    their default are left to the child's default (the same code)."""
    argv: list[str] = []
    for param in ctx.command.params:
        if not isinstance(param, click.Option) or param.name in NOT_PASSED or param.name is None:
            continue
        source = ctx.get_parameter_source(param.name)
        if source is None or source == click.core.ParameterSource.DEFAULT:
            continue
        value = ctx.params.get(param.name)
        flag = max(param.opts, key=len)
        if param.is_flag:
            if value:
                argv.append(flag)
            elif param.secondary_opts:
                argv.append(max(param.secondary_opts, key=len))
        elif param.multiple:
            for item in value or ():
                argv += [flag, str(item)]
        elif value is not None:
            argv += [flag, str(value)]
    return argv


@dataclass
class Child:
    """One of the supervisor's worker processes, across its restarts."""

    k: int
    supervisor: str
    #: how many times it was restarted
    restarts: int = 0
    spec: ChildSpec | None = None
    #: when its current process started (monotonic)
    started: float = 0.0
    #: when it is to be restarted (monotonic), while it waits for that
    restart_at: float | None = None
    policy: Restarts = field(default_factory=Restarts)

    @property
    def id(self) -> str:
        """Its worker id now: ``<supervisor>.<k>``, then ``.<n>`` for its n-th restart."""
        base = f"{self.supervisor}.{self.k}"
        return f"{base}.{self.restarts}" if self.restarts else base

    def start(self, argv: list[str], env: dict[str, str], now: float) -> None:
        self.spec = ChildSpec(
            name=f"worker process {self.k}",
            argv=[*argv, "--name", self.id, "--supervisor", self.supervisor],
            where=self.id,
            env=env,
        )
        self.spec.start()
        self.started = now
        self.restart_at = None
        assert self.spec.proc is not None
        log.info(
            "worker process %d started: pid %d, worker %s", self.k, self.spec.proc.pid, self.id
        )


def run_procs(
    procs: int,
    supervisor: str,
    argv: list[str],
    env: dict[str, str],
    grace: float,
    registry: WorkerRegistry | None = None,
) -> int:
    """Run ``procs`` children (``argv``: a ``redcron worker`` command line
    without ``--procs``; ``env`` on top of ours) until SIGINT/SIGTERM (0), or
    until one dies young :data:`FAILED_STARTS` times in a row (1).  The dead
    children's entries are taken out of ``registry`` when given."""
    cli = [sys.executable, "-m", "redcron.cli.main", "worker", *argv]
    stopper = Stopper()
    children = [Child(k, supervisor) for k in range(1, procs + 1)]
    code = 1
    try:
        stopper.install()
        for child in children:
            child.start(cli, env, time.monotonic())
        log.info(
            "supervisor %s: %d worker processes; SIGTERM or Ctrl-C drains them all",
            supervisor,
            procs,
        )
        code = _watch(children, cli, env, stopper, registry)
        if code == 0:
            log.info("supervisor %s: stopping %d worker processes", supervisor, procs)
    finally:
        specs = [c.spec for c in children if c.spec is not None]
        terminate(specs, grace + KILL_MARGIN_S, stopper, forward_second=True)
        stopper.uninstall()
    if code == 0:
        log.info("supervisor %s stopped", supervisor)
    return code


def _watch(
    children: list[Child],
    cli: list[str],
    env: dict[str, str],
    stopper: Stopper,
    registry: WorkerRegistry | None,
) -> int:
    while not stopper.event.wait(0.2):
        now = time.monotonic()
        for child in children:
            if child.restart_at is not None:
                if now >= child.restart_at:
                    child.restarts += 1
                    child.start(cli, env, now)
                continue
            assert child.spec is not None and child.spec.proc is not None
            rc = child.spec.proc.poll()
            if rc is None:
                continue
            ran = now - child.started
            delay = child.policy.after_exit(ran)
            _forget(registry, child.id)
            if delay is None:
                click.echo(
                    f"error: worker process {child.k} exited {exit_text(rc)} within "
                    f"{STABLE_S:.0f}s of its start {FAILED_STARTS} times in a row; stopping "
                    "all (its output above says why)",
                    err=True,
                )
                return 1
            log.warning(
                "worker process %d (pid %d, worker %s) exited %s after %.1fs; restarting in %.1fs",
                child.k,
                child.spec.proc.pid,
                child.id,
                exit_text(rc),
                ran,
                delay,
            )
            child.restart_at = now + delay
    return 0


def _forget(registry: WorkerRegistry | None, worker_id: str) -> None:
    """Take a dead child out of the registry now (else it shows until its entry
    expires); a Redis that does not answer leaves that to the expiry."""
    if registry is None:
        return
    with contextlib.suppress(*TRANSIENT):
        registry.remove(worker_id)
