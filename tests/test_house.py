"""The house rules that a reader of the code relies on, checked on the package's own source
(CONTRIBUTING.md "Layout"): the import contracts of pyproject.toml hold (`lint-imports`: the
flow goes one way, front ends and execution know no file format, each reader on its own), no
module imports itself back, even from inside a function, and the readers' top level stays a
table of contents. Function and file sizes are kept by review, not by a test per module."""

from __future__ import annotations

import os
import subprocess
import sys

import grimp

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(REPO, "tb_roofline")
# The package's `load` imports the notebook front end when called (pyproject.toml says the same
# to the import contracts): the one import that may point back up.
LAZY_ENTRY = ("tb_roofline", "tb_roofline.serve.notebook")


def test_the_import_contracts_hold():
    """pyproject.toml's [tool.importlinter] contracts, on this checkout's source."""
    env = dict(os.environ, PYTHONPATH=REPO)
    script = "import sys; from importlinter.cli import lint_imports_command as c; sys.exit(c())"
    done = subprocess.run(
        [sys.executable, "-c", script, "--no-cache"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout


def _cycles(graph: grimp.ImportGraph) -> list[str]:
    """One chain per import a -> b that b leads back from."""
    out = []
    for a in sorted(graph.modules):
        for b in sorted(graph.find_modules_directly_imported_by(a)):
            back = graph.find_shortest_chain(importer=b, imported=a)
            if back:
                out.append(" -> ".join((a, *back)))
    return out


def test_no_module_imports_itself_back():
    """Every import counts, those inside functions too (a cycle that only a lazy import hides
    still ties two modules together)."""
    graph = grimp.build_graph("tb_roofline", cache_dir=None)
    graph.remove_import(importer=LAZY_ENTRY[0], imported=LAZY_ENTRY[1])
    assert _cycles(graph) == []


def test_a_cycle_is_found():
    graph = grimp.build_graph("tb_roofline", cache_dir=None)
    graph.add_import(importer="tb_roofline.storage_errors", imported="tb_roofline.storage")
    assert any("tb_roofline.storage_errors" in c for c in _cycles(graph))


def test_the_readers_top_level_is_a_table_of_contents():
    top = [
        n for n in os.listdir(os.path.join(PACKAGE, "readers")) if n.endswith(".py")
    ]  # formats live in their packages (xspace/, kineto/), costs in costs/, executors in execute/
    assert len(top) <= 10, sorted(top)
    assert {"xspace", "kineto"} <= set(os.listdir(os.path.join(PACKAGE, "readers")))
