"""The notifier's pure parts, without Redis or a network: the signature, the
sealing of secrets, the URL checks, the backoff and what messages say."""

from __future__ import annotations

import json
import math
import random
import re
import urllib.parse
import urllib.request
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from redcron.errors import ValidationError
from redcron.model.channels import (
    allowed_hosts,
    check_events,
    check_url,
    host_allowed,
    shown_url,
    url_pattern,
)
from redcron.notify.messages import (
    RETRY_CAP_MS,
    body_of,
    digest_message,
    event_message,
    link,
    retry_delay_ms,
)
from redcron.notify.signing import sign, verify
from redcron.store.channels import seal, unseal

MASTER = bytes(range(32))


def test_a_signature_checks_out_only_for_its_body_secret_and_time() -> None:
    body = b'{"type":"run_failed"}'
    sig = sign("s3cret", 1_700_000_000, body)
    assert sig.startswith("sha256=") and len(sig) == 7 + 64
    assert verify("s3cret", body, sig, "1700000000", 1_700_000_100)
    assert not verify("s3cret", body, sig, "1700000001", 1_700_000_100)  # the time is signed
    assert not verify("s3cret", body, sig, "1700000000", 1_700_000_000 + 301)  # too old
    assert not verify("other", body, sig, "1700000000", 1_700_000_000)
    assert not verify("s3cret", body + b"x", sig, "1700000000", 1_700_000_000)
    assert not verify("s3cret", body, sig, "17e8", 1_700_000_000)


_headers = st.one_of(st.text(), st.none(), st.binary(), st.integers())


@given(signature=_headers, timestamp=_headers, body=st.one_of(st.binary(), st.text()),
       now_s=st.one_of(st.floats(), st.integers()))  # fmt: skip
@example(signature="sha256=é", timestamp="1700000000", body=b"x", now_s=1_700_000_000)
@example(signature="sha256=00", timestamp="9" * 5000, body=b"x", now_s=1_700_000_000)
@example(signature="sha256=00", timestamp="\ud800", body=b"x", now_s=0)
@example(signature="\ud800", timestamp="1", body=b"x", now_s=1)
@example(signature="sha256=00", timestamp="1700000000", body=b"x", now_s=math.nan)
def test_verify_is_false_for_every_malformed_input(
    signature: Any, timestamp: Any, body: Any, now_s: float
) -> None:
    """A receiver passes header values an attacker chose: never an exception."""
    assert verify("s3cret", body, signature, timestamp, now_s) is False


def test_verify_takes_a_good_signature_with_any_secret_and_refuses_a_nan_clock() -> None:
    body = b"{}"
    for secret in ("s3cret", "sécrét ✓"):
        sig = sign(secret, 1_700_000_000, body)
        assert verify(secret, body, sig, "1700000000", 1_700_000_000.5)
        assert verify(secret, bytearray(body), sig, "1700000000", 1_700_000_000)
    sig = sign("s", 1_700_000_000, body)
    assert not verify("s", body, sig, "1700000000", math.nan)  # would pass the time check
    assert not verify("\ud800", body, sig, "1700000000", 1_700_000_000)
    assert not verify("s", body, sig, "0001700000000", 1_700_000_000)  # over 12 digits


def test_a_sealed_value_opens_only_for_its_channel_and_unaltered() -> None:
    sealed = seal(MASTER, "abc", "whsec_xyz")
    assert "whsec" not in sealed and sealed != seal(MASTER, "abc", "whsec_xyz")  # fresh nonce
    assert unseal(MASTER, "abc", sealed) == "whsec_xyz"
    with pytest.raises(ValueError):
        unseal(MASTER, "abd", sealed)  # moved to another channel
    with pytest.raises(ValueError):
        unseal(bytes(32), "abc", sealed)  # another deployment's key
    tampered = sealed[:-4] + ("AAAA" if not sealed.endswith("AAAA") else "BBBB")
    with pytest.raises(ValueError):
        unseal(MASTER, "abc", tampered)
    assert unseal(MASTER, "c", seal(MASTER, "c", "x" * 1000)) == "x" * 1000  # many blocks


def test_the_allowlist_matches_hosts_domains_and_star() -> None:
    allow = allowed_hosts(" hooks.slack.com, .example.com ,")
    assert allow == ("hooks.slack.com", ".example.com")
    assert host_allowed("hooks.slack.com", allow) and host_allowed("HOOKS.slack.com.", allow)
    assert host_allowed("a.b.example.com", allow) and host_allowed("example.com", allow)
    assert not host_allowed("badexample.com", allow) and not host_allowed("slack.com", allow)
    assert host_allowed("10.0.0.1", ("*",)) and not host_allowed("10.0.0.1", ())
    assert check_url("https://a.example.com/x?y=1", allow) == "https://a.example.com/x?y=1"
    for bad in ("ftp://a.example.com/", "HTTPS://", "//a.example.com/", "https://x.org/"):
        with pytest.raises(ValidationError) as got:
            check_url(bad, allow)
        assert got.value.field == "url"


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1%2eevil.example.com/x",  # urllib decodes %2e: another host
        "http://%31%32%37.0.0.1/x",  # ...or an IP the allowlist never named
        "http://a.example.com%3A80/x",
        "http://evil.org\t.example.com/x",  # urlsplit drops the tab, urllib does not
        "http://a.example.com\r\nX-Injected: 1/x",
        "http://a.exa\nmple.com/x",
        "http://a.example.com/x y",
        "http://a.example.com/\x00",
        "http://a.example.com/é",
        "http://évil.example.com/",
        "http://evil.org\\.example.com/",
        "http://[fe80::1%25eth0]/",  # a zone id is a %-escape too
    ],
)
def test_a_host_that_parses_differently_for_the_sender_is_refused(url: str) -> None:
    for allow in ((".example.com",), ("*",)):
        with pytest.raises(ValidationError) as got:
            check_url(url, allow)
        assert got.value.field == "url"


def test_the_host_checked_is_the_host_connected_to() -> None:
    for url in ("http://a.example.com:8080/in?x=%20y", "https://[::1]:443/p", "http://10.0.0.1/"):
        assert check_url(url, ("*",)) == url
        assert urllib.request.Request(url).host == urllib.parse.urlsplit(url).netloc
    pattern = re.compile(url_pattern((".example.com",)))
    assert pattern.match("https://a.example.com/in?x=%20y")
    assert not pattern.match("https://a%2eexample.com/") and not pattern.match(
        "https://a.example.com/ x"
    )


def test_listings_show_no_credential_of_a_url() -> None:
    assert (
        shown_url("slack", "https://hooks.slack.com/services/T/B/X") == "https://hooks.slack.com/…"
    )
    assert shown_url("webhook", "https://h.example.com/in?token=t") == "https://h.example.com/in"


def test_event_types_are_checked() -> None:
    assert check_events(None)[0] == "breaker_opened" and check_events("run_failed,run_failed") == (
        "run_failed",
    )
    with pytest.raises(ValidationError, match="events"):
        check_events(["run_failed", "nope"])


def test_retries_back_off_with_full_jitter_between_a_second_and_the_cap() -> None:
    rand = random.Random(7)
    for attempt in range(40):
        delay = retry_delay_ms(attempt, rand)
        assert 1_000 <= delay <= max(1_000, min(2_000 * 2**attempt, RETRY_CAP_MS))
    assert max(retry_delay_ms(30, rand) for _ in range(200)) > RETRY_CAP_MS / 2


def test_a_message_names_tenant_job_run_and_links_the_closest_page() -> None:
    fields = {"type": "run_failed", "tenant": "acme", "job": "0-j", "run": "0-j@1",
              "at": "1700000000000", "detail": "1 of 2 task(s) failed"}  # fmt: skip
    msg = event_message(fields, "https://rc.example/")
    assert msg["link"] == "https://rc.example/runs/0-j@1"
    assert msg["at"] == "2023-11-14T22:13:20.000Z"
    assert "tenant acme, job 0-j, run 0-j@1: 1 of 2 task(s) failed" in msg["text"]
    assert (
        link("", "acme", "0-j", "") == "/jobs/0-j" and link("", "acme", "", "") == "/tenants/acme"
    )
    assert json.loads(body_of("slack", "d1", msg)) == {"text": msg["text"]}
    assert json.loads(body_of("webhook", "d1", msg))["delivery"] == "d1"


def test_a_digest_counts_by_job_and_keeps_the_first_errors() -> None:
    fields = {"count": "7", "first_at": "1700000000000", "j:acme|0-a": "5", "j:acme|0-b": "2",
              "e1": json.dumps({"task": "0-t1", "error": "boom"})}  # fmt: skip
    msg = digest_message(fields, 1_700_000_060_000, "")
    assert msg["count"] == 7 and msg["tenant"] == "acme" and msg["digest"] is True
    assert [g["job"] for g in msg["by_job"]] == ["0-a", "0-b"]
    assert msg["first_errors"] == [{"task": "0-t1", "error": "boom"}]
    assert msg["link"] == "/tenants/acme/dlq"
    assert "7 task(s) dead-lettered" in msg["text"] and "0-t1: boom" in msg["text"]
