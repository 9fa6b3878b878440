"""The App behind the dashboard's test-client tests (the HTML pages and the /v1
API).  Imported by name (``tests/helpers`` is on ``sys.path``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from redcron import App, Permanent


@contextmanager
def add_and_broken_app(redis_url: str, key_prefix: str, ns: str, tenant: str) -> Iterator[App]:
    """An App under the test's key prefix with two tasks of ``tenant``:
    ``{ns}.add`` returns ``x + y``; ``{ns}.broken`` prints "about to fail", then
    fails permanently (no retries)."""
    a = App(redis_url, prefix=key_prefix.rstrip(":"), min_lease_ttl=0.5)

    @a.task(name=f"{ns}.add", tenant=tenant)
    def add(x: int, y: int = 0) -> int:
        return x + y

    @a.task(name=f"{ns}.broken", tenant=tenant, retries=0)
    def broken() -> None:
        print("about to fail")
        raise Permanent("cannot work")

    try:
        yield a
    finally:
        a.close()
