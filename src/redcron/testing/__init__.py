"""The testing mode: the ``App`` API with no Redis server, for a user's unit tests.

``TestApp()`` is an :class:`~redcron.App` on an in-process fake Redis
(fakeredis) that runs redcron's real Lua scripts, on a clock that moves only
when the test moves it::

    from redcron.testing import TestApp

    app = TestApp()

    @app.task(retries=2)
    def add(x, y):
        return x + y

    handle = add.enqueue(2, 3)
    app.assert_enqueued(add, args=[2, 3])
    assert app.drain().succeeded == 1
    assert handle.result() == 5

See docs/testing.md for the helpers (``drain``, ``advance``, ``perform``,
``assert_enqueued``...) and the limits: one process, and not evidence for
redcron's guarantees, which are tested on a real Redis.  Needs the
``testing`` extra: ``pip install 'redcron[testing]'``.
"""

from redcron.testing.app import TestApp
from redcron.testing.fakeserver import TestClock
from redcron.testing.runner import Drained

__all__ = ["Drained", "TestApp", "TestClock"]
