"""The floors of ``pyproject.toml`` are the versions ``make test-floor`` runs the
core on: each dependency's lowest allowed version is pinned, at exactly that
version, in ``ci/floor-constraints.txt`` (a floor raised or lowered on one side
only would leave the floor job testing something else than what we promise)."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
CONSTRAINTS = ROOT / "ci" / "floor-constraints.txt"


def floors() -> dict[str, Version]:
    """Each runtime and testing dependency with a lower bound: its lowest version."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    found: dict[str, Version] = {}
    for line in [*project["dependencies"], *project["optional-dependencies"]["testing"]]:
        req = Requirement(line)
        lows = [Version(s.version) for s in req.specifier if s.operator in (">=", "==", "~=")]
        if lows:
            found[canonicalize_name(req.name)] = min(lows)
    return found


def pins() -> dict[str, Version]:
    found: dict[str, Version] = {}
    for raw in CONSTRAINTS.read_text().splitlines():
        line = raw.partition("#")[0].strip()
        if line:
            name, sep, version = line.partition("==")
            assert sep, f"{CONSTRAINTS.name}: {raw!r} is not name==version"
            found[canonicalize_name(name)] = Version(version)
    return found


def test_every_floor_is_pinned_at_its_version() -> None:
    pinned = pins()
    wrong = {
        name: (str(floor), str(pinned.get(name)))
        for name, floor in floors().items()
        if pinned.get(name) != floor
    }
    assert not wrong, f"(pyproject floor, {CONSTRAINTS.name} pin): {wrong}"
