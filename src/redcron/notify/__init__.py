"""The notifier: a process that turns the events streams into messages on the
channels the admin and the tenants configured (docs/operations.md,
Notifications; docs/architecture.md, "The notifier").

- ``signing``: the webhook signature (HMAC-SHA256 over timestamp and body), and
  how a receiver checks it.
- ``messages``: what an event, or a digest of dead letters, says (pure).
- ``sender``: the HTTP POST (injectable: tests and other transports pass their own).
- ``notifier``: the loop: route events to channels' outboxes, send due deliveries
  with retries, one channel's slowness never holding up another's.
"""

from redcron.notify.notifier import Notifier
from redcron.notify.sender import HttpSender, Response, Sender
from redcron.notify.signing import sign, verify

__all__ = ["HttpSender", "Notifier", "Response", "Sender", "sign", "verify"]
