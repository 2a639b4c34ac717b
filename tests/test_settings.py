"""Every TB_ROOFLINE_* environment variable by one rule (tb_roofline/settings.py)."""

from __future__ import annotations

import logging
import os
import re

import pytest

from tb_roofline import settings

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize("setting", settings.NUMBERS, ids=lambda s: s.name)
@pytest.mark.parametrize("bad", ["lots", "-1", "inf", "nan", "1e999", "0x10", "--2"])
def test_a_bad_value_gives_a_clear_message_and_the_default(setting, bad, caplog):
    value, complaint = settings.parse(setting, bad)
    assert value == setting.default
    assert setting.name in complaint and repr(bad) in complaint and "default" in complaint
    with caplog.at_level(logging.WARNING, logger="tb_roofline.settings"):
        assert settings.number(setting, {setting.name: bad}) == setting.default
        assert settings.number(setting, {setting.name: bad}) == setting.default
    assert sum(setting.name in r.getMessage() for r in caplog.records) <= 1  # logged once


def test_good_values_minimums_and_integers():
    assert settings.parse(settings.MEMORY_CACHE_MB, " 0 ") == (0.0, None)  # 0: no caching
    assert settings.parse(settings.MAX_FILE_MB, "0")[1]  # 0 is not a file size limit
    assert settings.parse(settings.MAX_FILE_MB, "0.5") == (0.5, None)
    assert settings.parse(settings.WORKERS, "4") == (4, None)
    assert settings.parse(settings.WORKERS, "2.5")[1] and settings.parse(settings.WORKERS, "0")[1]
    assert settings.parse(settings.MAX_EVENTS, "1e6") == (1_000_000, None)
    assert settings.parse(settings.REMOTE_RESCAN_S, "") == (15.0, None)
    assert settings.mb(settings.CACHE_MAX_MB, {"TB_ROOFLINE_CACHE_MAX_MB": "0.5"}) == 1 << 19


def test_the_service_reads_no_environment_variable_itself():
    """Outside settings.py, TB_ROOFLINE_* variables are read through it, readers included; the
    readers' file checks, the pool and the Kineto event limit read no environment at all."""
    pattern = re.compile(r"environ(\.get)?\s*[\[(]\s*[\"']TB_ROOFLINE_")
    offenders = []
    for root, _, files in os.walk(os.path.join(REPO, "tb_roofline")):
        for name in files:
            path = os.path.join(root, name)
            if name.endswith(".py") and name != "settings.py":
                if pattern.search(open(path, encoding="utf-8").read()):
                    offenders.append(os.path.relpath(path, REPO))
    assert not offenders
    for rel in (
        ("readers", "files.py"),
        ("readers", "kineto", "stream.py"),
        ("execute", "pool.py"),
    ):
        assert (
            "environ" not in open(os.path.join(REPO, "tb_roofline", *rel), encoding="utf-8").read()
        )


def _tool():
    import importlib.util

    path = os.path.join(REPO, "tools", "settings_table.py")
    spec = importlib.util.spec_from_file_location("settings_table", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_table_is_the_generated_one():
    """README.md's settings table is what settings.py renders (python3 tools/settings_table.py
    --write rewrites it)."""
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    assert _tool().readme_table(readme) == settings.markdown_table()


def test_every_setting_has_one_row():
    source = open(settings.__file__, encoding="utf-8").read()
    named = set(re.findall(r'"(TB_ROOFLINE_[A-Z0-9_]+)"', source))
    rows = [r[0] if isinstance(r[0], str) else r[0].name for r in settings.ROWS]
    assert sorted(rows) == sorted(named)  # each once, none missing
    assert {s.name for s in settings.NUMBERS} <= set(rows)
    table = settings.markdown_table()
    for name in named:
        assert table.count(f"| `{name}` |") == 1, name


def test_the_table_shows_each_numbers_default_and_minimum(monkeypatch):
    table = settings.markdown_table()
    assert "| `TB_ROOFLINE_MAX_EVENTS` | 5,000,000 | 1 |" in table
    assert "| `TB_ROOFLINE_MEMORY_BUDGET_MB` | 8192 | > 0 |" in table
    changed = settings.MAX_FILE_MB._replace(default=1024)
    rows = tuple((changed, *r[1:]) if r[0] is settings.MAX_FILE_MB else r for r in settings.ROWS)
    monkeypatch.setattr(settings, "ROWS", rows)
    assert "| `TB_ROOFLINE_MAX_FILE_MB` | 1024 | > 0 |" in settings.markdown_table()
