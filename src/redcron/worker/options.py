"""What a worker is told: :class:`WorkerOptions`, validated once, frozen."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from redcron.config import WORKER_PREFETCH_PER_SLOT, Settings, default_concurrency
from redcron.errors import ConfigError
from redcron.model import validation
from redcron.worker.execute import CommandPolicy, check_pass_env


@dataclass(frozen=True)
class WorkerOptions:
    """How a :class:`~redcron.worker.Worker` runs; every value is checked here,
    at construction (:class:`~redcron.errors.ConfigError` names the field).

    ``Worker(app, WorkerOptions(queues=["default"], concurrency=8))`` and
    ``Worker(app, queues=["default"], concurrency=8)`` are the same worker.
    The fields after ``supervisor`` are not arguments: they are worked out from
    the others (so ``dataclasses.replace`` works them out again); those given
    keep their value, normalized (sequences become tuples).

    Args:
        concurrency: slots: attempts running at once (default 32 threads, or
            one process per core).
        pool: ``threads`` or ``processes``.
        queues: queues served.
        tenants: only lease these tenants' work (empty = all).
        lease_ttl: seconds (default: the deployment's); heartbeats every TTL/6.
            It is checked against the deployment's minimum when the worker is
            built (:meth:`lease_ttl_ms`), since only the App knows that minimum.
        allow_commands: run command tasks (arbitrary commands: an explicit opt-in).
        grace: seconds running attempts get to finish on SIGTERM before their
            leases are handed back.
        app_path: ``module:app``, needed by the processes pool to import tasks.
        name: worker id (default ``host:pid:random``).
        prefetch: leases held beyond ``concurrency``, waiting for a slot (default
            as many as ``concurrency``; use 0 for long tasks, so that a held lease does
            not wait behind them while another worker is idle).  A prefetched
            attempt that was never started is handed back at once on shutdown.
        cpus: cores this worker offers; tasks asking for cpu are leased only
            while they fit, and never more than this runs at once.
        mem: memory this worker offers (bytes, or text such as ``16G``), likewise.
        allow_programs: with ``allow_commands``, run only command tasks whose
            program is one of these (paths, or names on the worker's PATH); a
            task naming another fails permanently.  Empty: any program.
        allow_images: with ``allow_commands``, run only container tasks of these
            images (``registry/x`` allows every tag of it).  Empty: any image.
        audit: record every attempt's start and end of execution in the shard's
            audit stream (``Keys.audit``; ``redcron chaos`` checks them).  Off by
            default: it costs two writes per attempt, and an attempt does not
            start until its start is recorded.
        pass_env: names of the worker's environment variables that command and
            container tasks get on top of ``PATH``, ``HOME`` and ``LANG`` (they get
            nothing else of it: never ``REDCRON_*``, refused here).
        supervisor: the id of the ``redcron worker --procs N`` supervisor that
            started this worker (published in the registry, which groups by it);
            None for a worker on its own.
    """

    concurrency: int | None = None
    pool: str = "threads"
    queues: Sequence[str] = ("default",)
    tenants: Sequence[str] = ()
    lease_ttl: float | None = None
    allow_commands: bool = False
    grace: float = 30.0
    app_path: str | None = None
    name: str | None = None
    prefetch: int | None = None
    cpus: float | None = None
    mem: int | str | None = None
    allow_programs: Sequence[str] = ()
    allow_images: Sequence[str] = ()
    audit: bool = False
    pass_env: Sequence[str] = ()
    supervisor: str | None = None

    #: attempts running at once: ``concurrency``, or the pool's default
    slots: int = field(init=False)
    #: leases held at most: the slots plus the prefetch.  Leases held beyond the
    #: running slots make the next batch ready when a slot frees; they count as in
    #: flight (heartbeated, capped) like any lease.
    capacity: int = field(init=False)
    #: ``mem`` in bytes (None: not declared)
    mem_bytes: int | None = field(init=False)
    #: the command and container tasks this worker runs
    commands: CommandPolicy = field(init=False, repr=False)

    def __post_init__(self) -> None:
        slots = default_concurrency(self.pool) if self.concurrency is None else self.concurrency
        if slots < 1:
            raise ConfigError("concurrency: must be >= 1")
        if self.pool not in ("threads", "processes"):
            raise ConfigError(f"pool: {self.pool!r} is not one of threads, processes")
        if self.pool == "processes" and not self.app_path:
            raise ConfigError("pool: the processes pool needs app_path ('module:app')")
        queues = tuple(validation.name("queues", q) for q in self.queues)
        if not queues:
            raise ConfigError("queues: name at least one queue")
        if "commands" in queues and not self.allow_commands:
            raise ConfigError(
                "queues: 'commands' holds command tasks; start the worker with "
                "--allow-commands to run them, or leave that queue out"
            )
        tenants = tuple(validation.name("tenants", t) for t in self.tenants)
        if self.lease_ttl is not None:
            validation.seconds(self.lease_ttl, "lease_ttl", above=True)
        prefetch = WORKER_PREFETCH_PER_SLOT * slots if self.prefetch is None else self.prefetch
        if prefetch < 0:
            raise ConfigError("prefetch: must be >= 0")
        cpus = None if self.cpus is None else validation.cpus(self.cpus, "cpus")
        mem = None if self.mem is None else validation.mem_bytes(self.mem, "mem")
        commands = CommandPolicy.build(self.allow_commands, self.allow_programs, self.allow_images)
        pass_env = check_pass_env(self.pass_env)
        grace = validation.seconds(self.grace, "grace")
        fill = object.__setattr__  # frozen: the checked values replace what was given
        fill(self, "queues", queues)
        fill(self, "tenants", tenants)
        fill(self, "allow_programs", commands.programs)
        fill(self, "allow_images", commands.images)
        fill(self, "pass_env", pass_env)
        fill(self, "cpus", cpus)
        fill(self, "grace", grace)
        fill(self, "slots", slots)
        fill(self, "capacity", slots + prefetch)
        fill(self, "mem_bytes", mem)
        fill(self, "commands", commands)

    def lease_ttl_ms(self, settings: Settings) -> int:
        """The lease TTL in ms: ``lease_ttl``, or the deployment's; never below the
        deployment's minimum."""
        ttl = validation.seconds(
            settings.lease_ttl if self.lease_ttl is None else self.lease_ttl,
            "lease_ttl",
            above=True,
        )
        if ttl < settings.min_lease_ttl:
            raise ConfigError(
                f"lease_ttl: {ttl}s is below the deployment minimum {settings.min_lease_ttl}s"
            )
        return int(ttl * 1000)
