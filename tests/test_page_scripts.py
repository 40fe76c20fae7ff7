"""The page's own scripts (playground/ui/page/*.js): each parses, each is sent, and what they read is there."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
from conftest import REPO

from playground.ui import page_scripts

PAGE_FILES = sorted(page_scripts.PAGE.glob("*.js"))
NODE = shutil.which("node")


@pytest.mark.skipif(NODE is None, reason="node is not installed (tests/run.sh installs Debian's nodejs)")
@pytest.mark.parametrize("script", PAGE_FILES, ids=[path.name for path in PAGE_FILES])
def test_every_page_script_parses(script: Path):
    result = subprocess.run([NODE, "--check", str(script)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


def test_every_page_script_is_sent_and_only_those():
    """A .js file left out of SCRIPTS would never reach the page, and its js= calls would fail there."""
    assert sorted(page_scripts.SCRIPTS) == [path.name for path in PAGE_FILES]
    head = page_scripts.head()
    assert head.count("<script>") == len(PAGE_FILES) + 1  # the prelude, then each file
    assert head.index("window.playgroundConstants =") < head.index("window.chartDeck =")


def test_the_prelude_holds_every_constant_the_scripts_read():
    """Each script reads its constants by destructuring ``window.playgroundConstants.<group>``: a name missing from
    the prelude would be undefined in the page, not an error."""
    prelude = page_scripts.prelude()
    constants = json.loads(prelude.removeprefix("window.playgroundConstants = ").removesuffix(";"))
    read = 0
    for path in PAGE_FILES:
        for names, group in re.findall(r"const \{([^}]*)\} = window\.playgroundConstants\.(\w+);", path.read_text()):
            for name in (n.strip() for n in names.split(",")):
                assert name in constants[group], f"{path.name} reads {group}.{name}"
                read += 1
    assert read > 40
    assert constants["chartDeck"]["TAP_EVENT"] == "chartdecktap" and constants["why"]["DECK"] == "why"


def test_the_prelude_cannot_end_its_script_element():
    assert "</" not in page_scripts.prelude()


def test_the_page_scripts_are_package_data():
    """An installed package (pip install ., the Docker image) carries the scripts beside page_scripts.py."""
    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    patterns = setuptools["package-data"]["playground.ui"]
    ui = REPO / "playground" / "ui"
    assert {path for pattern in patterns for path in ui.glob(pattern)} == {*PAGE_FILES, page_scripts.PAGE / "app.css"}


def test_the_stylesheet_is_filled_from_the_python_constants():
    """page/app.css names the ids, classes and widths the scripts and tabs share; each is filled from Python."""
    from playground.ui import TAP_PX, attention_tab, chart_deck, launch_options, why_page

    css = page_scripts.stylesheet()
    assert "${" not in css
    assert f"#{attention_tab.STAGE_ELEM_ID}[data-pinned]:not(:has(details[open]))" in css
    assert f'html[{chart_deck.WAITING_ATTR}~="{attention_tab.DECK}"] #{attention_tab.DECK}-chart-0::before' in css
    assert f'content: "{chart_deck.WAITING_NOTE}"' in css and f"ease {chart_deck.WAITING_AFTER_S}s both" in css
    assert f"@media (max-width: {chart_deck.PHONE_WIDTH}px)" in css
    assert f"@media (max-width: {chart_deck.NARROW_WIDTH}px)" in css and css.count(f".{chart_deck.TICKED_CLASS})") == 4
    assert f"#{why_page.PART_NOTE_ELEM_ID}:not(:has(p.{why_page.PART_NOTE_CLASS}" in css
    assert css.count(f"min-height: {TAP_PX}px") == 2
    assert launch_options()["css"] == css
