"""Issue 29 §4: a job whose Python task no registered task is — neither the
writing App nor a live worker registers it — is refused, naming the closest
registered names, by ``redcron jobs apply``, ``app.jobs.put`` and
``POST``/``PUT /v1/jobs`` (``TestApp``'s: tests/testing/test_testapp_unregistered.py);
``--allow-unregistered`` / ``allow_unregistered=True`` /
``?allow_unregistered=true`` writes it anyway.  Nothing is written when one is
refused.  (A typo'd name applied at noon used to fail every night.)"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from cli_fixtures import Invoke, invoke_fixture, prefix_fixture  # noqa: F401 (fixtures)
from cli_output import one_error_line

from redcron import App, Task
from redcron.dashboard import create_app
from redcron.engine.workers import Registration, WorkerRegistry
from redcron.errors import NotFound, ValidationError
from redcron.model.jobs import job_spec

ADMIN = "admin-token"
SHOP = """
    from redcron import App, Task
    app = App({url!r}, prefix={prefix!r})

    @app.task(name="shop.resize")
    def resize(width):
        return width

    @app.task(name="shop.reindex")
    def reindex():
        pass

    app.job("thumbs", cron="0 2 * * *", tasks={{"t": Task("shop.resize", args=[64])}})
"""


@pytest.fixture
def shop(redis_url: str, prefix: str) -> Iterator[App]:
    """The app that defines the shop's tasks."""
    a = App(redis_url, prefix=prefix)

    @a.task(name="shop.resize")
    def resize(width: int) -> int:
        return width

    @a.task(name="shop.reindex")
    def reindex() -> None:
        pass

    yield a
    a.close()


@pytest.fixture
def client_app(redis_url: str, prefix: str) -> Iterator[App]:
    """A client App that registers no task (its workers run another app)."""
    a = App(redis_url, prefix=prefix)
    yield a
    a.close()


@pytest.fixture
def shop_module(module_dir: Callable[[str], str], redis_url: str, prefix: str) -> str:
    """``-A <module>:app`` of the shop's app (a new module name per test)."""
    sys.path.insert(0, str(Path.cwd()))
    name = module_dir(SHOP.format(url=redis_url, prefix=prefix))
    importlib.invalidate_caches()
    return f"{name}:app"


def typo_file(tmp_path: Path, task: str = "shop.resze") -> str:
    path = tmp_path / "jobs.yaml"
    path.write_text(f"name: nightly\ntenant: acme\ncron: '0 2 * * *'\ntasks:\n  load: {task}\n")
    return str(path)


def publish_worker(app: App, *tasks: str) -> None:
    WorkerRegistry(app.broker).publish(
        Registration("w-shop", "h", 1, ("default",), (), 4, 0, tasks), 60_000
    )


def test_app_jobs_put_refuses_a_typo_naming_the_closest_names(shop: App) -> None:
    with pytest.raises(ValidationError) as info:
        shop.jobs.put("nightly", tenant="acme", tasks={"load": Task("shop.resze")})
    assert info.value.field == "tasks.load.name"
    message = info.value.message
    assert "job acme/nightly: task 'load' runs 'shop.resze', which is not a registered task" in (
        message
    )
    assert "did you mean 'shop.resize'" in message
    assert "allow_unregistered=True" in message and "--allow-unregistered" in message
    with pytest.raises(NotFound):
        shop.jobs.get("nightly", tenant="acme")  # nothing written
    # the way out, for tasks registered elsewhere
    job = shop.jobs.put(
        "nightly", tenant="acme", tasks={"load": Task("shop.resze")}, allow_unregistered=True
    )
    assert job.change == "created"


def test_a_client_app_may_name_a_task_a_live_worker_registers(client_app: App) -> None:
    with pytest.raises(ValidationError, match="no task is known here"):
        client_app.jobs.put("nightly", tasks={"t": Task("shop.resize")})
    publish_worker(client_app, "shop.resize", "shop.reindex")
    assert client_app.jobs.put("nightly", tasks={"t": Task("shop.resize")}).change == "created"
    with pytest.raises(ValidationError, match=r"did you mean 'shop\.reindex'"):
        client_app.jobs.put("other", tasks={"t": Task("shop.reindx")})
    # a batch names the job, and writes none of it
    with pytest.raises(ValidationError) as info:
        client_app.jobs.put_many(
            [
                job_spec("a", tasks={"t": Task("shop.resize")}),
                job_spec("b", tasks={"t": Task("nope")}),
            ]
        )
    assert info.value.field == "tasks.t.name" and "job default/b" in info.value.message
    assert {j.name for j in client_app.jobs.list_jobs("default")} == {"nightly"}


def test_jobs_apply_refuses_a_typo_and_writes_nothing(
    invoke: Invoke, shop: App, shop_module: str, tmp_path: Path
) -> None:
    result = invoke("jobs", "apply", "-A", shop_module, "-f", typo_file(tmp_path))
    assert result.exit_code != 0
    line = one_error_line(result)
    assert "tasks.load.name" in line and "did you mean 'shop.resize'" in line
    assert "--allow-unregistered" in line
    assert shop.jobs.list_jobs("acme") == []  # not even the declared one
    assert shop.jobs.list_jobs("default") == []

    allowed = invoke(
        "jobs", "apply", "-A", shop_module, "-f", typo_file(tmp_path), "--allow-unregistered"
    )
    assert allowed.exit_code == 0, allowed.output
    assert "created    acme/nightly" in allowed.stdout
    # no live worker: said for the file's task and the declared job's (issue 29 §3)
    assert "warning: no live worker serves task 'shop.resze'" in allowed.stderr
    assert "warning: no live worker serves task 'shop.resize' (job default/thumbs" in (
        allowed.stderr
    )


def test_jobs_apply_without_an_app_reads_the_live_workers(
    invoke: Invoke, client_app: App, tmp_path: Path
) -> None:
    # nothing says which tasks exist: refused, saying what to give
    result = invoke("jobs", "apply", "-f", typo_file(tmp_path, "shop.resize"))
    assert result.exit_code != 0
    line = one_error_line(result)
    assert "no task is known here" in line and "-A module:app" in line
    assert "--allow-unregistered" in line
    # a live worker registers it: accepted, and no warning
    publish_worker(client_app, "shop.resize")
    ok = invoke("jobs", "apply", "-f", typo_file(tmp_path, "shop.resize"))
    assert ok.exit_code == 0, ok.output
    assert "warning" not in ok.stderr
    typo = invoke("jobs", "apply", "-f", typo_file(tmp_path))
    assert typo.exit_code != 0 and "did you mean 'shop.resize'" in one_error_line(typo)


def test_the_api_refuses_with_the_field_named_unless_allowed(shop: App) -> None:
    client = create_app(shop, admin_token=ADMIN).test_client()
    client.environ_base["HTTP_AUTHORIZATION"] = f"Bearer {ADMIN}"
    body = {"name": "nightly", "tenant": "acme", "every": "1h", "task": {"name": "shop.resze"}}
    resp = client.post("/v1/jobs", json=body)
    assert resp.status_code == 400
    err = resp.get_json()["error"]
    assert err["field"] == "tasks.nightly.name"
    assert "did you mean 'shop.resize'" in err["message"]
    created = client.post("/v1/jobs?allow_unregistered=true", json=body)
    assert created.status_code == 201, created.get_json()
    job_id = created.get_json()["id"]
    # a replace is checked the same way
    replace = {"every": "2h", "task": {"name": "shop.reindx"}}
    resp = client.put(f"/v1/jobs/{job_id}", json=replace)
    assert resp.status_code == 400 and "did you mean 'shop.reindex'" in str(resp.get_json())
    assert client.put(f"/v1/jobs/{job_id}?allow_unregistered=true", json=replace).status_code == 200
    bad = client.post("/v1/jobs?allow_unregistered=maybe", json=body)
    assert bad.status_code == 400 and bad.get_json()["error"]["field"] == "allow_unregistered"
