"""Security checks: no unsafe deserialization or eval anywhere in src/, tokens
stored hashed and compared in constant time."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from redcron.dashboard.api import auth
from redcron.store import tokens

SRC = Path(__file__).resolve().parents[2] / "src" / "redcron"
FORBIDDEN = [
    (re.compile(r"\bpickle\b|\bcPickle\b|\bdill\b|\bcloudpickle\b"), "pickle"),
    (re.compile(r"\bmarshal\.loads?\b"), "marshal.loads"),
    (re.compile(r"\bshelve\b"), "shelve"),
    (re.compile(r"(?<![\w.])eval\("), "eval("),
    (re.compile(r"(?<![\w.])exec\("), "exec("),
    (
        re.compile(r"yaml\.(unsafe_)?load\((?![^)]*Loader=StrictLoader)(?![^)]*SafeLoader)"),
        "yaml.load",
    ),
    (re.compile(r"yaml\.load_all\(|yaml\.full_load|yaml\.unsafe_load"), "yaml.load_all"),
]
#: lines that mention a forbidden word to say it is not used
ALLOWED = re.compile(r"[Nn]ever pickle|no pickle|not pickle")


def test_no_unsafe_deserialization_or_eval_in_src() -> None:
    hits = []
    for path in sorted(SRC.rglob("*.py")):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if ALLOWED.search(line):
                continue
            for pattern, what in FORBIDDEN:
                if pattern.search(line):
                    hits.append(f"{path.relative_to(SRC)}:{n}: {what}: {line.strip()}")
    assert not hits, "\n".join(hits)


def test_the_yaml_loader_is_safe() -> None:
    import yaml

    from redcron.model.jobfile import StrictLoader

    assert issubclass(StrictLoader, yaml.SafeLoader)


def test_tokens_are_stored_hashed_and_compared_in_constant_time() -> None:
    source = inspect.getsource(tokens.TokenStore)
    assert '"sha256": digest(token)' in source
    assert "hmac.compare_digest" in inspect.getsource(tokens.TokenStore.verify)
    assert "hmac.compare_digest" in inspect.getsource(auth.identify)  # the admin token
    assert tokens.digest("a.b") == __import__("hashlib").sha256(b"a.b").hexdigest()
