"""Hiding secrets in what is printed or logged."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit

MASK = "***"


def masked_url(url: str) -> str:
    """``url`` with its passwords (userinfo, or a query field named ``password`` or
    ending so, as a sentinel URL's ``sentinel_password``) masked.

    >>> masked_url("redis://user:s3cret@db:6379/0")
    'redis://user:***@db:6379/0'
    """
    parts = urlsplit(url)
    netloc = parts.netloc
    userinfo, at, hostport = netloc.rpartition("@")
    if at and ":" in userinfo:
        netloc = f"{userinfo.partition(':')[0]}:{MASK}@{hostport}"
    query = parts.query
    if "password=" in query:
        query = urlencode(
            [(k, MASK if k.endswith("password") else v) for k, v in parse_qsl(query, True)],
            safe="*",
        )
    if (netloc, query) == (parts.netloc, parts.query):
        return url
    # built by hand: urlunsplit drops the empty authority of unix:///path
    return f"{parts.scheme}://{netloc}{parts.path}" + (f"?{query}" if query else "")
