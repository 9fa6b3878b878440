"""The worker: pulls leases, runs tasks, heartbeats and reports in batches."""

from redcron.worker.hooks import AttemptHook, Reported, Reports
from redcron.worker.options import WorkerOptions
from redcron.worker.worker import Worker

__all__ = ["AttemptHook", "Reported", "Reports", "Worker", "WorkerOptions"]
