"""The generated parts of the docs: the reference tables of
``docs/architecture.md`` and the CLI reference ``docs/cli.md``.

    make docs                                  # rewrite them
    .venv/bin/python tests/helpers/docgen.py   # the same
    .venv/bin/python tests/helpers/docgen.py --check   # exit 1 when stale

Four parts sit between ``<!-- BEGIN generated: NAME -->`` and
``<!-- END generated: NAME -->`` markers, and only those lines are rewritten:

- ``modules``: a table per package of :data:`MODULE_PACKAGES` (a subpackage
  has its own table when it is listed too): every module of it, with the first
  sentence of its docstring, the classes in it that do something (not the
  records and NamedTuples it returns) and the scripts it runs (a ``lua/*.lua`` name
  passed to a call, or held as a value of a dict; names a module only lists,
  as the loader does, do not count);
- ``scripts``: every ``src/redcron/lua/*.lua``, with the first sentence of its
  header comment (``--[[ name: ...``) and its ``Upholds:`` sentence;
- ``libs``: every ``.lua`` under ``src/redcron/lua/lib/``, with its header's
  first sentence, the includes it names (``-- @include``) and the top-level
  functions it defines;
- ``records``: every record dataclass, with its docstring, where it comes
  back from (public functions whose return annotation names it, and record
  fields that hold it) and its fields.  A record is a dataclass exported by
  ``redcron.model`` (its ``__all__``), defined in a module with ``records``
  in its dotted name, or named in :data:`ALSO`, wherever it is defined.
Everything is read with ``ast`` and plain text from what is in the tree now
(nothing is imported), so modules and scripts may move: the tables follow.
``tests/unit/test_architecture_doc.py`` fails when the doc is not what this
script writes, and names the command.

``docs/cli.md`` has one generated part, ``cli``: every command of the
``redcron`` click group (hidden ones left out), each under its own heading with
its ``--help`` as click renders it at a fixed width of 100 columns, so the page
is the same on every terminal.  This part imports ``redcron.cli.main`` (click
holds the commands only once they are built).  ``tests/unit/test_cli_doc.py``
fails when the page is not what this script writes.
"""

from __future__ import annotations

import ast
import functools
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "redcron"
LUA = PACKAGE / "lua"
DOC = ROOT / "docs" / "architecture.md"
CLI_DOC = ROOT / "docs" / "cli.md"
#: the width the CLI reference's help is rendered at (not the terminal's)
CLI_WIDTH = 100
COMMAND = "make docs"

#: the packages the ``modules`` part has a table for, in this order (a package
#: that moves or splits is an edit here and ``make docs``)
MODULE_PACKAGES = ("redcron.engine", "redcron.store", "redcron.doctor")
#: records that live outside redcron.model (found by name wherever they are defined)
ALSO = ("TaskCancel", "RunCancel", "DoctorReport", "DoctorSummary", "Finding", "TenantRecount")
#: parts of the package whose functions are not "where a record comes back from"
#: for a reader of the library: the faces print records, they do not return them
FACES = {"cli", "dashboard", "chaos"}


# -- Lua -------------------------------------------------------------------------


def lua_header(text: str) -> list[str]:
    """The lines of the opening ``--[[ name: ... ]]`` comment, stripped, without
    the name prefix (see :func:`header_name`)."""
    m = re.match(r"\s*--\[\[(.*?)\]\]", text, re.S)
    if not m:
        return []
    lines = [line.strip() for line in m.group(1).strip().splitlines()]
    lines[0] = re.sub(r"^[\w/.-]+:\s*", "", lines[0])
    return lines


def header_name(text: str) -> str | None:
    """The name a header opens with (``--[[ lease: ...`` -> ``lease``)."""
    m = re.match(r"\s*--\[\[\s*([\w/.-]+):", text)
    return m.group(1) if m else None


def sentences(text: str) -> Iterator[str]:
    """Split on a full stop outside parentheses followed by a space (or the end)."""
    depth, start = 0, 0
    for i, ch in enumerate(text):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth = max(0, depth - 1)
        elif ch == "." and depth == 0 and (i + 1 == len(text) or text[i + 1] == " "):
            yield text[start : i + 1].strip()
            start = i + 1
    if text[start:].strip():
        yield text[start:].strip()


#: the lines of a header that open its KEYS/ARGV/returns/errors/invariants part
_FIELD = re.compile(r"^(KEYS|ARGV|Returns|Errors|Upholds)\b")


def _part(lines: list[str], start: int) -> str:
    """The first sentence of the lines from ``start`` up to the next field line."""
    out = [lines[start]]
    for line in lines[start + 1 :]:
        if _FIELD.match(line):
            break
        out.append(line)
    return next(sentences(" ".join(" ".join(out).split())), "").rstrip(".")


def summary(lines: list[str]) -> str:
    """The header's first sentence, before its KEYS/ARGV/Returns lines."""
    if not lines or _FIELD.match(lines[0]):
        return "—"
    return _part(lines, 0) or "—"


def upholds(lines: list[str]) -> str:
    """The first sentence of the header's ``Upholds:`` line(s)."""
    for i, line in enumerate(lines):
        if line.startswith("Upholds:"):
            rest = [line.removeprefix("Upholds:").strip(), *lines[i + 1 :]]
            return _part(rest, 0) or "—"
    return "—"


def cell(text: str) -> str:
    """Text for a table cell: no pipes, reST's double backquotes and roles as
    Markdown's code, and a word holding ``<...>`` (a key name) in backquotes, or Markdown would
    take it for an HTML tag."""
    text = text.replace("``", "`").replace("|", "\\|")
    text = re.sub(r":[a-z]+:(`[^`]+`)", r"\1", text)  # :meth:`x` -> `x`
    words = []
    for word in text.split(" "):
        m = re.fullmatch(r"([(\[]*)([^`\s]*<[^`\s]*>[^`\s]*?)([)\],;:.]*)", word)
        words.append(f"{m.group(1)}`{m.group(2)}`{m.group(3)}" if m else word)
    return " ".join(words)


def scripts_table() -> list[str]:
    rows = ["| script | does | upholds |", "|---|---|---|"]
    for path in sorted(LUA.glob("*.lua")):
        header = lua_header(path.read_text())
        rows.append(f"| `{path.stem}` | {cell(summary(header))} | {cell(upholds(header))} |")
    return rows


def libs_table() -> list[str]:
    rows = ["| lib | concern | includes | defines |", "|---|---|---|---|"]
    for path in sorted((LUA / "lib").rglob("*.lua")):
        text = path.read_text()
        name = path.relative_to(LUA).with_suffix("").as_posix()
        includes = re.findall(r"^--\s*@include\s+(\S+?)(?:\.lua)?\s*$", text, re.M)
        defines = re.findall(r"^local\s+function\s+(\w+)", text, re.M)
        rows.append(
            f"| `{name}` | {cell(summary(lua_header(text)))} | "
            + (", ".join(f"`{i}`" for i in includes) or "—")
            + " | "
            + (", ".join(f"`{d}`" for d in defines) or "—")
            + " |"
        )
    return rows


# -- Python ------------------------------------------------------------------------


Where = tuple[str, str]  # (module, class name)


@dataclass
class Module:
    name: str  # redcron.model.records
    path: Path
    tree: ast.Module
    classes: dict[str, ast.ClassDef] = field(default_factory=dict)
    imports: dict[str, Where] = field(default_factory=dict)  # alias -> (module, name)
    stars: list[str] = field(default_factory=list)  # modules it imports * from

    @property
    def rel(self) -> str:
        return self.path.relative_to(PACKAGE).as_posix()


@functools.cache
def load_modules() -> dict[str, Module]:
    mods: dict[str, Module] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        if is_pkg:
            parts.pop()
        name = ".".join(parts)
        mod = Module(name, path, ast.parse(path.read_text(), str(path)))
        package = name if is_pkg else name.rpartition(".")[0]
        for node in mod.tree.body:
            if isinstance(node, ast.ClassDef):
                mod.classes[node.name] = node
        for imp in ast.walk(mod.tree):
            if isinstance(imp, ast.ImportFrom):
                base = imp.module or ""
                if imp.level:
                    up = package.split(".")[: len(package.split(".")) - imp.level + 1]
                    base = ".".join([*up, base] if base else up)
                for alias in imp.names:
                    if alias.name == "*":
                        mod.stars.append(base)
                    else:
                        mod.imports[alias.asname or alias.name] = (base, alias.name)
        mods[name] = mod
    return mods


def resolve(mods: dict[str, Module], module: str, name: str) -> Where | None:
    """Where ``name`` as seen from ``module`` is defined: (module, class name)."""
    seen: set[Where] = set()
    while (module, name) not in seen:
        seen.add((module, name))
        mod = mods.get(module)
        if mod is None:
            return None
        if name in mod.classes:
            return module, name
        if name in mod.imports:
            module, name = mod.imports[name]
            continue
        star = next((m for m in mod.stars if m in mods and name in exported(mods[m])), None)
        if star is None:
            return None
        module = star
    return None


def is_dataclass(node: ast.ClassDef) -> bool:
    for dec in node.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        if isinstance(target, ast.Name | ast.Attribute) and ast.unparse(target).endswith(
            "dataclass"
        ):
            return True
    return False


def exported(mod: Module) -> list[str]:
    for node in mod.tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            # the literal names; a spliced list (``*_records``) is another
            # module's __all__, read where it is written
            elts = node.value.elts if isinstance(node.value, ast.List | ast.Tuple) else []
            return [str(ast.literal_eval(e)) for e in elts if not isinstance(e, ast.Starred)]
    return []


def records(mods: dict[str, Module]) -> list[Where]:
    found: set[Where] = set()
    model = mods.get("redcron.model")
    for name in exported(model) if model else []:
        where = resolve(mods, "redcron.model", name)
        if where and is_dataclass(mods[where[0]].classes[where[1]]):
            found.add(where)
    for mod in mods.values():
        if any("records" in part for part in mod.name.split(".")):
            found |= {(mod.name, c) for c, node in mod.classes.items() if is_dataclass(node)}
    for name in ALSO:
        where_also = [
            (m.name, name)
            for m in mods.values()
            if name in m.classes and is_dataclass(m.classes[name])
        ]
        if not where_also:
            raise DocgenError(f"ALSO names {name}, which no module defines: drop it")
        found |= set(where_also)
    return sorted(found, key=lambda r: (mods[r[0]].rel, r[1]))


def _names(annotation: ast.expr | None) -> set[str]:
    if annotation is None:
        return set()
    return set(re.findall(r"[A-Za-z_]\w*", ast.unparse(annotation)))


def sources(mods: dict[str, Module], wanted: set[Where]) -> dict[Where, list[str]]:
    """record -> where it comes back from: ``Owner.method``, ``module.func``,
    and ``in Record.field`` for a record field that holds it."""
    out: dict[Where, list[str]] = {w: [] for w in wanted}

    def note(mod: Module, annotation: ast.expr | None, label: str, owner: str | None) -> None:
        for n in _names(annotation):
            where = resolve(mods, mod.name, n)
            if where in out and where[1] != owner and label not in out[where]:
                out[where].append(label)

    def public(node: ast.stmt) -> bool:
        return isinstance(node, ast.FunctionDef) and not node.name.startswith("_")

    for mod in mods.values():
        parts = mod.name.split(".")
        face = len(parts) > 1 and parts[1] in FACES
        short = mod.name.removeprefix("redcron.")
        for node in mod.tree.body:
            if public(node) and not face:
                assert isinstance(node, ast.FunctionDef)
                note(mod, node.returns, f"`{short}.{node.name}`", None)
            if not isinstance(node, ast.ClassDef) or node.name.startswith("_"):
                continue
            as_record = (mod.name, node.name) in out
            for item in node.body:
                if public(item) and not face:
                    assert isinstance(item, ast.FunctionDef)
                    note(mod, item.returns, f"`{node.name}.{item.name}`", node.name)
                elif as_record and isinstance(item, ast.AnnAssign):
                    target = ast.unparse(item.target)
                    note(mod, item.annotation, f"in `{node.name}.{target}`", node.name)
    return out


def docstring(node: ast.ClassDef) -> str:
    """The class docstring on one line (it explains the fields)."""
    return " ".join((ast.get_docstring(node) or "").split()) or "—"


def record_fields(node: ast.ClassDef) -> str:
    names: list[str] = []
    for item in node.body:
        if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            if "ClassVar" not in ast.unparse(item.annotation):
                names.append(f"`{item.target.id}`")
        elif isinstance(item, ast.FunctionDef) and any(
            isinstance(d, ast.Name) and d.id == "property" for d in item.decorator_list
        ):
            names.append(f"property `{item.name}`")
    return ", ".join(names) or "—"


def records_table() -> list[str]:
    mods = load_modules()
    found = records(mods)
    came_from = sources(mods, set(found))
    rows = ["| record | defined in | what it is | returned by | fields |", "|---|---|---|---|---|"]
    for module, name in found:
        node = mods[module].classes[name]
        back = ", ".join(came_from[(module, name)]) or "—"
        rows.append(
            f"| `{name}` | `{mods[module].rel}` | {cell(docstring(node))} | "
            f"{back} | {record_fields(node)} |"
        )
    return rows


def module_summary(mod: Module) -> str:
    """The first sentence of the module's docstring."""
    text = " ".join((ast.get_docstring(mod.tree) or "").split("\n\n")[0].split())
    return next(sentences(text), "").rstrip(".") or "—"


def scripts_run(mod: Module, scripts: set[str]) -> list[str]:
    """The ``lua/*.lua`` scripts ``mod`` runs: a script's name passed to a call
    (``core._run("lease", ...)``) or held as a value of a dict (a table of which
    script runs what), in the order the module first names them."""
    found: dict[str, tuple[int, int]] = {}
    for node in ast.walk(mod.tree):
        named: list[ast.expr | None] = []
        if isinstance(node, ast.Call):
            named = list(node.args)
        elif isinstance(node, ast.Dict):
            named = list(node.values)
        for arg in named:
            if isinstance(arg, ast.Constant) and arg.value in scripts:
                at = (arg.lineno, arg.col_offset)
                found[arg.value] = min(found.get(arg.value, at), at)
    return sorted(found, key=found.__getitem__)


#: the bases of a class that holds values, not operations (left out of ``classes``)
_VALUE_BASES = ("NamedTuple", "Exception", "Error", "Enum", "Protocol", "TypedDict")


def service_classes(mod: Module) -> list[str]:
    """The public classes of ``mod`` that do something: a public method that is
    not a property, and not a dataclass, a NamedTuple, an exception or an enum."""
    out = []
    for node in mod.tree.body:
        if not isinstance(node, ast.ClassDef) or node.name.startswith("_") or is_dataclass(node):
            continue
        if any(ast.unparse(base).endswith(_VALUE_BASES) for base in node.bases):
            continue
        if any(
            isinstance(item, ast.FunctionDef)
            and not item.name.startswith("_")
            and not any(ast.unparse(d) == "property" for d in item.decorator_list)
            for item in node.body
        ):
            out.append(node.name)
    return out


def package_modules(mods: dict[str, Module], package: str) -> list[Module]:
    """The modules directly in ``package``, its ``__init__`` first; a subpackage
    is one row (its ``__init__``) unless it has its own table."""
    if package not in mods:
        raise DocgenError(f"MODULE_PACKAGES names {package}, which is not a package: fix it")
    inside = [
        m
        for m in mods.values()
        if m.name.rpartition(".")[0] == package and m.name not in MODULE_PACKAGES
    ]
    return [mods[package], *sorted(inside, key=lambda m: m.name)]


def modules_table() -> list[str]:
    mods = load_modules()
    scripts = {p.stem for p in LUA.glob("*.lua")}
    lines: list[str] = []
    for package in MODULE_PACKAGES:
        if lines:
            lines.append("")
        lines += [
            f"`{package}`:",
            "",
            "| module | holds | classes | runs |",
            "|---|---|---|---|",
        ]
        for mod in package_modules(mods, package):
            classes = ", ".join(f"`{c}`" for c in service_classes(mod)) or "—"
            ran = ", ".join(f"`{s}`" for s in scripts_run(mod, scripts)) or "—"
            lines.append(f"| `{mod.rel}` | {cell(module_summary(mod))} | {classes} | {ran} |")
    return lines


# -- the CLI -------------------------------------------------------------------------


def cli_commands() -> list[tuple[str, Any]]:
    """Every visible command of the ``redcron`` group, depth first in the
    group's (sorted) order: (its full name, its click context)."""
    import click

    sys.path.insert(0, str(PACKAGE.parent))  # the tree's redcron, not an installed one
    from redcron.cli.main import main as group

    out: list[tuple[str, click.Context]] = []

    def walk(cmd: click.Command, ctx: click.Context) -> None:
        # click caches a command's help option the first time it is asked for
        # (Command._help_option), under whatever context asked: a test that ran a
        # command on its own first would leave `--help` without `-h` here
        cmd._help_option = None
        out.append((ctx.command_path, ctx))
        if isinstance(cmd, click.Group):
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                if sub is not None and not sub.hidden:
                    walk(sub, click.Context(sub, info_name=name, parent=ctx))

    # the group's own context settings (help_option_names: -h too), as the real
    # command line gets them: a bare Context leaves them out
    root = click.Context(
        group,
        info_name="redcron",
        terminal_width=CLI_WIDTH,
        max_content_width=CLI_WIDTH,
        **group.context_settings,
    )
    walk(group, root)
    return out


def cli_reference() -> list[str]:
    commands = cli_commands()
    lines = ["Commands:", ""]
    for path, ctx in commands:
        depth = path.count(" ")
        anchor = path.replace(" ", "-")
        short = ctx.command.get_short_help_str(limit=1000)
        lines.append(f"{'  ' * max(0, depth - 1)}- [`{path}`](#{anchor}): {cell(short)}")
    for path, ctx in commands:
        help_text = ctx.command.get_help(ctx).rstrip()
        lines += ["", f"### {path}", "", "```text", help_text, "```"]
    return lines


# -- the doc -------------------------------------------------------------------------

TABLES = {
    "modules": modules_table,
    "scripts": scripts_table,
    "libs": libs_table,
    "records": records_table,
}
CLI_TABLES = {"cli": cli_reference}
#: every doc with generated parts, and its parts
DOCS = {DOC: TABLES, CLI_DOC: CLI_TABLES}


class DocgenError(Exception):
    """The doc or the tree is not as this script expects (says what to fix)."""


def block(doc: str, name: str, path: Path = DOC) -> tuple[int, int]:
    """Where the generated part ``name`` sits in ``doc`` (the text of ``path``):
    (start, end) offsets of the lines between its markers."""
    b = re.search(rf"^<!-- BEGIN generated: {name}\b.*-->\n", doc, re.M)
    e = re.search(rf"^<!-- END generated: {name} -->$", doc, re.M)
    if not b or not e or e.start() < b.end():
        raise DocgenError(f"{path.name} has no BEGIN/END generated: {name} markers")
    return b.end(), e.start()


def render(doc: str, path: Path = DOC) -> str:
    """``doc`` (the text of ``path``) with every generated part rewritten."""
    for name, build in DOCS[path].items():
        start, end = block(doc, name, path)
        doc = doc[:start] + "\n".join(build()) + "\n" + doc[end:]
    return doc


def main(argv: list[str]) -> int:
    stale = 0
    for path in DOCS:
        current = path.read_text()
        try:
            fresh = render(current, path)
        except DocgenError as exc:
            print(f"docgen: {exc}", file=sys.stderr)
            return 2
        if "--check" in argv:
            if fresh != current:
                print(f"{path.relative_to(ROOT)} is stale: run `{COMMAND}`", file=sys.stderr)
                stale = 1
        elif fresh != current:
            path.write_text(fresh)
            print(f"rewrote the generated parts of {path.relative_to(ROOT)}")
    return stale


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
