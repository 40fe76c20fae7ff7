"""The README is a front page and docs/ holds the rest: its length, and every relative link in either resolving to
a file (and a heading, where the link names one); the Python page's snippets run as written."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted((ROOT / "docs").glob("*.md"))
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _body(path: Path) -> str:
    """The file's text without YAML front matter (the README's Space configuration)."""
    text = path.read_text(encoding="utf-8")
    if text.startswith("---\n"):
        text = text[text.index("\n---\n", 4) + 5:]
    return text


def _anchors(path: Path) -> set[str]:
    """GitHub's anchors for the file's headings: lower case, punctuation dropped, spaces as hyphens."""
    headings = re.findall(r"^#+\s+(.*)$", _body(path), flags=re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-") for heading in headings}


def test_the_readme_is_a_front_page():
    words = len(_body(ROOT / "README.md").split())
    assert words <= 1500, f"README.md has {words} words; move details into docs/"
    for name in ("tabs", "command-line", "space-and-docker", "models", "benchmarks", "python"):
        assert (ROOT / "docs" / f"{name}.md").is_file(), name


@pytest.mark.parametrize("path", [ROOT / "README.md", *DOCS], ids=lambda p: p.name)
def test_every_relative_link_resolves(path):
    for target in LINK.findall(_body(path)):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:
        file_part, _, anchor = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        assert linked.exists(), f"{path.name} links to {target}, which does not exist"
        if anchor and linked.suffix == ".md":
            assert anchor in _anchors(linked), f"{path.name} links to {target}: no such heading"


def test_the_python_pages_snippets_run_as_written(tmp_path):
    """docs/python.md's code blocks, in order, in one fresh interpreter started in an empty folder, offline."""
    blocks = re.findall(r"^```python\n(.*?)^```$", _body(ROOT / "docs" / "python.md"), flags=re.MULTILINE | re.DOTALL)
    assert len(blocks) >= 4
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    result = subprocess.run([sys.executable, "-c", "\n".join(blocks)], cwd=tmp_path, capture_output=True, text=True,
                            timeout=600, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Attention Playground checkpoint shakespeare-char" in result.stdout
    assert (tmp_path / "exported" / "shakespeare-char" / "generation_config.json").is_file()
    assert "<script" in (tmp_path / "head_view.html").read_text(encoding="utf-8")  # BertViz's page


def test_the_layout_names_every_module_in_its_folder():
    """docs/development.md's layout names every module of the package under its folder's entry (a moved or new
    module shows here first)."""
    text = (ROOT / "docs" / "development.md").read_text(encoding="utf-8")
    layout = text[text.index("## Layout"):]
    layout = layout[layout.index("```") + 3:]
    layout = layout[:layout.index("```")]
    entries, current = {}, None
    for line in layout.splitlines():
        match = re.match(r"^  (\S+)", line)
        if match:
            current = match.group(1).rstrip("/") if match.group(1).endswith("/") else ""
        if current is not None:
            entries.setdefault(current, []).append(line)
    package = ROOT / "playground"
    missing = []
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package)
        if path.name == "__init__.py" and relative.parent != Path("."):
            continue
        folder = relative.parts[0] if len(relative.parts) > 1 else ""
        if path.name not in " ".join(entries.get(folder, [])) and path.name != "__init__.py":
            missing.append(str(relative))
    assert not missing, f"docs/development.md's layout does not name: {missing}"
