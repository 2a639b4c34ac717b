"""Write the README's settings table from tb_roofline/settings.py (`settings.markdown_table`).

    python3 tools/settings_table.py          # print the table
    python3 tools/settings_table.py --write  # replace the README's table between its markers

tests/test_settings.py checks the README holds what this writes.
"""

from __future__ import annotations

import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from tb_roofline import settings  # noqa: E402

README = os.path.join(REPO, "README.md")
BEGIN = "<!-- settings table: written by tools/settings_table.py from tb_roofline/settings.py -->"
END = "<!-- end of the settings table -->"


def readme_table(text: str) -> str:
    """The table between the README's markers; ValueError when the markers are missing."""
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise ValueError(f"README.md has no settings table markers ({BEGIN!r} ... {END!r})")
    return text[start + len(BEGIN) : end].strip("\n") + "\n"


def write() -> None:
    with open(README, encoding="utf-8") as f:
        text = f.read()
    readme_table(text)  # the markers are there
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    text = text[:start] + "\n" + settings.markdown_table() + text[end:]
    with open(README, "w", encoding="utf-8") as f:
        f.write(text)


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        write()
    else:
        sys.stdout.write(settings.markdown_table())
