"""The app ``tests/integration/test_openapi_schemathesis.py`` serves the API with
(``redcron dashboard -A openapi_app:app``): two tasks ``POST /v1/tasks`` takes."""

from __future__ import annotations

from redcron import App

app = App()


@app.task(retries=0)
def ping() -> str:
    return "pong"


@app.task
def add(x: int, y: int = 0) -> int:
    return x + y
