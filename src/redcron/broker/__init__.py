"""All Redis I/O lives in this package."""

from redcron.broker.argv import FailItem
from redcron.broker.broker import Broker, FailResult, Lease, LeaseRequest
from redcron.broker.cancel import RunCancel, TaskCancel

__all__ = [
    "Broker",
    "FailItem",
    "FailResult",
    "Lease",
    "LeaseRequest",
    "RunCancel",
    "TaskCancel",
]
