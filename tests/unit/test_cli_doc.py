"""docs/cli.md cannot drift from the click commands: its generated part is
what ``tests/helpers/docgen.py`` renders from ``redcron.cli.main`` now
(``make docs`` rewrites it), and it names every visible command and option."""

from __future__ import annotations

import click
import docgen  # tests/helpers
import pytest

DOC = docgen.CLI_DOC.read_text()


def _generated() -> str:
    start, end = docgen.block(DOC, "cli", docgen.CLI_DOC)
    return DOC[start:end]


def test_the_cli_reference_is_up_to_date() -> None:
    assert docgen.render(DOC, docgen.CLI_DOC) == DOC, (
        f"docs/cli.md is stale: run `{docgen.COMMAND}` "
        "(or .venv/bin/python tests/helpers/docgen.py) and commit the result"
    )


COMMANDS = docgen.cli_commands()


def test_it_walks_the_nested_groups() -> None:
    paths = {path for path, _ctx in COMMANDS}
    assert {"redcron worker", "redcron jobs apply", "redcron tenants token create"} <= paths


@pytest.mark.parametrize("ctx", [c for _p, c in COMMANDS], ids=[p for p, _c in COMMANDS])
def test_every_command_and_option_has_its_section(ctx: click.Context) -> None:
    text = _generated()
    heading = f"\n### {ctx.command_path}\n"
    assert heading in text, f"docs/cli.md has no section for `{ctx.command_path}`"
    section = text.split(heading, 1)[1].split("\n### ", 1)[0]
    for param in ctx.command.get_params(ctx):
        if isinstance(param, click.Option) and not param.hidden:
            for opt in param.opts:
                assert opt in section, f"`{ctx.command_path}`'s {opt} is not in docs/cli.md"


def test_a_changed_help_makes_it_stale(monkeypatch: pytest.MonkeyPatch) -> None:
    # the check compares with the commands as built now, not with a copy
    _path, ctx = next((p, c) for p, c in COMMANDS if p == "redcron worker")
    option = next(p for p in ctx.command.params if "--queues" in getattr(p, "opts", ()))
    monkeypatch.setattr(option, "help", "a help nobody wrote")
    assert docgen.render(DOC, docgen.CLI_DOC) != DOC
