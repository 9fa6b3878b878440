"""What a job's tasks must be, said with an example (issue 29 item 9)."""

from __future__ import annotations

import pytest

from redcron.errors import ValidationError
from redcron.model.jobs import JobSpec


@pytest.mark.parametrize(
    ("task", "example"),
    [({"ref": "shop.resize"}, "Task('module.function')"), ("shop.resize", "Task('shop.resize')")],
)
def test_a_task_that_is_not_a_task_says_what_to_write(task: object, example: str) -> None:
    spec = JobSpec(name="n", tasks={"p": task}, cron="0 * * * *")  # type: ignore[dict-item]
    with pytest.raises(ValidationError) as err:
        spec.validate()
    assert err.value.field == "tasks.p"
    assert example in str(err.value)
