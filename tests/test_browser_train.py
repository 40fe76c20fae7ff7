"""The Train tab in Chromium: presets, an upload through to a started run, start, stop, resume, replace, a second
visitor who cannot stop the run, and the phone layout.

Every run here is small (1 layer, 16 wide, context 16) and is stopped by the test; each test leaves no run going.
"""

from __future__ import annotations

import re
import time

import pytest
from browser_support import (
    DESKTOP,
    ERROR_TOAST,
    WAIT_MS,
    cut_labels,
    expect_errors,
    expect_no_error,
    open_page,
    open_tab,
    plot_titled,
    reload,
    screenshot,
)
from playwright.sync_api import Locator, Page, expect

from playground.checkpoints import store as checkpoints
from playground.config import ModelConfig
from playground.training.presets import TRAIN_PRESETS
from playground.ui import train_tab

pytestmark = pytest.mark.browser

# no time budget: the tiny preset's 50 s would end a run by itself while a busy machine is still at the test's
# middle (a reloaded page then read FINISHED, not "your run")
SMALL_RUN = [("layers_num", 1), ("embedding_dim", 16), ("heads_num", 2), ("context_size", 16), ("batch size", 16),
             ("steps", 20000), ("time budget (s; 0: none)", 0), ("learning rate", 0.01)]
STEP = re.compile(r"step (\d+) / (\d+)")


@pytest.fixture
def stranger(browser, server):
    """Another visitor: a second browser context (its own localStorage, so its own owner token)."""
    yield from open_page(browser, server, DESKTOP)


def fill(panel: Locator, values) -> None:
    for label, value in values:
        panel.get_by_label(label, exact=True).fill(str(value))


def run_name(panel: Locator, server) -> str:
    """The name the page proposes once its load event has set it: the first my-run-N no run has. The page's HTML
    carries the name that was fresh when the server started, which an earlier test's run may have taken since."""
    box = panel.get_by_label("run name (folder in weights/)")
    expect(box).to_have_value(checkpoints.fresh_run_name(server.weights), timeout=WAIT_MS)
    return box.input_value()


def click(panel: Locator, button: str) -> None:
    panel.get_by_role("button", name=button, exact=True).click()


def step_now(panel: Locator) -> int:
    match = STEP.search(panel.inner_text())
    return int(match.group(1)) if match else 0


def wait_for_step(panel: Locator, at_least: int) -> int:
    """Wait until the polled status shows step ``at_least`` or later; return the step shown."""
    expect(panel).to_contain_text(re.compile(r"RUNNING · run "), timeout=WAIT_MS)
    deadline = time.monotonic() + 4 * WAIT_MS / 1000
    while (step := step_now(panel)) < at_least:
        assert time.monotonic() < deadline, f"the status stayed at step {step}, below {at_least}"
        panel.page.wait_for_timeout(250)
    return step


def stop_and_wait(panel: Locator, name: str) -> int:
    click(panel, "Stop")
    expect(panel).to_contain_text(re.compile(rf"(STOPPED|FINISHED) · run {re.escape(name)}"), timeout=2 * WAIT_MS)
    return step_now(panel)


def loss_curve(panel: Locator) -> list[tuple[int, float]]:
    """The train loss as the browser draws it: (step, loss) from the Plotly figure's own data."""
    data = plot_titled(panel, "Loss").evaluate(
        "el => el.data.map(t => ({name: t.name, x: Array.from(t.x), y: Array.from(t.y)}))")
    train = next(trace for trace in data if trace["name"] == "train")
    return list(zip(train["x"], train["y"]))


def refusal(page: Page, words: str) -> None:
    toast = page.locator(ERROR_TOAST).filter(has_text=words)
    expect(toast).to_be_visible(timeout=WAIT_MS)
    expect(toast).not_to_contain_text("Traceback")


def test_each_preset_changes_the_fields_and_names_a_fresh_run(page, server):
    panel = open_tab(page, "Train")
    assert re.fullmatch(r"my-run-\d+", run_name(panel, server))  # never an existing run's name
    for name in ("small", "gpu", "tiny"):
        preset = TRAIN_PRESETS[name]
        panel.get_by_label("preset").click()
        page.get_by_role("option", name=name, exact=True).click()
        for label, value in [("layers_num", preset.model.layers_num), ("embedding_dim", preset.model.embedding_dim),
                             ("context_size", preset.model.context_size), ("steps", preset.train.steps),
                             ("batch size", preset.train.batch_size)]:
            expect(panel.get_by_label(label, exact=True)).to_have_value(str(value), timeout=WAIT_MS)
        expect(panel.get_by_label("run name (folder in weights/)")).to_have_value(re.compile(rf"^{name}-\d+$"))
        expect(panel.get_by_label(preset.train.optimizer, exact=True)).to_be_checked()  # the optimizer follows too
        budget = re.escape(f"{preset.train.time_budget_seconds:g}")  # tiny's 50 s; 0 (none) for the others
        expect(panel.get_by_label(train_tab.TIME_BUDGET_LABEL, exact=True)).to_have_value(
            re.compile(rf"^{budget}(\.0)?$"))
        rate = re.escape(f"{preset.model.dropout_rate:g}")  # 0.1, or 0 shown as "0" or "0.0"
        expect(panel.get_by_label("dropout_rate", exact=True)).to_have_value(re.compile(rf"^{rate}(\.0)?$"))
        parameters = ModelConfig(vocabulary_size=65, **preset.model.to_dict()).parameter_count()
        expect(panel).to_contain_text(f"{parameters:,} parameters")  # the estimate follows the fields
    expect_no_error(page)


def test_an_uploaded_txt_trains_as_an_uploaded_file_and_is_replaced_only_with_the_box_ticked(page, tmp_path, server):
    panel = open_tab(page, "Train")
    upload_label = panel.get_by_text(".txt upload", exact=True)
    expect(upload_label).to_be_hidden()  # shown only for the corpus that needs it
    panel.get_by_label("uploaded .txt", exact=True).check()
    expect(upload_label).to_be_visible(timeout=WAIT_MS)  # the corpus choice goes to the server
    expect(panel).to_contain_text("What you upload or paste is not private")  # said before anything is given
    expect(panel).to_contain_text("⚠️ choose a .txt file to upload")  # the estimate: not Shakespeare's 65 symbols
    corpus = tmp_path / "my-notes.txt"
    text = "It was the best of times, it was the worst of times.\n" * 60
    corpus.write_text(text, encoding="utf-8")
    panel.locator('input[type="file"]').set_input_files(str(corpus))
    # the uploaded file's row, by its name: Gradio writes the stem and the extension in two spans with a space between
    # (the text "my-notes.txt" is only in the upload's progress, which a quick upload passes before the first look)
    expect(panel.get_by_role("cell", name="my-notes.txt")).to_be_visible(timeout=WAIT_MS)
    expect(panel).to_contain_text(f"(with the upload's {len(set(text))} symbols)", timeout=WAIT_MS)
    fill(panel, SMALL_RUN)
    name = run_name(panel, server)
    click(panel, "Start")
    expect(panel).to_contain_text(f"RUNNING · run {name} · your run · training on an uploaded file",
                                  timeout=WAIT_MS)
    expect(panel).to_contain_text("corpus an uploaded file (3,180 characters)")
    wait_for_step(panel, 1)
    stop_and_wait(panel, name)
    expect_no_error(page)
    an_existing_run_is_replaced_only_with_the_box_ticked(page, panel, name)  # on this page, of this run


def an_existing_run_is_replaced_only_with_the_box_ticked(page: Page, panel: Locator, name: str) -> None:
    """``name``, a stopped run of this page's, started again: refused until "replace it" is ticked."""
    expect_errors(page, "already exists")
    click(panel, "Start")
    refusal(page, f'run named \'{name}\' already exists: tick "replace it"')
    panel.get_by_label("replace it", exact=True).check()
    click(panel, "Start")
    expect(panel).to_contain_text(re.compile(rf"RUNNING · run {re.escape(name)} · your run"), timeout=WAIT_MS)
    wait_for_step(panel, 1)
    stop_and_wait(panel, name)


def test_another_visitor_cannot_stop_the_run_and_the_owner_resumes_where_it_stopped(page, stranger, server):
    panel = open_tab(page, "Train")
    fill(panel, SMALL_RUN)
    name = run_name(panel, server)
    click(panel, "Start")
    wait_for_step(panel, 1)

    theirs = open_tab(stranger, "Train")
    expect(theirs).to_contain_text(f"RUNNING · run {name} · another visitor's run: it ends by itself at step 20000",
                                   timeout=WAIT_MS)
    expect_errors(stranger, "belongs to another visitor")
    click(theirs, "Stop")
    refusal(stranger, "This run belongs to another visitor; it ends by itself at step 20000")
    expect(theirs).to_contain_text("RUNNING")
    screenshot(stranger, "train-another-visitor", publish=False)

    expect(theirs.get_by_label("run name (folder in weights/)")).not_to_have_value(name)  # never another's name

    reload(page)  # the owner's token is kept in the browser: a reloaded page still owns the run
    panel = open_tab(page, "Train")
    expect(panel).to_contain_text(f"RUNNING · run {name} · your run", timeout=WAIT_MS)
    # and its name is back in the box, so Resume after Stop goes on with it (a fresh name made Resume fail)
    expect(panel.get_by_label("run name (folder in weights/)")).to_have_value(name, timeout=WAIT_MS)
    # and the settings it started with, not the tiny preset's (3,000 steps: a run past step 3,000 was refused
    # "set steps above ..." on Resume)
    for label, value in SMALL_RUN:
        expect(panel.get_by_label(label, exact=True)).to_have_value(str(value))
    # the owner stops and resumes: the run goes on where it stopped, with its optimizer state, on one curve
    wait_for_step(panel, 60)
    stopped_at = stop_and_wait(panel, name)
    expect(panel).to_contain_text(f"checkpoint saved as {name}")
    assert (server.weights / name / "optimizer.safetensors").is_file()
    click(panel, "Resume run")
    expect(panel).to_contain_text(f"RUNNING · run {name} · your run", timeout=WAIT_MS)
    expect(panel).not_to_contain_text("starts cold")  # its optimizer state came back
    wait_for_step(panel, stopped_at + 40)
    expect(panel).to_contain_text("steps this session")
    stop_and_wait(panel, name)
    curve = loss_curve(panel)  # past 500 points the chart draws every n-th step
    steps = [step for step, _ in curve]
    assert steps[0] == 1 and steps == sorted(set(steps)) and steps[-1] >= stopped_at + 40  # one curve, no restart
    before = [loss for step, loss in curve if stopped_at - 40 < step <= stopped_at]
    after = [loss for step, loss in curve if stopped_at < step <= stopped_at + 40]
    assert sum(after) / len(after) < sum(before) / len(before) + 0.15, (before, after)  # no jump at the resume
    expect_no_error(page)
    screenshot(page, "train")
    click(panel, "Stop")  # nothing left to stop: said, not silent
    expect(page.locator(".toast-body.warning")).to_contain_text(
        f"Nothing to stop: no run is in progress (the last one, {name}, stopped)", timeout=WAIT_MS)


def open_on_phone(phone: Page) -> Locator:
    """The Train tab on a phone, whether the tab bar shows it or keeps it under "More tabs"."""
    tab, more = phone.get_by_role("tab", name="Train", exact=True), phone.get_by_role("button", name="More tabs")
    expect(tab.or_(more).first).to_be_visible(timeout=WAIT_MS)
    if tab.is_visible():
        tab.click()
    else:
        more.click()
        entry = phone.locator(".overflow-dropdown button", has_text="Train")
        expect(entry).to_be_visible()
        entry.click()
    expect(tab).to_have_attribute("aria-selected", "true")
    panel = phone.locator('[role="tabpanel"]:visible')
    expect(panel).to_have_count(1)
    expect(panel).to_contain_text("Train a small character-level GPT")
    return panel


def test_the_train_tab_fits_a_phone(phone):
    panel = open_on_phone(phone)
    panel.get_by_label("uploaded .txt", exact=True).check()
    expect(panel.get_by_text(".txt upload", exact=True)).to_be_visible(timeout=WAIT_MS)
    phone.wait_for_timeout(500)
    assert cut_labels(phone) == []
    expect_no_error(phone)
    screenshot(phone, "train-phone")
