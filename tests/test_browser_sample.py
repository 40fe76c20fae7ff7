"""The Sample tab in Chromium, on a desktop and on a phone: the text grows as it is generated, every control,
inspecting a character by clicking or tapping it, refusals, and the screenshots."""

from __future__ import annotations

import re

import pytest
from browser_support import (
    ERROR_BADGE,
    ERROR_TOAST,
    WAIT_MS,
    cut_labels,
    expect_errors,
    expect_no_error,
    open_tab,
    plot_titled,
    screenshot,
)
from conftest import local_client
from playwright.sync_api import Locator, Page, expect

from playground.config import Limits
from playground.ui import sample_tab
from playground.ui.common import AppContext

pytestmark = pytest.mark.browser

GENERATE_MS = 90_000  # a generation on a busy 2-core machine (the server stops one at 60 s)
PROMPT = "JULIET:\n"
MODEL_TEXT_LABEL = "Text (the checkpoint reads it; the textbook inputs are fixed)"  # the Model tab's text box


def open_sample(page: Page, touch: bool) -> Locator:
    """The Sample tab, opened by a tap on a phone (the tab bar wraps there, so its name is in view), once the chart
    library is in the page: loading it takes the page's main thread for a second or so after the first paint, and a
    stream generated meanwhile painted two updates in 1.7 s (the streaming checks count the updates painted)."""
    page.wait_for_function("() => window.Plotly", timeout=WAIT_MS)
    if not touch:
        return open_tab(page, "Sample")
    tab = page.get_by_role("tab", name="Sample", exact=True)
    expect(tab).to_be_visible(timeout=WAIT_MS)
    tab.tap()
    expect(tab).to_have_attribute("aria-selected", "true")
    panel = page.locator('[role="tabpanel"]:visible')
    expect(panel.get_by_role("button", name="Generate", exact=True)).to_be_visible()
    return panel


def press(locator: Locator, touch: bool) -> None:
    locator.tap() if touch else locator.click()


def set_checked(locator: Locator, checked: bool, touch: bool) -> None:
    if locator.is_checked() != checked:
        press(locator, touch)
    expect(locator).to_be_checked(checked=checked)


def set_number(panel: Locator, label: str, value) -> None:
    """A number box, or the number box beside a slider ("number input for temperature")."""
    box = panel.get_by_label(label, exact=True)
    box.fill(str(value))
    box.press("Tab")
    expect(box).to_have_value(str(value))


def start_recording(textbox: Locator) -> None:
    """Remember every value the text box shows, polled every 5 ms, until stop_recording, and the longest the page's
    main thread went without running the poll (a page held up that long could paint nothing between)."""
    textbox.evaluate("""(box) => {
        window.seenTexts = [box.value];
        window.seenLast = performance.now();
        window.seenLongestGap = 0;
        window.seenTimer = setInterval(() => {
            const now = performance.now();
            window.seenLongestGap = Math.max(window.seenLongestGap, now - window.seenLast);
            window.seenLast = now;
            if (window.seenTexts[window.seenTexts.length - 1] !== box.value) window.seenTexts.push(box.value);
        }, 5);
    }""")


def stop_recording(page: Page) -> tuple[list[str], float]:
    """(the values seen, the longest gap between two polls in seconds)."""
    seen, gap = page.evaluate("() => { clearInterval(window.seenTimer); "
                              "return [window.seenTexts, window.seenLongestGap]; }")
    return seen, gap / 1000


STREAM_VISIBLE_S = 0.4  # five of the page's 80 ms paint windows: long enough to see two updates on the way


def generate_and_watch(page: Page, panel: Locator, prompt: str, new_tokens: int, touch: bool, cache: bool,
                       growing_at_least: int = 2) -> str:
    """Generate; returns the final text after checking it grew through ``growing_at_least`` values on the way
    (a short text may be done before the first update: the page shows at most one every 80 ms).

    Each call changes the length or the KV cache from the call before, so the stats tell this run's end apart
    from the last run's (Gradio may not paint the first update, the bare prompt, before the next one lands).
    """
    textbox = panel.get_by_label("Text", exact=True)
    start_recording(textbox)
    press(panel.get_by_role("button", name="Generate", exact=True), touch)
    mode = "with" if cache else "without"
    expect(panel).to_contain_text(re.compile(rf"characters/s {mode} the KV cache.*\b{new_tokens} characters in"),
                                  timeout=GENERATE_MS)
    final = textbox.input_value()
    seen, longest_gap = stop_recording(page)
    assert final.startswith(prompt) and len(final) == len(prompt) + new_tokens
    growing = [text for text in seen if len(prompt) < len(text) < len(final)]
    # the page paints at most one update every 80 ms: a run the server finished in under STREAM_VISIBLE_S can show
    # none on the way (a fresh-clone CI saw [0, 408] once; the same test passed in the run before and alone)
    took = re.search(rf"\b{new_tokens} characters in ([\d,.]+) (ms|s)\b", panel.inner_text())
    seconds = float(took.group(1).replace(",", "")) / (1000 if took.group(2) == "ms" else 1)
    # nor can a page whose main thread was held up for half the run (a fresh clone on two workers saw [0, 8, 408]
    # over 0.82 s: the updates queued behind other work and were applied in one go)
    wanted = growing_at_least if seconds >= STREAM_VISIBLE_S and longest_gap < seconds / 2 else 0
    assert len(growing) >= wanted, (f"the text appeared in {len(seen)} steps: {[len(t) for t in seen]} "
                                    f"over {seconds:.2f} s (the page's longest pause {longest_gap:.2f} s)")
    assert all(final.startswith(text) for text in growing)
    return final


def inspect_by_pointing(panel: Locator, position: int, touch: bool) -> None:
    """Click or tap the character at ``position`` in the coloured text: the inspector opens on it."""
    character = panel.locator(f'.sample-coloured [data-position="{position}"]')
    character.scroll_into_view_if_needed()
    press(character, touch)
    expect(character).to_have_class(re.compile(r"\bpicked\b"))
    expect(panel.get_by_label("position (0 = first generated character)", exact=True)).to_have_value(
        str(position), timeout=WAIT_MS)
    expect(plot_titled(panel, f"Top-10 candidates at #{position}")).to_be_visible(timeout=WAIT_MS)
    expect(plot_titled(panel, f"What drawing #{position} attended to")).to_be_visible()
    expect(panel).to_contain_text(f"Character #{position} (")


DRAWN_JS = """() => [0, 1].map(slot => {
    const chart = document.querySelector('#sample-chart-' + slot + ' .js-plotly-plot');
    const trace = chart.data[0], layout = chart.layout;
    return {y: [...trace.y], labels: [...trace.customdata], title: layout.title.text,
            ticks: [...layout.xaxis.ticktext]};
})"""


def drawn_inspection(panel: Locator) -> tuple[list[dict], str]:
    """The inspector's two charts as the page drew them (values, bar labels, title, tick labels), and the note it
    wrote under them (as Markdown)."""
    return panel.page.evaluate(DRAWN_JS), panel.page.evaluate(
        "() => { const deck = window.chartDeck.decks.sample; return deck.views[deck.shown].texts[0]; }")


def servers_inspection(figures) -> list[dict]:
    """inspect_position's two figures in the form drawn_inspection reads."""
    return [{"y": list(f.data[0].y), "labels": list(f.data[0].customdata), "title": f.layout.title.text,
             "ticks": list(f.layout.xaxis.ticktext)} for f in figures[:2]]


def test_sample_on_a_desktop_every_control_streams_and_inspects_by_click(page, server):
    panel = open_sample(page, touch=False)
    checkpoint = panel.get_by_role("combobox", name="Checkpoint")
    checkpoint.fill("shakespeare-char")
    checkpoint.press("Enter")
    expect(panel).to_contain_text("shakespeare-char · 1,820,736 parameters", timeout=WAIT_MS)

    panel.get_by_label("Prompt", exact=True).fill(PROMPT)
    settings = {"max new tokens": 400, "number input for temperature": 0.9, "top-k (0 = off)": 20,
                "number input for top-p (1 = off)": 0.95, "seed": 7}
    for label, value in settings.items():
        set_number(panel, label, value)
    set_checked(panel.get_by_label("greedy (always the most likely character)"), False, touch=False)
    set_checked(panel.get_by_label("KV cache", exact=True), True, touch=False)
    text = generate_and_watch(page, panel, PROMPT, 400, touch=False, cache=True)
    expect(panel).to_contain_text(re.compile(r"[\d,]+ characters/s with the KV cache; switch it off to compare\. "
                                             r"400 characters in [\d.,]+ m?s on CPU"))
    # the page sent exactly these settings: the API with the same values writes the same text
    api = local_client(server.url).predict("shakespeare-char", PROMPT, 400, 0.9, 20, 0.95, 7, False, True, False,
                                           api_name="/sample")
    assert api[0] == text
    # every character's view arrives with the text (up to MAX_SENT_BARS bars), so a click draws it in the page and
    # asks the server nothing; another head's is asked for once, and then the page holds that head's views too.
    # Either way the page shows the server's numbers: inspect_position here, on the same weights and the same text
    page.wait_for_function("() => window.chartDeck?.decks?.sample?.views?.['399']", timeout=WAIT_MS)
    events = page.evaluate("() => window.gradio_config.dependencies.map(event => event.api_name)")
    asked = []  # the events the page asks the server for, by api_name
    page.on("request", lambda request: "/queue/join" in request.url and asked.append(
        events[request.post_data_json["fn_index"]]))
    drawn = {}
    inspect_by_pointing(panel, 5, touch=False)
    assert asked == []
    drawn[5, 0] = drawn_inspection(panel)
    set_number(panel, "layer", 1)
    inspect_by_pointing(panel, 399, touch=False)
    assert asked[0] == "sample_inspect_picked"  # then layer 1's views of every character
    assert set(asked) <= {"sample_inspect_picked", "sample_inspect_picked_all"}
    drawn[399, 1] = drawn_inspection(panel)
    page.wait_for_function("() => window.chartDeck.decks.sample.key.endsWith('|1|0') && "
                           "window.chartDeck.decks.sample.views['300']", timeout=WAIT_MS)
    asked.clear()
    inspect_by_pointing(panel, 300, touch=False)  # past the context: the rebuilt KV cache's window
    assert asked == []
    drawn[300, 1] = drawn_inspection(panel)
    ctx = AppContext(limits=Limits(), weights=server.weights)
    *_, history = list(sample_tab.sample(ctx, "shakespeare-char", PROMPT, 400, 0.9, 20, 0.95, 7, False, True))[-1]
    assert PROMPT + "".join(token["text"] for token in history["tokens"]) == text
    for (position, layer), (charts, note) in drawn.items():
        figures = sample_tab.inspect_position(ctx, history, position, layer, 0)
        assert charts == servers_inspection(figures) and note == figures[2]
    expect_no_error(page)
    screenshot(page, "sample")

    # greedy: the same text with and without the cache, and the speeds compared in words
    set_number(panel, "max new tokens", 40)
    set_checked(panel.get_by_label("greedy (always the most likely character)"), True, touch=False)
    greedy = generate_and_watch(page, panel, PROMPT, 40, touch=False, cache=True, growing_at_least=0)
    set_checked(panel.get_by_label("KV cache", exact=True), False, touch=False)
    assert generate_and_watch(page, panel, PROMPT, 40, touch=False, cache=False, growing_at_least=0) == greedy
    expect(panel).to_contain_text(re.compile(r"[\d,]+ characters/s without the KV cache \([\d,]+ with it last time: "
                                             r"[\d.,]+× faster\)"))
    expect(panel).to_contain_text("KV cache off: every step recomputes keys and values")

    # the inspector's own field and button, and a position past the end
    position = panel.get_by_label("position (0 = first generated character)", exact=True)
    position.fill("39")
    panel.get_by_role("button", name="Inspect", exact=True).click()
    expect(plot_titled(panel, "Top-10 candidates at #39")).to_be_visible(timeout=WAIT_MS)
    expect_errors(page, "position 40 is past the end")
    position.fill("40")
    panel.get_by_role("button", name="Inspect", exact=True).click()
    expect(page.locator(ERROR_TOAST)).to_contain_text("Position 40 is past the end: this text has 40 generated "
                                                      "characters, at positions 0 to 39", timeout=WAIT_MS)

    # a checkpoint nobody trained: named in the refusal
    page.locator(ERROR_TOAST).first.get_by_role("button").first.click()  # close the last toast
    expect_errors(page, "no checkpoint named 'nobody-trained-this'")
    checkpoint.fill("nobody-trained-this")
    checkpoint.press("Enter")
    expect(page.locator(ERROR_TOAST).first).to_contain_text("No checkpoint named 'nobody-trained-this'",
                                                            timeout=WAIT_MS)


def test_sample_on_a_phone_streams_inspects_by_tap_and_refuses_what_would_take_too_long(phone):
    panel = open_sample(phone, touch=True)
    panel.get_by_label("Prompt", exact=True).fill(PROMPT)
    set_number(panel, "max new tokens", 400)
    set_number(panel, "number input for temperature", 0.7)
    set_checked(panel.get_by_label("KV cache", exact=True), True, touch=True)
    generate_and_watch(phone, panel, PROMPT, 400, touch=True, cache=True)
    inspect_by_pointing(panel, 2, touch=True)
    inspect_by_pointing(panel, 12, touch=True)  # another tap moves the inspector
    expect(panel.locator(".sample-coloured .picked")).to_have_count(1)
    expect_no_error(phone)
    assert cut_labels(phone) == []
    screenshot(phone, "phone-sample")

    # the server's limit: 2000 characters without the cache would take minutes; it says what to lower
    set_checked(panel.get_by_label("KV cache", exact=True), False, touch=True)
    set_number(panel, "max new tokens", 2000)
    expect_errors(phone, "would take about")
    press(panel.get_by_role("button", name="Generate", exact=True), touch=True)
    toast = phone.locator(ERROR_TOAST)
    expect(toast).to_contain_text(re.compile(r"2000 new characters without the KV cache would take about \d+ s on this "
                                             r"server, over its limit of 60 s per request"), timeout=WAIT_MS)
    expect(toast).to_contain_text(re.compile(r"lower max_new_tokens to \d+ or fewer, or switch the KV cache on"))
    # and a number over the server's limit, or under 1, is refused by the handler, which names the field
    phone.locator(ERROR_TOAST).first.get_by_role("button").first.tap()
    set_number(panel, "max new tokens", 5000)
    expect_errors(phone, "must be at most 2000")
    press(panel.get_by_role("button", name="Generate", exact=True), touch=True)
    expect(phone.locator(ERROR_TOAST).first).to_contain_text("Max new tokens must be at most 2000, got 5000",
                                                             timeout=WAIT_MS)
    phone.locator(ERROR_TOAST).first.get_by_role("button").first.tap()
    set_number(panel, "max new tokens", -5)
    expect_errors(phone, "must be positive")
    press(panel.get_by_role("button", name="Generate", exact=True), touch=True)
    expect(phone.locator(ERROR_TOAST).first).to_contain_text("Max new tokens must be positive, got -5",
                                                             timeout=WAIT_MS)
    # the last text is still there, without a red "Error" on the outputs that says nothing once the toast has faded
    # (keep_on_refusal)
    expect(panel.get_by_label("Text", exact=True)).to_have_value(re.compile("^" + re.escape(PROMPT)))
    expect(phone.locator(ERROR_BADGE)).to_have_count(0)



def test_an_uploaded_nanogpt_checkpoint_is_converted_and_samples(page, tmp_path):
    """A stranger's nanoGPT ckpt.pt + meta.pkl, uploaded in the Sample tab, becomes a checkpoint that generates."""
    from test_convert import CHARS, reference_model, save_nanogpt, write_meta

    save_nanogpt(tmp_path / "ckpt.pt", reference_model(bias=True), bias=True)
    write_meta(tmp_path / "meta.pkl")
    panel = open_sample(page, touch=False)
    panel.get_by_text("Bring your own nanoGPT checkpoint").click()
    uploads = panel.locator('input[type="file"]')  # an upload field's input goes once it holds a file
    uploads.first.set_input_files(str(tmp_path / "ckpt.pt"))
    expect(uploads).to_have_count(1, timeout=WAIT_MS)
    uploads.first.set_input_files(str(tmp_path / "meta.pkl"))
    expect(uploads).to_have_count(0, timeout=WAIT_MS)
    panel.get_by_label("Name it", exact=True).fill("uploaded-nano")
    panel.get_by_role("button", name="Convert", exact=True).click()
    expect(panel).to_contain_text(re.compile(r"Converted ckpt\.pt into the checkpoint uploaded-nano: [\d,]+ "
                                             r"parameters, 2 layers"), timeout=WAIT_MS)
    checkpoint = panel.get_by_role("combobox", name="Checkpoint")
    checkpoint.fill("uploaded-nano")
    checkpoint.press("Enter")
    expect(panel).to_contain_text("uploaded-nano · ", timeout=WAIT_MS)
    for tab, shown in (("Tokenize", f"vocabulary of {len(CHARS)} symbols"),
                       ("Attention", "uploaded-nano, character tokenizer"),
                       ("Model", "of uploaded-nano on your 5 tokens")):  # the converted checkpoint opens in every tab
        other = open_tab(page, tab)
        field = other.get_by_role("combobox", name="Checkpoint")
        if tab == "Tokenize":
            other.get_by_role("radio", name="loaded checkpoint", exact=True).check()
        elif tab == "Attention":
            other.get_by_label("Text (not used by the presets)", exact=True).fill("to be or")
        else:
            other.get_by_label(MODEL_TEXT_LABEL, exact=True).fill("to be")
        field.fill("uploaded-nano")
        field.press("Enter")
        expect(other).to_contain_text(shown, timeout=WAIT_MS)
    panel = open_sample(page, touch=False)
    panel.get_by_label("Prompt", exact=True).fill("to be")
    set_number(panel, "max new tokens", 3)
    set_checked(panel.get_by_label("greedy (always the most likely character)"), True, touch=False)
    generate_and_watch(page, panel, "to be", 3, touch=False, cache=True, growing_at_least=0)
    expect_no_error(page)
