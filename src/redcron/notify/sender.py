"""The HTTP POST a delivery is, behind a small interface so tests and other
transports can pass their own (:class:`Sender`).

:class:`HttpSender` follows no redirect: a receiver that answers 3xx could
otherwise point our process at a host the allowlist never took (SSRF); a 3xx is
a failed attempt like any other non-2xx.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True, slots=True)
class Response:
    """What came back: the HTTP status (None: no answer) and a short error."""

    status: int | None
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


class Sender(Protocol):
    def post(
        self, url: str, body: bytes, headers: Mapping[str, str], timeout_s: float
    ) -> Response: ...


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class HttpSender:
    """POST with urllib, no redirects, the channel's timeout."""

    def __init__(self) -> None:
        self._opener = urllib.request.build_opener(_NoRedirect)

    def post(self, url: str, body: bytes, headers: Mapping[str, str], timeout_s: float) -> Response:
        request = urllib.request.Request(url, data=body, headers=dict(headers), method="POST")
        try:
            with self._opener.open(request, timeout=timeout_s) as answer:
                return Response(int(answer.status))
        except urllib.error.HTTPError as exc:
            return Response(int(exc.code), f"HTTP {exc.code}")
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            return Response(None, f"{type(exc).__name__}: {reason}"[:200])
