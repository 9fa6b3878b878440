"""Pure schedule arithmetic: no Redis, no processes, no I/O, no clock reads.

``cron`` parses and matches cron expressions on wall-clock time; ``triggers``
turns a job's schedule (cron in a zone, interval, one-shot) into fire instants
under the DST rules; ``plan`` decides which fires a due job gets (catch-up
window, backlog policy); ``jitter`` and ``timeutil`` hold the deterministic
jitter and the millisecond conversions the beat and the broker share.

The submodules are imported by name (``redcron.schedule.triggers``); this
module imports none of them.  Nothing here imports ``redcron.model``: a job's
schedule comes in as plain values (a ``Trigger``, a ``FirePolicy``, a jitter in
seconds), so ``redcron.model.jobs`` builds them from a ``JobSpec`` and the
dependency points one way (model -> schedule).
"""
