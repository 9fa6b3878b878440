"""``redcron admin token ...``: the admin's own extra tokens (a viewer for a
read-only dashboard, an operator for a second person), beside the admin token
the dashboard is started with."""

from __future__ import annotations

import click

from redcron.cli.tokens import admin_token


@click.group()
def admin() -> None:
    """The deployment admin's extra API and dashboard tokens."""


admin.add_command(admin_token)
