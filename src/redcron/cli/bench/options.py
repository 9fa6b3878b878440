"""What the ``redcron bench`` commands share: the --redis and --json options
and how a result is printed."""

from __future__ import annotations

import click

from redcron.model import serialize

#: options the benchmarks share (each use adds a click.Option of its own)
redis_option = click.option(
    "--redis", "redis_url", default=None, metavar="URL", help="Use this Redis."
)
json_option = click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")


def emit(result: dict[str, object], as_json: bool) -> None:
    """Print ``result``: one JSON object, or a ``key  value`` line per field."""
    if as_json:
        click.echo(serialize.dumps(result, indent=None))  # the one strict serializer
        return
    width = max(len(k) for k in result)
    for key, value in result.items():
        click.echo(f"{key.ljust(width)}  {value}")
