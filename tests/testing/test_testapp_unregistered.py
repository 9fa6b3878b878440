"""TestApp's ``jobs.put`` refuses a job whose task no registered task is, as
``app.jobs.put`` does (issue 29 §4), with no Redis server."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from redcron import Task, ValidationError
from redcron.testing import TestApp


def test_testapp_jobs_put_refuses_an_unknown_task_naming_the_closest() -> None:
    with TestApp(now=datetime(2027, 1, 4, 9, 0, tzinfo=UTC)) as t:

        @t.task(name="shop.resize")
        def resize(width: int) -> int:
            return width

        with pytest.raises(ValidationError, match=r"did you mean 'shop\.resize'") as info:
            t.jobs.put("nightly", cron="0 2 * * *", tasks={"load": Task("shop.resze")})
        assert info.value.field == "tasks.load.name"
        assert t.jobs.list_jobs("default") == []
        job = t.jobs.put("nightly", cron="0 2 * * *", tasks={"load": Task("shop.resize", args=[1])})
        assert job.change == "created"
        forced = t.jobs.put(
            "other", cron="0 2 * * *", tasks={"x": Task("elsewhere.task")}, allow_unregistered=True
        )
        assert forced.change == "created"
