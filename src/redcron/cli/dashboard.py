"""``redcron dashboard``: the HTML dashboard (``/``), the REST API (``/v1``) and
``/metrics``, served by waitress."""

from __future__ import annotations

import signal
import sys
from types import FrameType

import click
from waitress.server import BaseWSGIServer, MultiSocketServer, create_server

from redcron.cli.common import app_option, build_app, durability_option, redis_option
from redcron.dashboard import create_app

#: requests waitress may read ahead on one connection (≥ 1: see dashboard/api/connection.py)
LOOKAHEAD = 1


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to listen on.")
@click.option(
    "--port", type=click.IntRange(0, 65535), default=8000, show_default=True,
    help="Port to listen on (0: any free port; the one chosen is printed).",
)  # fmt: skip
@click.option(
    "--threads", type=click.IntRange(min=1), default=4, show_default=True,
    help="Requests served at once.",
)  # fmt: skip
@click.option(
    "--admin-token", envvar="REDCRON_ADMIN_TOKEN", metavar="TOKEN",
    help="Token that may do everything (env REDCRON_ADMIN_TOKEN; prefer the env: "
    "arguments show in ps).  Without it only tenant and worker tokens work.",
)  # fmt: skip
@click.option(
    "--metrics-token", envvar="REDCRON_METRICS_TOKEN", metavar="TOKEN",
    help="Token GET /metrics requires (env REDCRON_METRICS_TOKEN).  Without it "
    "/metrics is open, as scrape targets usually are: firewall it.",
)  # fmt: skip
@app_option
@redis_option
@durability_option
def dashboard(
    host: str,
    port: int,
    threads: int,
    admin_token: str | None,
    metrics_token: str | None,
    app_path: str | None,
    redis_url: str | None,
    durability: str | None,
) -> None:
    """Serve the dashboard (/), the REST API (/v1) and /metrics with waitress.

    The dashboard's login page takes the admin token or a tenant token (a
    tenant sees only its own tenant).  Every API request but
    GET /v1/openapi.json needs Authorization: Bearer <token>:
    the admin token, or one from `redcron tenants token create` or
    `redcron workers token create`.  POST /v1/tasks enqueues tasks registered
    on the app given with -A.  GET /metrics is Prometheus text (see
    docs/operations.md), open unless --metrics-token is set.
    """
    app = build_app(app_path, redis_url, durability)
    web = create_app(app, admin_token=admin_token or None, metrics_token=metrics_token or None)
    # lookahead: waitress reads a connection while its request runs, so it sees a
    # client hang up, and a long-polling lease takes no work for a client gone
    server = create_server(
        web, host=host, port=port, threads=threads, channel_request_lookahead=LOOKAHEAD
    )
    for where in listening(server):
        click.echo(
            f"redcron dashboard listening on {where} "
            "(dashboard: /, API: /v1, /v1/openapi.json, metrics: /metrics)"
        )
    sys.stdout.flush()
    # SIGTERM (a service manager, `redcron up`, a container stop) stops it as
    # Ctrl-C does: waitress's run() takes SystemExit as its cue to stop taking
    # requests and let the running ones finish (up to 5 s), then the process
    # exits 0 — the default handler killed it mid-request (exit -15)
    signal.signal(signal.SIGTERM, _stop)
    try:
        server.run()
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second one: gone at once
        server.close()
        app.close()
    click.echo("redcron dashboard stopped", err=True)


def _stop(_signum: int, _frame: FrameType | None) -> None:
    raise SystemExit(0)


def listening(server: BaseWSGIServer | MultiSocketServer) -> list[str]:
    """``http://host:port/`` of every socket waitress bound (port 0 resolved)."""
    if isinstance(server, MultiSocketServer):
        pairs = [(str(h), int(p)) for h, p in server.effective_listen]
    else:
        sock = server.socket
        assert sock is not None  # bound by create_server
        host, port = sock.getsockname()[:2]
        pairs = [(str(host), int(port))]
    return [f"http://{f'[{h}]' if ':' in h else h}:{p}/" for h, p in pairs]
