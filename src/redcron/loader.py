"""Find the :class:`~redcron.app.App` a command line names (``-A module:attr``)."""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import sys
import traceback

from redcron.app import App
from redcron.errors import ConfigError

log = logging.getLogger(__name__)


def load_app(path: str) -> App:
    """Import ``module:attr`` (or ``module``, meaning ``module:app``) and return the App.

    ``module:factory()`` calls ``factory`` with no arguments for the App: a
    module that must not build its App (read the environment, make a client)
    when imported gives a factory instead, and each load builds a fresh App.

    The current working directory is put on ``sys.path`` first, as celery does,
    so ``redcron worker -A tasks:app`` finds ``./tasks.py``.

    Raises:
        ConfigError: the path is malformed, the module cannot be imported, the
            attribute is missing, the factory raises, or it is not an App; the
            message names ``path``.
    """
    module_name, _, attr = path.strip().partition(":")
    attr = attr or "app"
    call = attr.endswith("()")
    if call:
        attr = attr[:-2]
    if not module_name or not all(part.isidentifier() for part in module_name.split(".")):
        raise ConfigError(f"app {path!r}: expected 'module:attribute', e.g. 'tasks:app'")
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and module_name.startswith(exc.name):
            raise ConfigError(
                f"app {path!r}: no module named {exc.name!r} (searched {cwd} and sys.path)"
            ) from None
        log.debug("importing %s failed", module_name, exc_info=True)
        raise ConfigError(
            f"app {path!r}: importing {module_name!r} failed{_where(exc)}: {exc}"
        ) from exc
    except Exception as exc:
        # The user's module raised while importing: name it, and the file and
        # line, in one line; the whole traceback is for --loglevel debug.
        log.debug("importing %s failed", module_name, exc_info=True)
        raise ConfigError(
            f"app {path!r}: importing {module_name!r} failed{_where(exc)}: "
            f"{type(exc).__name__}: {exc.msg if isinstance(exc, SyntaxError) else exc} "
            "(--loglevel debug shows the traceback)"
        ) from exc
    obj: object = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ConfigError(
                f"app {path!r}: module {module_name!r} has no attribute {attr!r}"
            ) from None
    if call:
        if not callable(obj):
            raise ConfigError(f"app {path!r}: {module_name}.{attr} is not callable")
        try:
            obj = obj()
        except ConfigError as exc:  # names the setting at fault already
            raise ConfigError(f"app {path!r}: {exc}") from exc
        except Exception as exc:
            log.debug("calling %s.%s failed", module_name, attr, exc_info=True)
            raise ConfigError(
                f"app {path!r}: calling {module_name}.{attr}() failed{_where(exc)}: "
                f"{type(exc).__name__}: {exc} (--loglevel debug shows the traceback)"
            ) from exc
    if not isinstance(obj, App):
        what = f"{module_name}.{attr}{'()' if call else ''}"
        raise ConfigError(f"app {path!r}: {what} is a {type(obj).__name__}, not a redcron App")
    return obj


def _where(exc: BaseException) -> str:
    """`` at file:line (`source`)`` of the line that raised ``exc``: the deepest
    frame outside the import machinery, or a syntax error's own location."""
    if isinstance(exc, SyntaxError) and exc.filename:
        filename, lineno, line = exc.filename, exc.lineno, exc.text
    else:
        frames = [
            f
            for f in traceback.extract_tb(exc.__traceback__)
            if not f.filename.startswith("<frozen") and f.filename != __file__
        ]
        if not frames:
            return ""
        filename, lineno, line = frames[-1].filename, frames[-1].lineno, frames[-1].line
    with contextlib.suppress(ValueError):  # a path on another drive (Windows) stays absolute
        filename = os.path.relpath(filename)
    source = f" (`{line.strip()}`)" if line and line.strip() else ""
    return f" at {filename}:{lineno}{source}"
