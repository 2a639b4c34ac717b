"""The test set-up is reproducible: tools/test.sh installs the test extras under
tools/test-constraints.txt, which pins every tool the test and dev extras name (and everything
they bring) to one exact version inside the range setup.py asks for. A new release of pytest or
a linter then reaches CI only through a commit that refreshes the file."""

from __future__ import annotations

import ast
import os
import re

from packaging.requirements import Requirement

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _read(*parts: str) -> str:
    with open(os.path.join(REPO, *parts), encoding="utf-8") as f:
        return f.read()


def _extras() -> dict:
    """setup.py's extras_require, read as data (the file is not run)."""
    tree = ast.parse(_read("setup.py"))
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "extras_require":
            return ast.literal_eval(node.value)
    raise AssertionError("setup.py has no extras_require")


def _pins() -> dict:
    pins = {}
    for line in _read("tools", "test-constraints.txt").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, version = line.partition("==")
        assert sep and version and not re.search(r"[<>~!,; ]", version), line
        pins[_canonical(name)] = version
    return pins


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_every_test_and_dev_tool_is_pinned_inside_its_range():
    pins = _pins()
    for extra in ("test", "dev"):
        for text in _extras()[extra]:
            req = Requirement(text)
            name = _canonical(req.name)
            assert name in pins, f"{extra} extra: {req.name} is not pinned"
            assert req.specifier.contains(pins[name], prereleases=True), (
                f"{req.name}=={pins[name]} is outside setup.py's {req.specifier}"
            )


def test_the_runtime_dependencies_stay_ranges_and_are_locked_for_ci():
    tree = ast.parse(_read("setup.py"))
    (install,) = [
        ast.literal_eval(n.value)
        for n in ast.walk(tree)
        if isinstance(n, ast.keyword) and n.arg == "install_requires"
    ]
    pins = _pins()
    for text in install:
        req = Requirement(text)
        assert not any(s.operator == "==" for s in req.specifier), text  # users get ranges
        assert req.specifier.contains(pins[_canonical(req.name)]), text  # CI gets one version


def test_tools_test_sh_installs_under_the_constraints():
    script = _read("tools", "test.sh")
    installs = [line for line in script.splitlines() if "pip install" in line]
    assert installs and all("-c tools/test-constraints.txt" in line for line in installs)
    assert "bash tools/test.sh" in _read(".ci", "run")


def test_no_tracked_file_holds_merge_conflict_markers():
    import subprocess

    files = subprocess.run(
        ["git", "ls-files", "*.py", "*.md", "*.js", "*.css", "*.html", "*.toml", "*.sh", "*.yaml"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    marked = []
    for name in files:
        with open(os.path.join(REPO, name), encoding="utf-8", errors="replace") as f:
            if re.search(r"^(<<<<<<<|>>>>>>>) ", f.read(), re.M):
                marked.append(name)
    assert not marked, marked
