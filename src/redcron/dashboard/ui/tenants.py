"""``/tenants``: every tenant's settings (weight, cap, rate), in flight,
queued and share of dispatch over the last minute; ``/tenants/<t>``: one
tenant, with the settings form (admin only: a tenant raising its own weight
or caps would defeat them)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import flask

from redcron.dashboard.api import actions, auth
from redcron.dashboard.api.common import redcron_app
from redcron.dashboard.ui import render
from redcron.dashboard.ui.render import Reply
from redcron.errors import ValidationError
from redcron.keys import PRIORITIES
from redcron.model import validation
from redcron.model.tenants import SETTINGS_FIELDS, TenantSettings
from redcron.store import Page, page_tenants, trigger_lag_of

bp = flask.Blueprint("tenants", __name__)

#: the window of the trigger lag column
LAG_MINUTES = 60

#: what each settings field means, shown next to its input
HELP = {
    "weight": "share of dispatch relative to other tenants (1-1000)",
    "max_in_flight": "most tasks leased at once; 0 = no cap",
    "rate": "tasks started per second, e.g. 20 or 20/s or 600/m; 0 = unlimited",
    "burst": "token bucket size for the rate; 0 = one second of rate",
    "max_queued": "most queued tasks before submissions are refused; 0 = unlimited",
    "max_priority": "highest priority class the tenant may use",
    "jitter_s": "default jitter of the tenant's scheduled fires, in seconds",
    "allow_commands": "may create and run command and container tasks (arbitrary programs "
    "on a worker: grant only to tenants you trust, see docs/operations.md)",
}
_BOOLS = {"1": True, "true": True, "yes": True, "0": False, "false": False, "no": False}


def tenant_page() -> Page[str]:
    """The page of tenant names the viewer asked for (``?after=``/``?before=``):
    a tenant's own viewer sees only itself."""
    broker = redcron_app().broker
    only = auth.scope()
    after, before = render.after_cursor(), render.before_cursor()
    return page_tenants(broker, after, render.PER_PAGE, only, before)


@bp.get("/tenants")
def index() -> Reply:
    app = redcron_app()
    names = tenant_page()
    rows = app.tenants.rows([t for t in names.items if auth.may_see(t)])
    return render.page(
        "tenants.html",
        title="Tenants",
        tenants=render.keyed(names, rows),
        lag=trigger_lag_of(app.broker, [r.tenant for r in rows], LAG_MINUTES),
    )


@bp.get("/tenants/<tenant>")
def show(tenant: str) -> Reply:
    validation.name("tenant", tenant)
    auth.tenant_path(tenant)
    return _tenant_page(tenant)


def _tenant_page(
    tenant: str,
    errors: Mapping[str, str] | None = None,
    typed: Mapping[str, str] | None = None,
    status: int = 200,
) -> Reply:
    """The tenant's page; with ``errors`` (field -> message) the form as it was
    sent (``typed``), each message next to its field."""
    return render.page(
        "tenant.html",
        title=f"Tenant {tenant}",
        status=status,
        tenant_status=redcron_app().tenants.show(tenant),
        fields=SETTINGS_FIELDS,
        help=HELP,
        classes=PRIORITIES,
        admin=auth.current().kind == "admin" and auth.current().may_change,
        errors=errors or {},
        typed=typed or {},
    )


def _typed(field: str, text: str, kind: type) -> Any:
    """One form field's text as TenantSettings holds it (raises ValidationError)."""
    if kind is bool:
        if text.lower() not in _BOOLS:
            raise ValidationError(field, f"{text!r} is not yes or no")
        return _BOOLS[text.lower()]
    if field == "rate" or kind is str:
        return text
    try:
        return kind(text)
    except ValueError:
        word = "a whole number" if kind is int else "a number"
        raise ValidationError(field, f"{text!r} is not {word}") from None


def changes_from_form(form: Any) -> dict[str, Any]:
    """The settings a form changes, typed as TenantSettings holds them; raises
    :class:`FormErrors` naming every field that is not."""
    defaults = TenantSettings()
    out: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for field in SETTINGS_FIELDS:
        text = (form.get(field) or "").strip()
        if not text:
            continue
        try:
            out[field] = _typed(field, text, type(getattr(defaults, field)))
        except ValidationError as exc:
            errors[field] = exc.message
    if errors:
        raise FormErrors(errors)
    return out


class FormErrors(ValidationError):
    """Several fields of a form failed validation: field -> message."""

    def __init__(self, errors: Mapping[str, str]) -> None:
        first = next(iter(errors))
        super().__init__(first, errors[first])
        self.errors = dict(errors)


@bp.post("/tenants/<tenant>")
def update(tenant: str) -> Reply:
    validation.name("tenant", tenant)
    auth.tenant_path(tenant)
    auth.admin_only("changing tenant settings")
    form = flask.request.form
    try:
        changes = changes_from_form(form)
        actions.note(detail=" ".join(f"{k}={v}" for k, v in sorted(changes.items())))
        redcron_app().tenants.set(tenant, **changes)
    except FormErrors as exc:
        return _form_again(tenant, exc.errors, form)
    except ValidationError as exc:
        # a range or a combination TenantSettings refuses; its field, if the form has it
        field = exc.field if exc.field in SETTINGS_FIELDS else ""
        return _form_again(tenant, {field: exc.message if field else str(exc)}, form)
    flask.flash(f"saved {', '.join(sorted(changes))} of {tenant}" if changes else "nothing changed")
    return render.go("ui.tenants.show", tenant=tenant)


def _form_again(tenant: str, errors: Mapping[str, str], form: Any) -> Reply:
    """400: the form as sent, each error next to its field; nothing was saved."""
    typed = {f: form.get(f, "") for f in SETTINGS_FIELDS if f in form}
    return _tenant_page(tenant, errors, typed, status=400)
