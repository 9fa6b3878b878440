"""All Redis I/O lives in this package."""

from redcron.broker.argv import FailItem
from redcron.broker.broker import Broker, Lease, LeaseRequest

__all__ = ["Broker", "FailItem", "Lease", "LeaseRequest"]
