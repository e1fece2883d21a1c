"""The README stays short and true, and every page of docs/ is one click from it with no broken link.

Links and anchors are resolved the way GitHub renders Markdown: a relative link is relative to the
page that holds it, and ``#anchor`` names a heading by its slug (lower case, punctuation dropped,
spaces to ``-``, ``-1``, ``-2``... for repeats) or an HTML ``id``/``name``.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, check_documented_example

README = ROOT / "README.md"
DOCS = ROOT / "docs"
#: "A README a person reads to the end": at most about 15 KB.
README_MAX_BYTES = 15 * 1024
#: The two set-up commands of the first screen (GUIDE: run the demo, run the tests).
DEMO_COMMAND = "python3 -m venv .venv && .venv/bin/pip install -e '.[report]' && .venv/bin/sglang-exporter --demo"
TEST_COMMAND = "python3 -m venv .venv && .venv/bin/pip install -e '.[test]' && .venv/bin/python -m pytest"
FIRST_SCREEN_LINES = 30

_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_CODE_SPAN = re.compile(r"`+[^`]*`+")
_MD_LINK = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_HTML_LINK = re.compile(r"""\b(?:href|src)\s*=\s*["']([^"']+)["']""")
_HTML_ID = re.compile(r"""<a\s[^>]*\b(?:id|name)\s*=\s*["']([^"']+)["']""")


def pages() -> list[Path]:
    """README.md and every Markdown page of docs/."""
    return [README] + sorted(DOCS.glob("*.md"))


def prose_lines(path: Path) -> list[tuple[int, str]]:
    """``(line number, text)`` of the lines outside fenced code blocks."""
    out, fenced = [], False
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            out.append((n, line))
    return out


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading keeps its text
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every ``#anchor`` a link may use to point into ``path``."""
    seen: dict[str, int] = {}
    out = set()
    for _, line in prose_lines(path):
        m = _HEADING.match(line)
        if m:
            base = slug(m.group(2))
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
        out.update(_HTML_ID.findall(line))
    return out


def links(path: Path) -> list[tuple[int, str]]:
    """``(line number, target)`` of every Markdown and HTML link or image outside code."""
    out = []
    for n, line in prose_lines(path):
        line = _CODE_SPAN.sub("", line)
        out += [(n, t) for t in _MD_LINK.findall(line) + _HTML_LINK.findall(line)]
    return out


def is_external(target: str) -> bool:
    return bool(re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target)) or target.startswith("//")


def resolve(page: Path, target: str) -> tuple[Path, str]:
    """The file a relative link names (``page`` itself for ``#anchor``) and its anchor ("" if none)."""
    path, _, anchor = target.partition("#")
    path = path.split("?", 1)[0]
    return ((page.parent / path).resolve() if path else page), anchor


def test_readme_is_short():
    size = len(README.read_bytes())
    assert size <= README_MAX_BYTES, f"README.md is {size} bytes; move reference material to docs/"


def test_every_docs_page_is_one_click_from_the_readme():
    linked = {resolve(README, t)[0] for _, t in links(README) if not is_external(t)}
    missing = [p.name for p in sorted(DOCS.glob("*.md")) if p.resolve() not in linked]
    assert missing == [], f"docs pages not linked from README.md: {missing}"


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_and_anchors_resolve(page: Path):
    broken = []
    for n, target in links(page):
        if is_external(target):
            continue
        path, anchor = resolve(page, target)
        where = f"{page.relative_to(ROOT)}:{n}: {target}"
        if ROOT.resolve() not in path.parents and path != ROOT.resolve():
            broken.append(f"{where} (outside the repository: a user's clone has nothing beside it)")
        elif not path.exists():
            broken.append(f"{where} (no such file)")
        elif anchor and path.suffix == ".md" and anchor not in anchors(path):
            broken.append(f"{where} (no heading with that anchor)")
    assert broken == []


def test_docs_do_not_point_outside_the_repository():
    # A user's clone has no ../shared beside it: the docs must carry what they cite.
    offenders = [f"{p.relative_to(ROOT)}:{n}" for p in pages() for n, line in prose_lines(p)
                 if "../shared" in line or "shared/notes" in line or "shared/corpus" in line]
    assert offenders == []


def test_references_to_docs_from_code_and_rules_resolve():
    """``docs/<page>.md#anchor`` written in code, rules, dashboards or tests names a real heading."""
    ref = re.compile(r"\bdocs/([A-Za-z0-9_-]+\.md)(?:#([A-Za-z0-9_-]+))?")
    broken = []
    for folder in ("exporter", "deploy", "grafana", "tests", "scripts", "bench"):
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix not in (".py", ".yml", ".yaml", ".json", ".md", ".toml") or "corpus" in path.parts:
                continue
            for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
                for name, anchor in ref.findall(line):
                    target = DOCS / name
                    if not target.exists() or (anchor and anchor not in anchors(target)):
                        broken.append(f"{path.relative_to(ROOT)}:{n}: docs/{name}{'#' + anchor if anchor else ''}")
    assert broken == []


def test_first_screen_has_the_two_set_up_commands():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert DEMO_COMMAND in lines[:FIRST_SCREEN_LINES], "the demo command is not on the README's first screen"
    assert TEST_COMMAND in lines[:FIRST_SCREEN_LINES], "the test command is not on the README's first screen"
    assert lines.index(DEMO_COMMAND) < lines.index(TEST_COMMAND)


def test_ci_finds_the_test_command_after_its_marker():
    text = README.read_text(encoding="utf-8")
    assert text.count("<!-- test-command") == 1
    after = text[text.index("<!-- test-command"):].splitlines()
    assert after[1] == "```sh" and after[2] == TEST_COMMAND
    # .ci/run's own extraction, run as CI runs it, finds the same line.
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    m = re.search(r"test_command=\$\((awk .*? README\.md)\)", ci)
    assert m, ".ci/run no longer extracts the test command the way this test expects"
    got = subprocess.run(["bash", "-c", m.group(1)], cwd=ROOT, capture_output=True, text=True, check=True)
    assert got.stdout.strip() == TEST_COMMAND


def test_report_example_is_what_the_command_prints():
    """docs/report.md shows real output: rerun the command named by its marker and compare."""
    check_documented_example(DOCS / "report.md", "report-example")


def test_slug_follows_github():
    assert slug("6. The checklist") == "6-the-checklist"
    assert slug("The 5% rule") == "the-5-rule"
    assert slug("/healthz") == "healthz"
    assert slug("Why nvidia-ml-py and not pynvml") == "why-nvidia-ml-py-and-not-pynvml"
    assert slug("`sglang_scheduler_batch_size`") == "sglang_scheduler_batch_size"


def test_link_checker_sees_a_broken_link(tmp_path: Path):
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n[ok](#title) [bad](#nope) [gone](missing.md)\n\n```\n[code](x.md)\n```\n",
                    encoding="utf-8")
    found = links(page)
    assert [t for _, t in found] == ["#title", "#nope", "missing.md"]
    assert anchors(page) == {"title"}
    assert not resolve(page, "missing.md")[0].exists()


def test_readme_one_shot_example_is_real_output():
    """Every series line the README shows for corpus log 008 is in the real --one-shot output."""
    text = README.read_text(encoding="utf-8")
    m = re.search(r"<!-- one-shot-example: sglang-exporter (.*?) -->\n```text\n(.*?)\n```\n", text, re.S)
    assert m, "README.md lost its one-shot-example marker or the text block after it"
    out = subprocess.run([sys.executable, "-m", "exporter", *m.group(1).split()], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    shown = m.group(2).splitlines()
    assert shown, "the example is empty"
    assert [line for line in shown if line not in out.stdout.splitlines()] == []
