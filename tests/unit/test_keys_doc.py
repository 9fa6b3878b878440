"""docs/keys.md is held to keys.py: every key kind (``TEMPLATES``) and every
key a ``Keys`` method builds has a row in the key table, every row there names
a key that is built, and the retired kinds (``RETIRED``) are listed as retired
and are no kind of today.  No Redis."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from redcron.keys import RETIRED, TEMPLATES, Keys

DOC = Path(__file__).resolve().parents[2] / "docs" / "keys.md"
RETIRED_HEADING = "## Retired kinds"
#: Keys methods that build no key of their own, and why
NOT_KEYS = {
    "shard": "the shard prefix passed to scripts as KEYS[1]",
    "channel_prefix": "a channel's prefix passed to the notify_* scripts as KEYS[1]",
    "build": "the builder every shard kind's method calls",
    "retired": "a retired kind's key, listed under Retired kinds",
    "joined": "a kind's key from already joined ids (the upgrade's renames)",
    "deployment": "the builder every deployment-wide key's method calls",
    "legacy_deployment": "a deployment-wide key's name before layout 5 (the upgrade)",
}
_CELL = re.compile(r"^\| `(rc:[^`]+)` \|", re.M)


def _rows(section: str) -> list[str]:
    """The keys named in the first cell of the table rows of a part of the doc."""
    return _CELL.findall(section)


def _parts() -> tuple[list[str], list[str]]:
    text = DOC.read_text(encoding="utf-8")
    head, found, rest = text.partition(RETIRED_HEADING)
    assert found, f"docs/keys.md has no {RETIRED_HEADING!r} section"
    retired, _, _ = rest.partition("\n## ")
    return _rows(head), _rows(retired)


def _methods() -> dict[str, re.Pattern[str]]:
    """Each key-building Keys method -> the pattern its documented row matches:
    the key built from placeholder ids, each id standing for any text (the
    doc writes ``<tenant>``, ``<job id>``, or a real name as ``maintenance``)."""
    keys = Keys("rc")
    out: dict[str, re.Pattern[str]] = {}
    for name, fn in inspect.getmembers(Keys, inspect.isfunction):
        if name.startswith("_") or name in NOT_KEYS:
            continue
        params = [p for p in inspect.signature(fn).parameters if p != "self"]
        args: list[object] = [0 if p == "shard" else f"\0{p}\0" for p in params]
        key = getattr(keys, name)(*args)
        pattern = re.escape(key)
        for p in params:
            pattern = pattern.replace(re.escape(f"\0{p}\0"), ".+")
        out[name] = re.compile(pattern)
    return out


def test_every_kind_has_a_method() -> None:
    missing = [kind for kind in TEMPLATES if not callable(getattr(Keys, kind, None))]
    assert not missing, missing


def test_every_key_kind_and_builder_is_documented() -> None:
    rows, _retired = _parts()
    undocumented = [
        name for name, pat in _methods().items() if not any(pat.fullmatch(r) for r in rows)
    ]
    assert not undocumented, (
        f"Keys methods whose key has no row in docs/keys.md: {undocumented}; add a row "
        "(key, type, what it holds, who writes it)"
    )


def test_every_documented_key_is_built() -> None:
    rows, _retired = _parts()
    patterns = _methods().values()
    unknown = [r for r in rows if not any(p.fullmatch(r) for p in patterns)]
    assert not unknown, f"docs/keys.md rows no Keys method builds: {unknown}"
    kinds = {re.match(r"rc:\{s0\}:([^:]+)", r) for r in rows}
    named = {m.group(1) for m in kinds if m}
    assert named <= set(TEMPLATES), f"rows of no kind in TEMPLATES: {named - set(TEMPLATES)}"


def test_retired_kinds_are_listed_as_retired_and_gone() -> None:
    _rows_now, retired = _parts()
    listed = {m.group(1) for r in retired if (m := re.match(r"rc:\{s0\}:([^:]+)", r))}
    assert listed == set(RETIRED), listed ^ set(RETIRED)
    assert not set(RETIRED) & set(TEMPLATES)
    # a retired name is no prefix of a live kind's key either
    live = {t.partition(":")[0] for t, _n in TEMPLATES.values()}
    assert not {RETIRED[k] for k in RETIRED} & live


@pytest.mark.parametrize("kind", sorted(TEMPLATES))
def test_each_kind_has_exactly_one_row(kind: str) -> None:
    rows, _retired = _parts()
    mine = [r for r in rows if re.match(rf"rc:\{{s0\}}:{re.escape(kind)}(:|$)", r)]
    assert len(mine) == 1, (kind, mine)
