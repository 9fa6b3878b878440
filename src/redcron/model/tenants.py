"""Tenant settings (DESIGN §6, §8a): weight, caps, rate, admission bound,
defaults, and the admin's grant of command and container tasks.

Settings live in the tenant hash ``keys.tenant(shard, tenant)`` as plain text
fields, changeable live: the lease script reads them on every visit.  The
same hash holds dispatch state the lease script owns (``d:*`` deficits,
``v:*`` visits, ``tokens``, ``tokens_ts``), so this module writes and deletes
only the settings fields, never the whole hash.

This module is the pure model (fields, parsing, validation); reading and
writing the hashes is :class:`redcron.store.tenants.TenantStore`'s.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from redcron.errors import ValidationError
from redcron.model import validation

#: the hash fields this module owns, in display order
SETTINGS_FIELDS: tuple[str, ...] = (
    "weight",
    "max_in_flight",
    "rate",
    "burst",
    "max_queued",
    "max_priority",
    "jitter_s",
    "allow_commands",
)
#: how a boolean setting is stored: the scripts compare with "1"
_TRUE, _FALSE = "1", "0"
MAX_WEIGHT = 1000.0

# [0-9], not \d (float() reads other scripts' digits too); matched with fullmatch
_RATE = re.compile(r"\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*(?:/\s*([smh]))?\s*")
_PER_SECOND = {"s": 1.0, "m": 60.0, "h": 3600.0}


def grant_refusal(tenant: str, what: str) -> str:
    """Why ``tenant`` may not have command or container tasks: the setting and the
    admin command that grants it (the words of ``lua/lib/grant.lua``)."""
    return (
        f"tenant {tenant} may not run command or container tasks ({what}): the tenant "
        f"setting allow_commands is off; an admin grants it with "
        f"`redcron tenants set {tenant} --allow-commands`"
    )


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def parse_rate(value: object) -> float:
    """A rate as tasks per second: ``"20/s"``, ``"20"`` (per second), ``"1200/m"``,
    ``"5/h"``, or a number.  ``0`` means unlimited."""
    if _is_number(value):
        rate = float(value)  # type: ignore[arg-type]
    elif isinstance(value, str) and (m := _RATE.fullmatch(value)):
        rate = float(m.group(1)) / _PER_SECOND[m.group(2) or "s"]
    else:
        raise ValidationError(
            "rate",
            f"{value!r} is not a rate; use N, N/s, N/m or N/h (e.g. 20/s, 1200/m; 0 = unlimited)",
        )
    return _rate(rate, value)


def _rate(rate: object, shown: object) -> float:
    """``rate`` checked as a number; the message shows what the user gave (``shown``)."""
    try:
        return validation.number(rate, "rate", unit="tasks per second")
    except ValidationError:
        raise ValidationError(
            "rate", f"{shown!r} must be >= 0 tasks per second (0 = unlimited); e.g. 20/s"
        ) from None


def format_rate(rate: float) -> str:
    """The friendliest unit for a per-second rate: ``20/s``, ``30/m``, ``5/h``."""
    if rate <= 0:
        return "unlimited"
    for unit, per in (("s", 1.0), ("m", 60.0), ("h", 3600.0)):
        n = rate * per
        if n >= 1 and abs(n - round(n)) < 1e-9:
            return f"{round(n)}/{unit}"
    return f"{rate:.6g}/s"


def _text(value: object) -> str:
    """A number as hash text that both Python and Lua ``tonumber`` read back exactly;
    a boolean as ``1``/``0``."""
    if isinstance(value, bool):
        return _TRUE if value else _FALSE
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    return str(value)


@dataclass
class TenantSettings:
    """One tenant's dispatch and admission settings; zeros mean "no limit".

    Attributes:
        weight: share of dispatch relative to other tenants (DRR quantum multiplier).
        max_in_flight: most valid leases at once; 0 = no cap.
        rate: tasks started per second (token bucket on server time); 0 = unlimited.
        burst: token bucket size; 0 = ``max(1, ceil(rate))``.
        max_queued: most queued instances before submissions are rejected; 0 = unlimited.
        max_priority: highest class the tenant may submit at (higher is clamped).
        jitter_s: default jitter for the tenant's scheduled fires, in seconds.
        allow_commands: the admin's grant: the tenant may create and run command
            and container tasks (arbitrary programs on a worker).  Off by default;
            job_put, enqueue and lease check it in Lua (DESIGN §8a).
    """

    weight: float = 1.0
    max_in_flight: int = 0
    rate: float = 0.0
    burst: int = 0
    max_queued: int = 0
    max_priority: str = "high"
    jitter_s: float = 0.0
    allow_commands: bool = False

    @property
    def effective_burst(self) -> int:
        """The bucket size the lease script uses (``burst``, or one second of rate)."""
        return self.burst or max(1, math.ceil(self.rate))

    def validate(self) -> TenantSettings:
        """Raise :class:`ValidationError` naming the first bad field and the fix."""
        w = self.weight
        # below 1 a DRR visit could serve nothing (quantum x weight < 1 task):
        # give the other tenants larger weights instead
        try:
            w_ok = validation.number(w, "weight", minimum=1) <= MAX_WEIGHT
        except ValidationError:
            w_ok = False  # reported below with the hint about the other tenants
        if not w_ok:
            raise ValidationError(
                "weight",
                f"{w!r} must be a number >= 1 and <= {MAX_WEIGHT:g} (default 1); for a smaller "
                "share, raise the other tenants' weights",
            )
        for field in ("max_in_flight", "burst", "max_queued"):
            setattr(self, field, validation.non_negative_int(getattr(self, field), field))
        _rate(self.rate, self.rate)
        validation.seconds(self.jitter_s, "jitter_s")
        validation.priority(self.max_priority, "max_priority")
        if not isinstance(self.allow_commands, bool):
            raise ValidationError(
                "allow_commands", f"{self.allow_commands!r} must be true or false"
            )
        return self

    def to_hash(self) -> dict[str, str]:
        return {f: _text(getattr(self, f)) for f in SETTINGS_FIELDS}

    @classmethod
    def from_hash(cls, raw: Mapping[Any, Any]) -> TenantSettings:
        """Settings from hash fields (bytes or str); missing fields take defaults."""
        values: dict[str, Any] = {}
        defaults = cls()
        for field in SETTINGS_FIELDS:
            value = raw.get(field, raw.get(field.encode()))
            if value is None or value in (b"", ""):
                continue
            text = value.decode() if isinstance(value, bytes) else str(value)
            kind = type(getattr(defaults, field))
            if kind is bool:
                if text not in (_TRUE, _FALSE):
                    raise ValidationError(
                        field,
                        f"stored value {text!r} is not 1 or 0; "
                        f"fix it with `redcron tenants set` or `redcron tenants reset`",
                    )
                values[field] = text == _TRUE
                continue
            try:
                values[field] = kind(text)
            except ValueError:
                raise ValidationError(
                    field,
                    f"stored value {text!r} is not a {kind.__name__}; "
                    f"fix it with `redcron tenants set` or `redcron tenants reset`",
                ) from None
        return cls(**values)

    def as_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "effective_burst": self.effective_burst}


def settings_schema() -> dict[str, dict[str, object]]:
    """What :meth:`TenantSettings.validate` (and :func:`parse_rate`) accept, field by
    field, as JSON Schema (``PUT /v1/tenants/{tenant}``'s body)."""
    count = validation.whole_number_schema()
    schema: dict[str, dict[str, object]] = {
        "weight": validation.number_schema(1, maximum=MAX_WEIGHT),
        "max_in_flight": count,
        "rate": {"anyOf": [validation.number_schema(),
                           {"type": "string", "pattern": validation.anchored(_RATE)}],
                 "description": "tasks per second: N, N/s, N/m or N/h; 0 = unlimited"},
        "burst": count,
        "max_queued": count,
        "max_priority": validation.priority_schema(),
        "jitter_s": validation.seconds_schema(),
        "allow_commands": {"type": "boolean"},
    }  # fmt: skip
    defaults = TenantSettings()
    schema = {f: {**part, "default": getattr(defaults, f)} for f, part in schema.items()}
    return schema
