"""The pure parts of parking (issue 16 item 5): reading a job head never raises on
what a hash holds, and which fire errors are one job's fault.  No Redis."""

from __future__ import annotations

import pytest

from redcron.beat.parking import job_fault
from redcron.engine.beat import JobHead, _head


def test_a_head_says_why_a_hash_is_malformed_instead_of_raising() -> None:
    assert _head(b"3", b"1000", b"0", b"acme") == JobHead("3", 1000, False, "acme")
    assert _head(None, None, None, None) == JobHead(None, None, False, "")  # gone
    bad = _head(b"3", b"soon", b"0", b"acme")
    assert bad.malformed and "next_fire 'soon'" in bad.malformed and bad.version == "3"
    long = _head(b"3", b"x" * 500, b"0", b"acme")
    assert long.malformed and len(long.malformed) < 120
    unversioned = _head(None, b"1000", b"0", b"acme")
    assert unversioned.malformed == "the job hash has no version"
    assert unversioned.version == ""  # parked at "no version", job_park compares ""


@pytest.mark.parametrize(
    ("reply", "fault"),
    [
        (
            "ERR user_script:1: attempt to index local 'x' (a nil value) script: ab, on "
            "@user_script:1.",
            True,
        ),
        (
            "WRONGTYPE Operation against a key holding the wrong kind of value script: ab, "
            "on @user_script:589.",
            True,
        ),
        (
            "ERR Error running script (call to f_ab): @user_script:12: user_script:12: "
            "Expected value but found T_END",
            True,
        ),  # Redis 6.2's wording
        (
            "OOM command not allowed when used memory > 'maxmemory'. script: ab, on "
            "@user_script:40.",
            False,
        ),
        ("BUSY Redis is busy running a script.", False),
        (
            "READONLY You can't write against a read only replica. script: ab, on @user_script:3.",
            False,
        ),
        ("NOSCRIPT No matching script.", False),
        ("STALE shard lease lost (epoch 3 is not the owner)", False),
    ],
)
def test_only_a_script_error_on_a_jobs_data_is_its_fault(reply: str, fault: bool) -> None:
    assert job_fault(reply) is fault
