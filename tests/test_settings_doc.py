"""The settings table of docs/configuration.md is generated from the settings' definitions (as --help
is), so the reference cannot drift from the command. ``UPDATE_GOLDEN=1`` rewrites a stale table."""

from __future__ import annotations

import os
import re

from conftest import ROOT

from exporter.flags import settings_table
from exporter.settings import SETTINGS

DOC = ROOT / "docs" / "configuration.md"
START = "<!-- settings-table"
END = "<!-- /settings-table -->"


def test_settings_table_is_generated_from_the_settings():
    text = DOC.read_text(encoding="utf-8")
    head, rest = text.split(START, 1)
    marker, rest = rest.split("\n", 1)
    body, tail = rest.split(END, 1)
    expected = settings_table(SETTINGS)
    if body != expected and os.environ.get("UPDATE_GOLDEN"):
        DOC.write_text(head + START + marker + "\n" + expected + END + tail, encoding="utf-8")
        body = expected
    assert body == expected, ("docs/configuration.md's settings table is stale; regenerate it with "
                              "UPDATE_GOLDEN=1 python -m pytest tests/test_settings_doc.py")


def test_the_table_names_every_flag_variable_and_placeholder():
    rows = [line for line in settings_table(SETTINGS).splitlines()[2:]]
    assert len(rows) == len(SETTINGS)
    for s, row in zip(SETTINGS, rows, strict=True):
        assert row.startswith(f"| `{s.synopsis}` | `{s.env}` | `{s.default}` | ")
        # A placeholder reads as a value: upper-case words, the choices, or [=BOOL]; never a type name.
        assert re.fullmatch(r"\[=BOOL\]|\{[a-z,]+\}|[A-Z_:=]+(,\.\.\.)?", s.metavar), s.metavar
