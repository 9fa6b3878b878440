"""What ``redcron up`` does to the deployment besides running it: the steps
it takes against Redis before the children start (grant the examples' tenants
command tasks, apply the job files) and after (enqueue the example tasks), and
admin access to the dashboard it started (the token file, the one-time login
link).  ``up`` (cli/up.py) calls them in order; the children it supervises
are cli/supervise.py's.  A step closes its App when done (``up`` runs on for
hours), bar enqueue_example_tasks, whose App the click context closes.
"""

from __future__ import annotations

import sys
from contextlib import closing
from pathlib import Path

import click

from redcron.cli.common import build_app
from redcron.config import DATA_DIR, write_private_file
from redcron.model.jobs import JobSpec
from redcron.redact import masked_url
from redcron.store import LINK_TTL_S, LoginLinks

#: the admin token of the dashboard ``up`` started, for API clients, in its data
#: directory
ADMIN_TOKEN_NAME = "admin.token"


def dashboard_access(
    app_path: str | None, redis_url: str, url: str, data_dir: Path = DATA_DIR
) -> str:
    """How to get into the dashboard at ``url``: a one-time login link, and the
    admin token for the API (in ``data_dir``, shown as given)."""
    token_file = data_dir / ADMIN_TOKEN_NAME
    with closing(build_app(app_path, redis_url)) as app:
        code = LoginLinks(app.broker).create()
    return (
        f"dashboard  {url}\n"
        f"log in     {url}login/once/{code}\n"
        f"           (opens the dashboard logged in as admin; valid {LINK_TTL_S // 60} "
        "minutes, once)\n"
        f"API        the admin token is in {token_file} (mode 0600):\n"
        f'           curl -H "Authorization: Bearer $(cat {token_file})" {url}v1/jobs'
    )


def write_admin_token(token: str, data_dir: Path = DATA_DIR) -> Path:
    """Write ``token`` to ``<data_dir>/admin.token``, readable by its owner only."""
    return write_private_file(Path(ADMIN_TOKEN_NAME), f"{token}\n", data_dir)


def remove_admin_token(token: str, data_dir: Path = DATA_DIR) -> None:
    """Remove the file :func:`write_admin_token` wrote, unless another ``up`` has
    written its own since."""
    path = data_dir / ADMIN_TOKEN_NAME
    try:
        if path.read_text(encoding="utf-8").strip() == token:
            path.unlink()
    except OSError:
        pass


def grant_commands(app_path: str | None, redis_url: str, tenants: tuple[str, ...]) -> None:
    """Grant command tasks to the examples' tenants: any other tenant needs an
    admin's ``redcron tenants set T --allow-commands`` (docs/operations.md)."""
    with closing(build_app(app_path, redis_url)) as app:
        for tenant in tenants:
            app.tenants.set(tenant, allow_commands=True)
            click.echo(
                f"tenant {tenant}: command tasks granted (the examples run one); "
                f"revoke with `redcron tenants set {tenant} --no-allow-commands`"
            )


def apply_jobs(app_path: str | None, redis_url: str, specs: list[JobSpec]) -> None:
    """Upsert the jobs of ``-f`` files, a line each saying what changed."""
    with closing(build_app(app_path, redis_url)) as app:
        for spec, res in zip(specs, app.jobs.put_many(specs), strict=True):
            click.echo(f"job {spec.tenant}/{spec.name}: {res.change}")


def enqueue_example_tasks(app_path: str, redis_url: str) -> None:
    """Call the app module's ``enqueue_examples(app)`` hook, if it has one."""
    app = build_app(app_path, redis_url)
    module = sys.modules.get(app_path.partition(":")[0])
    hook = getattr(module, "enqueue_examples", None)
    if not callable(hook):
        click.echo(f"({app_path} has no enqueue_examples(app); nothing enqueued)")
        return
    handles = hook(app) or []
    ids = [getattr(h, "id", str(h)) for h in handles]
    click.echo(
        f"enqueued {len(ids)} example tasks; look at one with:\n"
        f"  redcron task show {ids[0]} --redis {masked_url(redis_url)}"
        if ids
        else "enqueued the example tasks"
    )
