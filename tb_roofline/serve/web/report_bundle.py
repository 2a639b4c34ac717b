"""The frontend inlined for an offline report: every file the tab loads from `ENTRY`
(static/*.js, the vendored Vega builds, the CSS) as text, its relative imports and assets
turned into tokens static/report_host.js resolves into blob: modules.
"""

from __future__ import annotations

import json
import os
import re

from tb_roofline.serve.web.routes import STATIC_DIR

PKG_DIR = os.path.dirname(STATIC_DIR)
ENTRY = "static/app.js"  # exports start(root)
SCHEME = "roofline-report:/"
TOKEN = "__ROOFLINE_MODULE__({})"
# A relative module specifier: `from './x.js'`, `import './x.js'`, `import('./x.js')`.
SPECIFIER = re.compile(r"""(\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)(['"])(\.\.?/[^'"\n]+)\2""")
# An asset next to a module: `new URL('./style.css', import.meta.url)`.
ASSET = re.compile(r"""new URL\(\s*(['"])(\.\.?/[^'"\n]+)\1\s*,\s*import\.meta\.url\s*\)""")
TYPES = {".js": "text/javascript", ".css": "text/css"}


class ReportError(Exception):
    """The report cannot be written as asked (a message for the command line)."""


def frontend_bundle() -> dict:
    """{entry, order, files: {path: [type, text]}}: every file the tab loads from ENTRY, its
    relative imports and assets turned into tokens report_host.js resolves, dependencies
    before the files that use them."""
    files, order = {}, []
    visiting: list = []

    def visit(path):
        if path in files or path in visiting:
            if path in visiting:
                cycle = " -> ".join(visiting[visiting.index(path) :] + [path])
                raise ReportError(f"the frontend's modules import in a cycle: {cycle}")
            return
        ext = os.path.splitext(path)[1]
        if ext not in TYPES:
            raise ReportError(f"the frontend loads {path!r}, which a report cannot inline")
        full = os.path.join(PKG_DIR, *path.split("/"))
        try:
            with open(full, encoding="utf-8") as f:
                text = f.read()
        except OSError as exc:
            raise ReportError(f"the frontend file {path!r} is missing: {exc}") from None
        visiting.append(path)
        if ext == ".js":
            text = _rewrite_module(path, text, visit)
        visiting.pop()
        files[path] = [TYPES[ext], text]
        order.append(path)

    visit(ENTRY)
    return {"entry": ENTRY, "order": order, "files": files}


def _rewrite_module(path: str, text: str, visit) -> str:
    here = os.path.dirname(path)

    def resolve(rel):
        target = os.path.normpath(os.path.join(here, rel)).replace(os.sep, "/")
        if target.startswith(".."):
            raise ReportError(f"{path} refers outside the package: {rel!r}")
        visit(target)
        return TOKEN.format(target)

    text = ASSET.sub(lambda m: f"new URL('{resolve(m.group(2))}')", text)
    text = SPECIFIER.sub(
        lambda m: f"{m.group(1)}{m.group(2)}{resolve(m.group(3))}{m.group(2)}", text
    )
    return text.replace("import.meta.url", json.dumps(SCHEME + path))
