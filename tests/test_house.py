"""The house rules that a reader of the code relies on, checked on the package's own source
(CONTRIBUTING.md "Layout"): the flow goes one way, no module imports itself back, the readers'
top level stays a table of contents, and functions and files stay a size one can read."""

from __future__ import annotations

import ast
import os

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(REPO, "tb_roofline")
MAX_FUNCTION_LINES = 80
MAX_FILE_LINES = 520  # "under ~500": a docstring's worth of slack, never a second module

# What each stage may not import (the flow: readers -> op table -> model -> service -> front
# ends; costs and devices are read by the readers and the model, the executors run units).
FORBIDDEN = {
    "table": ("readers", "costs", "execute", "model", "serve"),
    "devices": ("readers", "costs", "execute", "model", "serve"),
    "costs": ("readers", "execute", "model", "serve"),
    "readers": ("execute", "model", "serve"),
    "execute": ("model", "serve"),
    "model": ("readers", "execute", "serve"),
}


def _modules() -> dict:
    out = {}
    for root, _, files in os.walk(PACKAGE):
        if "protos" in root.split(os.sep) or "static" in root.split(os.sep):
            continue
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(root, name)
                rel = os.path.relpath(path, REPO)[:-3].replace(os.sep, ".")
                out[rel[: -len(".__init__")] if rel.endswith(".__init__") else rel] = path
    return out


MODULES = _modules()


def _imports(path: str, top_only: bool):
    """(imported module, line) of each tb_roofline import; `from pkg import submodule` names
    the submodule, not the package."""
    tree = ast.parse(open(path, encoding="utf-8").read())
    nodes = tree.body if top_only else list(ast.walk(tree))
    for node in nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("tb_roofline"):
                    yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tb_roofline"):
            subs = [f"{node.module}.{a.name}" for a in node.names]
            if all(s in MODULES for s in subs):
                yield from ((s, node.lineno) for s in subs)
            else:
                yield node.module, node.lineno


def test_the_flow_goes_one_way():
    wrong = []
    for name, path in MODULES.items():
        stage = name.split(".")[1] if name.count(".") else ""
        for target, line in _imports(path, top_only=False):
            parts = target.split(".")
            if len(parts) > 1 and parts[1] in FORBIDDEN.get(stage, ()):
                wrong.append(f"{os.path.relpath(path, REPO)}:{line} imports {target}")
    assert not wrong, "\n".join(wrong)


def test_no_module_imports_itself_back():
    graph = {
        name: {t for t, _ in _imports(path, top_only=True) if t in MODULES and t != name}
        for name, path in MODULES.items()
    }
    state: dict = {}
    cycles = []

    def visit(node, stack):
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(" -> ".join(stack[stack.index(nxt) :] + [nxt]))
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [])
    assert not cycles, "\n".join(cycles)


def test_the_readers_top_level_is_a_table_of_contents():
    top = [
        n for n in os.listdir(os.path.join(PACKAGE, "readers")) if n.endswith(".py")
    ]  # formats live in their packages (xspace/, kineto/), costs in costs/, executors in execute/
    assert len(top) <= 10, sorted(top)
    assert {"xspace", "kineto"} <= set(os.listdir(os.path.join(PACKAGE, "readers")))


@pytest.mark.parametrize("name", sorted(MODULES))
def test_functions_and_files_stay_readable(name):
    path = MODULES[name]
    text = open(path, encoding="utf-8").read()
    assert text.count("\n") <= MAX_FILE_LINES, f"{name}: {text.count(chr(10))} lines"
    long = [
        f"{node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for node in ast.walk(ast.parse(text))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    ]
    assert not long, f"{name}: {long}"
