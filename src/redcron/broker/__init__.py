"""All Redis I/O lives in this package."""

from redcron.broker.argv import FailItem
from redcron.broker.broker import Broker, Lease

__all__ = ["Broker", "FailItem", "Lease"]
