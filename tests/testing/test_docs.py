"""The docs' redcron examples run: every ```python block of docs/testing.md
and of the migration guides, in order, as one script per page (later blocks
use what earlier ones defined), with no Redis server (the pages use the
testing mode, ``TestApp``).

Blocks that are shown, not run, say so in their info string: ```python celery,
```python rq and ```python arq (the other system's code, in the migration guides), ``text``
(the fakeredis reproductions of docs/testing.md).  A ```python block runs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOCS_DIR = Path(__file__).resolve().parents[2] / "docs"
DOC = DOCS_DIR / "testing.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)
#: every python-ish fence, with its info string's words after the language
FENCE = re.compile(r"^```(?:python|py)\b([^\n]*)\n", re.MULTILINE)
#: the pages whose ```python blocks run, and how many they have at least
RUN = {"testing.md": 6, "migrate-celery.md": 17, "migrate-rq.md": 11}
#: the info-string words of blocks that are shown, not run
SHOWN = {"arq", "celery", "rq"}


def blocks(doc: Path = DOC) -> list[tuple[int, str]]:
    text = doc.read_text(encoding="utf-8")
    return [(text.count("\n", 0, m.start()) + 2, m.group(1)) for m in BLOCK.finditer(text)]


@pytest.mark.parametrize("name", sorted(RUN))
def test_the_page_has_examples(name: str) -> None:
    assert len(blocks(DOCS_DIR / name)) >= RUN[name]


@pytest.mark.parametrize("name", sorted(RUN))
def test_every_python_block_of_the_page_runs(name: str) -> None:
    doc = DOCS_DIR / name
    namespace: dict[str, object] = {"__name__": f"docs_{doc.stem.replace('-', '_')}"}
    for line, source in blocks(doc):
        # padded so a failure's traceback names the line in the page
        code = compile("\n" * (line - 1) + source, str(doc), "exec")
        exec(code, namespace)


@pytest.mark.parametrize("name", sorted(RUN))
def test_a_block_not_run_says_why(name: str) -> None:
    # a ```python3 or ```pycon fence, or an unknown word, would skip a block unseen
    text = (DOCS_DIR / name).read_text(encoding="utf-8")
    odd = [m.group(0).strip() for m in FENCE.finditer(text) if set(m.group(1).split()) - SHOWN]
    odd += [m.group(0) for m in re.finditer(r"^```(?!python\b|py\b)py\w*", text, re.M)]
    assert not odd, f"docs/{name}: fences that neither run nor say what they show: {odd}"


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
