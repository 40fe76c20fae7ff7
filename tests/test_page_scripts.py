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


STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
ARROW = re.compile(r"(?:async )?(?:\([\w\s,.]*\)|\w+) => (?P<body>.+)", re.S)
CALL = re.compile(r"window\.\w+(?:\.\w+)+\((?P<arguments>.*)\)", re.S)
LOGIC = re.compile(r"=>|[?;`()]|&&|\|\||\b(?:if|else|for|while|return|new|function|await)\b")
MOST_CHARACTERS = 160  # the longest js= value, its strings left out: a call with its arguments named


def one_call(js: str) -> bool:
    """Whether ``js`` (a js= or js_on_load value) is one call into a page script's public function, with plain
    arguments (names, numbers, strings, JSON, a page function's name), or hands a value back as it is: no condition,
    loop, nested function or second statement, which belong in playground/ui/page/*.js."""
    code = STRING.sub('""', js.strip())
    if len(code) > MOST_CHARACTERS:
        return False
    arrow = ARROW.fullmatch(code)
    body = (arrow["body"] if arrow else code).strip()
    if body.startswith("{") and body.endswith("}"):
        body = body[1:-1].strip()
    body = body.removesuffix(";").strip()
    if re.fullmatch(r"\w+", body):  # (token) => token, () => null
        return True
    call = CALL.fullmatch(body)
    return bool(call) and not LOGIC.search(call["arguments"])


def test_a_call_is_told_from_logic():
    assert one_call('(raw) => { window.chartDeck.keep("deck", raw); }')
    assert one_call('async (raw, view, ...now) => window.chartDeck.drawEvent({"deck": "a;b"}, raw, view, now)')
    assert one_call("window.whyPage.listen();") and one_call("(token) => token")
    assert one_call("(...values) => window.chartDeck.adoptEvent(\"model\", 3, window.modelPage.spareLabel, values)")
    assert not one_call("(offer, replaced, current) => (offer && current === replaced) ? offer : current")
    assert not one_call("window.attentionPage.listenForRowPicks(); window.attentionPage.listenUnderHeading();")
    assert not one_call("(...values) => { window.chartDeck.waiting(\"a\", true); return values; }")
    assert not one_call("(v) => window.chartDeck.adopt(v.map(x => String(Number(x))).join('|'))")
    assert not one_call("() => window.playgroundPage.whenShown(\"x\").then(() => window.attentionPage.whenOpened())")
    assert not one_call("(c, t, h, key) => [...window.whyPage.headOnScreen(c, t, h), key]")


def test_every_js_value_in_the_app_is_one_call_into_a_page_script(tiny_weights):
    """Page logic lives in page/*.js, where node --check reads it: what the app hands Gradio as ``js=`` (every event)
    or ``js_on_load`` (every HTML block but those left at Gradio's own default) is one call into it, or a value
    handed back as it is."""
    import inspect

    import gradio as gr

    from playground.ui import build_app

    gradios = inspect.signature(gr.HTML.__init__).parameters["js_on_load"].default
    app = build_app(weights=tiny_weights)
    values = [fn.js for fn in app.fns.values() if fn.js]
    values += [block.js_on_load for block in app.blocks.values()
               if getattr(block, "js_on_load", None) not in (None, "", gradios)]
    assert len(values) > 60
    assert [js for js in values if not one_call(js)] == []
