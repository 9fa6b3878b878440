"""Per-attempt output capture for Python tasks: ``print`` and ``logging``.

Threads and coroutines share ``sys.stdout``; a proxy routes each write to the
buffer of the attempt running in the current context (or to the real stream
when none is).  The buffer is a context variable, not a thread-local: each
thread has a context of its own, and so does each asyncio task, so one
attempt's coroutine on the worker's event loop writes to its own buffer while
others run on the same thread (``asyncio.to_thread`` carries it along too).
"""

from __future__ import annotations

import logging
import sys
import threading
from collections import deque
from contextvars import ContextVar
from typing import Any, TextIO

_buffer: ContextVar[LineBuffer | None] = ContextVar("redcron_capture", default=None)
_install_lock = threading.Lock()


class LineBuffer:
    """Collects complete lines, keeping the last ``cap`` of them."""

    def __init__(self, cap: int) -> None:
        self.lines: deque[str] = deque(maxlen=cap)
        self._partial = ""
        self.dropped = 0

    def write(self, text: str) -> None:
        text = self._partial + text
        *complete, self._partial = text.split("\n")
        for line in complete:
            if len(self.lines) == self.lines.maxlen:
                self.dropped += 1
            self.lines.append(line)

    def drain(self) -> list[str]:
        """Take every complete line (and a trailing partial one)."""
        if self._partial:
            self.lines.append(self._partial)
            self._partial = ""
        out = list(self.lines)
        self.lines.clear()
        return out


class _StreamProxy:
    def __init__(self, real: TextIO) -> None:
        self._real = real

    def write(self, text: str) -> int:
        buf: LineBuffer | None = _buffer.get()
        if buf is None:
            return self._real.write(text)
        buf.write(text)
        return len(text)

    def flush(self) -> None:
        if _buffer.get() is None:
            self._real.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


class _CaptureHandler(logging.Handler):
    def handle(self, record: logging.LogRecord) -> bool:
        # Every record of the process comes here, the worker's own lines too:
        # one with no attempt running on its thread is let by before the
        # handler's lock and filters (the line per attempt pays no more).
        if _buffer.get() is None:
            return False
        return bool(super().handle(record))

    def emit(self, record: logging.LogRecord) -> None:
        buf: LineBuffer | None = _buffer.get()
        if buf is not None:
            try:
                buf.write(self.format(record) + "\n")
            except Exception:  # a broken log record must not fail the task
                self.handleError(record)


def install() -> None:
    """Route stdout/stderr and root logging through the per-thread buffers.

    Idempotent; streams replaced since the last call (``redirect_stdout``,
    test runners) are wrapped again.
    """
    with _install_lock:
        if not isinstance(sys.stdout, _StreamProxy):
            sys.stdout = _StreamProxy(sys.stdout)
        if not isinstance(sys.stderr, _StreamProxy):
            sys.stderr = _StreamProxy(sys.stderr)
        # looked for, not remembered: logging set up again since the last call
        # (``basicConfig(force=True)``, a CLI command run in the same process)
        # removed the root logger's handlers, ours with them
        root = logging.getLogger()
        if any(isinstance(h, _CaptureHandler) for h in root.handlers):
            return
        handler = _CaptureHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        root.addHandler(handler)


def attach(buffer: LineBuffer | None) -> None:
    """Send this context's output (its thread's, or its asyncio task's) to
    ``buffer`` (``None`` = back to the real streams)."""
    _buffer.set(buffer)
