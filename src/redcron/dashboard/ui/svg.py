"""What the dashboard's drawings share: coordinates as text, state classes, the empty drawing.

Pure functions (no clock, no random ids), so a drawing is a function of its
input and pages diff cleanly.
"""

from __future__ import annotations

import re

from markupsafe import Markup, escape

#: a state word usable in a class name; anything else is styled as "unknown"
_CLASS_SAFE = re.compile(r"[A-Za-z0-9_-]+")


def num(x: float) -> str:
    """A coordinate as short, stable text (at most one decimal)."""
    x = round(x, 1) + 0.0  # + 0.0 turns -0.0 into 0.0
    return str(int(x)) if x.is_integer() else f"{x:.1f}"


def state_class(state: str) -> str:
    return f"state-{state}" if _CLASS_SAFE.fullmatch(state) else "state-unknown"


def empty_svg(kind: str, text: str, width: int, height: int) -> Markup:
    cls = "dag" if kind == "dag" else f"chart {kind}"
    return Markup(
        f'<svg class="{cls}" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}"'
        f' width="{width}" height="{height}" role="img" aria-label="{escape(text)}"'
        f' font-size="12"><text class="empty" x="{num(width / 2)}" y="{num(height / 2 + 4)}"'
        f' text-anchor="middle">{escape(text)}</text></svg>'
    )
