"""Tokens never reach a log or an error message: a live ``redcron dashboard``
is sent the admin token, a tenant token, a worker token and wrong tokens
through every door (bearer header, login form, metrics, the worker protocol,
failing requests), and its whole output is searched for them.  (Redis
passwords: tests/integration/test_tls_acl.py does the same for every
component.)"""

from __future__ import annotations

import http.cookiejar
import re
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from dashboard_proc import dashboard  # tests/helpers

from redcron import App
from redcron.store.tokens import TokenStore

ADMIN = "admin-SECRET-7f3a9c"
METRICS = "metrics-SECRET-51bd02"
WRONG = "wrong-SECRET-e81f44"


def _call(opener: Any, url: str, data: bytes | None = None, **headers: str) -> int:
    request = urllib.request.Request(url, data=data, headers=headers)
    try:
        with opener.open(request, timeout=10) as resp:
            resp.read()
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        exc.read()
        exc.close()
        return int(exc.code)


def test_no_token_reaches_the_dashboards_output(
    redis_url: str, key_prefix: str, tmp_path: Path
) -> None:
    app = App(redis_url, prefix=key_prefix.rstrip(":"))
    tokens = TokenStore(app.broker)
    _info, tenant = tokens.create_tenant("acme")
    _info, worker = tokens.create_worker(["default"])
    app.close()
    secrets = [ADMIN, METRICS, WRONG, tenant, worker, tenant.partition(".")[2]]
    log = tmp_path / "dashboard.log"
    env = {"REDCRON_ADMIN_TOKEN": ADMIN, "REDCRON_METRICS_TOKEN": METRICS}
    with dashboard(redis_url, key_prefix, log_path=log, **env) as base:
        plain = urllib.request.build_opener()
        for token in (ADMIN, tenant, worker, WRONG):
            bearer = {"Authorization": f"Bearer {token}"}
            _call(plain, f"{base}/v1/jobs", **bearer)
            _call(plain, f"{base}/v1/jobs/{token}", **bearer)  # a 404 naming nothing
            _call(plain, f"{base}/v1/jobs", data=b"{not json", **bearer)  # a 400
            _call(plain, f"{base}/v1/worker/lease", data=b"{}", **bearer)
            _call(plain, f"{base}/metrics", **bearer)
        assert _call(plain, f"{base}/metrics", Authorization=f"Bearer {METRICS}") == 200
        # the login form, with a good and a bad token
        for token, expected in ((WRONG, 401), (tenant, 200), (ADMIN, 200)):
            jar = http.cookiejar.CookieJar()
            browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
            with browser.open(f"{base}/login", timeout=10) as resp:
                page = resp.read().decode()
            csrf = re.search(r'name="csrf_token" value="([^"]+)"', page)
            assert csrf is not None
            form = urllib.parse.urlencode({"token": token, "csrf_token": csrf.group(1)})
            status = _call(browser, f"{base}/login", data=form.encode())
            assert status == expected, token
            assert all(token not in c.value for c in jar)  # the cookie holds no token
    output = log.read_text(errors="replace")
    for secret in secrets:
        assert secret not in output, f"a token leaked into the dashboard's output:\n{output}"
