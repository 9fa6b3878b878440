"""All Redis I/O lives in this package."""

from redcron.broker.broker import Broker, FailItem, Lease, LeaseRequest

__all__ = ["Broker", "FailItem", "Lease", "LeaseRequest"]
