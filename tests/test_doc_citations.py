"""Every file the docs, the package's and the tests' docstrings and comments and the .proto
files' comments cite exists: a path under one of the repository's folders (`docs/guidance.md`,
`tests/serve/cli/test_cli.py::test_...`), a path in the package written from its folders
(`serve/web/routes.py`, `model/guidance/findings.py`), a module's name
(`table/timeline.paired_spans`: the module and that name in it) or a test file's bare name."""

from __future__ import annotations

import ast
import os
import re

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(REPO, "tb_roofline")
TOP = ("docs", "tb_roofline", "tests", "tools", "bench", "testdata", "protos", "skills", ".ci")
PACKAGE_DIRS = tuple(
    d
    for d in sorted(os.listdir(PACKAGE))
    if os.path.isdir(os.path.join(PACKAGE, d)) and not d.startswith("__")
)
CITED = re.compile(
    r"(?<![\w./-])((?:%s)/[\w./-]*\w)" % "|".join(map(re.escape, TOP + PACKAGE_DIRS))
)
TEST_FILE = re.compile(r"(?<![\w/])(test_\w+\.py)")
# A pattern, not a file: `testdata/**/*.xplane.pb`, `readers/{xspace,kineto}`, `<run>/...`.
PATTERN_CHARS = "*{<"


def _docstrings_and_comments(path: str):
    source = open(path, encoding="utf-8").read()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                yield doc
    for line in source.splitlines():
        if "#" in line:
            yield line[line.index("#") :]


def _texts():
    """(file, text) of every docstring and comment of the package and the tests, of every
    .proto file's comments and of every doc."""
    for top in (PACKAGE, os.path.join(REPO, "tests")):
        for root, dirs, files in os.walk(top):
            dirs[:] = [d for d in dirs if d not in ("vendor", "__pycache__")]
            for name in files:
                path = os.path.join(root, name)
                if name.endswith(".py") and not name.endswith("_pb2.py"):
                    for text in _docstrings_and_comments(path):
                        yield os.path.relpath(path, REPO), text
                elif name.endswith(".proto"):
                    for line in open(path, encoding="utf-8").read().splitlines():
                        if "//" in line:
                            yield os.path.relpath(path, REPO), line[line.index("//") :]
    docs = [os.path.join(REPO, "docs", f) for f in os.listdir(os.path.join(REPO, "docs"))]
    for path in docs + [os.path.join(REPO, f) for f in ("README.md", "CONTRIBUTING.md")]:
        if path.endswith(".md"):
            yield os.path.relpath(path, REPO), open(path, encoding="utf-8").read()


def _defines(module: str, name: str) -> bool:
    source = open(module, encoding="utf-8").read()
    return bool(re.search(rf"^\s*(?:def|class)\s+{name}\b|^{name}\s*[:=]", source, re.M))


def _exists(cited: str) -> bool:
    path = cited.rstrip(".").split("::")[0]
    if any(c in path for c in PATTERN_CHARS):
        return True
    for full in (os.path.join(REPO, path), os.path.join(PACKAGE, path)):
        if os.path.exists(full):
            return True
        module, _, name = full.rpartition(".")
        if name.isidentifier() and os.path.isfile(module + ".py"):
            return _defines(module + ".py", name)
    return False


def test_every_cited_file_exists():
    tests = {name for _, _, names in os.walk(os.path.join(REPO, "tests")) for name in names}
    missing: dict = {}
    for where, text in _texts():
        for cited in CITED.findall(text):
            if not _exists(cited):
                missing.setdefault(cited, set()).add(where)
        for name in TEST_FILE.findall(text):
            if name not in tests:
                missing.setdefault(name, set()).add(where)
    assert not missing, {k: sorted(v) for k, v in missing.items()}


def test_the_check_finds_a_stale_citation():
    assert _exists("docs/guidance.md") and _exists("serve/web/routes.py")
    assert _exists("table/timeline.paired_spans") and _exists("tests/serve/cli/test_cli.py::test_x")
    assert not _exists("model/timeline.paired_spans")  # the module moved to table/
    assert not _exists("table/timeline.no_such_name")
    assert not _exists("docs/no_such_doc.md")
    assert CITED.findall("see `serve/web/routes.py`, docs/guidance.md.") == [
        "serve/web/routes.py",
        "docs/guidance.md",
    ]
