"""docs/testing.md's examples run: every ```python block, in order, as one
script (later blocks use what earlier ones defined), with no Redis server.
``text`` blocks (the fakeredis reproductions) are not run here."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "testing.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


def blocks() -> list[tuple[int, str]]:
    text = DOC.read_text(encoding="utf-8")
    return [(text.count("\n", 0, m.start()) + 2, m.group(1)) for m in BLOCK.finditer(text)]


def test_the_page_has_examples() -> None:
    assert len(blocks()) >= 6


def test_every_python_block_of_docs_testing_md_runs() -> None:
    namespace: dict[str, object] = {"__name__": "docs_testing"}
    for line, source in blocks():
        # padded so a failure's traceback names the line in docs/testing.md
        code = compile("\n" * (line - 1) + source, str(DOC), "exec")
        exec(code, namespace)


def test_the_pinned_range_is_the_one_the_page_names() -> None:
    pyproject = (DOC.parents[1] / "pyproject.toml").read_text(encoding="utf-8")
    pin = re.search(r'testing = \["(fakeredis\[lua\][^"]+)"\]', pyproject)
    assert pin is not None
    assert f"`{pin.group(1)}`" in DOC.read_text(encoding="utf-8")


def test_the_readme_example_runs() -> None:
    readme = (DOC.parents[1] / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Testing your tasks", 1)[1].split("\n## ", 1)[0]
    (source,) = BLOCK.findall(section)
    exec(compile(source, "README.md (Testing your tasks)", "exec"), {"__name__": "readme"})
