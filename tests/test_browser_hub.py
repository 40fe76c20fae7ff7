"""The Hub field in Chromium: a learner types a repo id, the app fetches it from a stub Hub on 127.0.0.1, and the
tabs use it: a playground character checkpoint in Tokenize and Sample, a GPT-2 layout repo (BPE) in Tokenize,
Attention, Model and Sample. The server is app.py with a user's defaults plus HF_ENDPOINT (the stub); zero console
errors."""

from __future__ import annotations

import re
import threading

import pytest
from browser_support import DESKTOP, WAIT_MS, expect_no_error, open_page, open_tab, plot_titled, screenshot, start_app
from playwright.sync_api import expect
from test_gpt2 import make_tiny_gpt2
from test_hub import StubHub, make_tiny_checkpoint

from playground.lens.anatomy.lessons import LEVEL_LABELS, LEVEL_TITLES

pytestmark = pytest.mark.browser
REPO_ID = "learner/tiny-char"
GPT2_REPO_ID = "learner/tiny-gpt2"
TEXT = "To be, or not to be"


@pytest.fixture(scope="module")
def hub_server(tmp_path_factory):
    """One app and one stub Hub for both kinds of repo: a playground character checkpoint and a GPT-2 layout repo
    (a tiny random GPT2LMHeadModel saved by ``transformers`` with a BPE tokenizer.json, test_gpt2)."""
    _, _, files = make_tiny_checkpoint(tmp_path_factory.mktemp("saved"))
    stub = StubHub({REPO_ID: files})
    stub.thread.start()
    built = {}

    def build():  # importing transformers takes seconds: done while the app starts
        built["model"], built["tokenizer"], stub.repos[GPT2_REPO_ID] = make_tiny_gpt2(tmp_path_factory.mktemp("gpt2"))

    builder = threading.Thread(target=build)
    builder.start()
    servers = start_app(tmp_path_factory.mktemp("hub-server"), {"HF_ENDPOINT": stub.url})
    try:
        server = next(servers)
        builder.join()
        assert GPT2_REPO_ID in stub.repos, "the tiny GPT-2 repo was not built"
        server.stub, server.tokenizer, server.gpt2 = stub, built["tokenizer"], built["model"]
        yield server
    finally:
        builder.join()
        servers.close()
        stub.server.shutdown()
        stub.server.server_close()


@pytest.fixture
def hub_page(browser, hub_server):
    yield from open_page(browser, hub_server, DESKTOP)


def _choose_checkpoint(panel, repo_id: str) -> None:
    field = panel.get_by_label("Checkpoint", exact=True)
    field.click()
    field.fill(repo_id)
    field.press("Enter")


def test_a_hub_checkpoint_tokenizes_and_samples(hub_page, hub_server):
    panel = open_tab(hub_page, "Tokenize")
    _choose_checkpoint(panel, REPO_ID)
    panel.get_by_label("Text", exact=True).fill("to be")
    panel.get_by_role("button", name="Tokenize", exact=True).click()
    expect(panel.locator(".tok-chips .tok-chip")).to_have_count(5, timeout=WAIT_MS)
    expect(panel.locator(".tok-chips .tok-unknown")).to_have_count(0)
    assert any(REPO_ID in path for _, path in hub_server.stub.requests), hub_server.stub.requests

    panel = open_tab(hub_page, "Sample")
    _choose_checkpoint(panel, REPO_ID)
    panel.get_by_label("Prompt", exact=True).fill("to be")
    panel.get_by_role("button", name="Generate", exact=True).click()
    expect(panel.get_by_label("Text", exact=True)).to_have_value(re.compile(r"^to be[\s\S]+"), timeout=WAIT_MS)
    expect(panel).to_contain_text("characters/s", timeout=WAIT_MS)
    expect_no_error(hub_page)
    assert not any(path.endswith((".bin", ".pt", ".pkl")) for _, path in hub_server.stub.requests)
    assert all("authorization" not in {k.lower() for k in headers} for headers in hub_server.stub.headers)
    screenshot(hub_page, "sample-hub", publish=False)


def test_a_hub_gpt2_in_tokenize_attention_and_sample(hub_page, hub_server):
    page, tokenizer = hub_page, hub_server.tokenizer
    pieces = tokenizer.encode(TEXT).tolist()

    panel = open_tab(page, "Tokenize")
    panel.get_by_label("Text", exact=True).fill(TEXT)
    _choose_checkpoint(panel, GPT2_REPO_ID)
    expect(panel.locator(".tok-bpe .tok-chip")).to_have_count(len(pieces), timeout=WAIT_MS)
    expect(panel.locator(".tok-character .tok-chip")).to_have_count(len(TEXT))
    expect(panel.get_by_label("Token IDs")).to_have_value(str(pieces))
    expect(panel).to_contain_text(f"{len(pieces)} BPE tokens")
    expect(panel).to_contain_text("GPT-2 layout from learner/tiny-gpt2, byte-level BPE tokenizer")
    panel.get_by_text("How BPE built a word").click()
    panel.get_by_role("button", name="Show merges", exact=True).click()
    expect(panel).to_contain_text("The tokenizers library gives", timeout=WAIT_MS)
    screenshot(page, "tokenize-gpt2", publish=False)

    panel = open_tab(page, "Attention")
    panel.get_by_label("Text (not used by the presets)", exact=True).fill(TEXT)
    _choose_checkpoint(panel, GPT2_REPO_ID)
    expect(panel).to_contain_text(f"T = {len(pieces)} tokens · C = 32 · d_k = 16", timeout=WAIT_MS)
    panel.get_by_role("button", name="Next ▶").click()
    expect(plot_titled(panel, "Q")).to_have_count(1, timeout=WAIT_MS)
    # Q, K and V, and the query's q row beside the keys it matches best; its score and softmax rows wait for the
    # steps that introduce them (3 and 6)
    expect(plot_titled(panel, "The keys query")).to_have_count(1, timeout=WAIT_MS)
    expect(panel.locator(".js-plotly-plot:visible")).to_have_count(4, timeout=WAIT_MS)

    panel = open_tab(page, "Model")
    _choose_checkpoint(panel, GPT2_REPO_ID)
    panel.get_by_role("radio", name=LEVEL_LABELS[-1], exact=True).check()  # the logit lens, over BPE tokens
    expect(panel.get_by_role("heading", level=3)).to_have_text(LEVEL_TITLES[-1], timeout=WAIT_MS)
    expect(panel).to_contain_text(f"{GPT2_REPO_ID}: 2 blocks", timeout=WAIT_MS)

    panel = open_tab(page, "Why")  # a BPE model: its parts, and circuits over the text's tokens and the lowest ids
    panel.get_by_label("Text", exact=True).fill(TEXT)
    _choose_checkpoint(panel, GPT2_REPO_ID)
    expect(panel).to_contain_text("L1 H1", timeout=WAIT_MS)  # 2 blocks of 2 heads: the bars name them
    expect(panel).to_contain_text(" of the ", timeout=WAIT_MS)  # the circuits say which tokens they show
    # each head's circuits have their own host (drawn out of sight while the page is idle): the one on screen
    expect(plot_titled(panel, "QK of ").filter(visible=True)).to_be_visible(timeout=WAIT_MS)
    # the chain from the head's pattern to the next token, over the text's BPE tokens
    expect(panel.locator("#why-heads-chart-0 .js-plotly-plot").filter(visible=True)).to_contain_text(
        re.compile(r"L\d+\s*H\d+'s\s*(pattern|part)"), timeout=WAIT_MS)  # hedged where no head decides
    expect_no_error(page)
    check_why_on_gpt2(page, panel, hub_server, "why-gpt2")

    panel = open_tab(page, "Sample")
    _choose_checkpoint(panel, GPT2_REPO_ID)
    expect(panel).to_contain_text("GPT-2 layout from learner/tiny-gpt2", timeout=WAIT_MS)
    panel.get_by_label("Prompt", exact=True).fill("To be")
    panel.get_by_label("max new tokens", exact=True).fill("16")
    panel.get_by_role("button", name="Generate", exact=True).click()
    expect(panel).to_contain_text("16 tokens in", timeout=WAIT_MS)
    expect(panel.get_by_label("Text", exact=True)).to_have_value(re.compile(r"^To be[\s\S]+"))
    expect_no_error(page)
    assert not any(path.endswith((".bin", ".pt", ".pkl")) for _, path in hub_server.stub.requests)
    screenshot(page, "sample-gpt2", publish=False)


def check_why_on_gpt2(page, panel, hub_server, shot: str) -> None:
    """Issue 29's three views on the imported GPT-2 layout model (test_browser_why.check_three_views), with the
    model's own numbers: the parts on screen add up to transformers' logit of its guess after the text, and the
    chain's probability is transformers' softmax. Its circuits are over the text's tokens and the lowest ids."""
    import torch
    from test_browser_why import check_three_views

    from playground.ui import why_reading

    ids = hub_server.tokenizer.encode(TEXT)
    expect(panel.get_by_role("heading", name=f"at position {ids.numel() - 1}", exact=False)).to_be_visible(
        timeout=WAIT_MS)
    shown = min(hub_server.tokenizer.vocabulary_size, why_reading.MAX_CIRCUIT_TOKENS)
    chain = check_three_views(page, panel, "L0 H1", shown, shot)
    assert chain["keys"] == ids.numel()  # one bar per BPE token read
    with torch.no_grad():
        logits = hub_server.gpt2(ids.view(1, -1)).logits[0, -1]
    assert chain["logit"] == pytest.approx(float(logits.max()), abs=1e-3)
    assert chain["chances"][0] == pytest.approx(float(torch.softmax(logits, -1).max()), abs=1e-3)


def test_a_hub_gpt2_explained_on_a_phone(browser, hub_server):
    """Issue 29: the three views on an imported GPT-2 layout checkpoint on a phone too; every label reads."""
    from browser_support import PHONE
    from test_browser_why import overlapping_labels

    for page in open_page(browser, hub_server, PHONE, is_mobile=True, has_touch=True, device_scale_factor=2):
        panel = open_tab(page, "Why")
        expect(panel.get_by_role("heading", level=3).first).to_contain_text("Why ", timeout=WAIT_MS)
        panel.get_by_label("Text", exact=True).fill(TEXT)
        _choose_checkpoint(panel, GPT2_REPO_ID)
        expect(panel).to_contain_text("L1 H1", timeout=WAIT_MS)
        check_why_on_gpt2(page, panel, hub_server, "why-gpt2-phone")
        assert overlapping_labels(page) == []
