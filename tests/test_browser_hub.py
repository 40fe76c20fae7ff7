"""The Hub field in Chromium: a learner types a repo id, the app fetches it from a stub Hub on 127.0.0.1, and the
Tokenize and Sample tabs use it. The server is app.py with a user's defaults plus HF_ENDPOINT (the stub)."""

from __future__ import annotations

import re

import pytest
from browser_support import DESKTOP, WAIT_MS, expect_no_error, open_page, open_tab, screenshot, start_app
from playwright.sync_api import expect
from test_hub import StubHub, make_tiny_checkpoint

pytestmark = pytest.mark.browser
REPO_ID = "learner/tiny-char"


@pytest.fixture(scope="module")
def hub_server(tmp_path_factory):
    _, _, files = make_tiny_checkpoint(tmp_path_factory.mktemp("saved"))
    stub = StubHub({REPO_ID: files})
    stub.thread.start()
    servers = start_app(tmp_path_factory.mktemp("hub-server"), {"HF_ENDPOINT": stub.url})
    try:
        server = next(servers)
        server.stub = stub
        yield server
    finally:
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
    expect(panel).to_contain_text("tokens/s", timeout=WAIT_MS)
    expect_no_error(hub_page)
    assert not any(path.endswith((".bin", ".pt", ".pkl")) for _, path in hub_server.stub.requests)
    assert all("authorization" not in {k.lower() for k in headers} for headers in hub_server.stub.headers)
    screenshot(hub_page, "sample-hub", publish=False)
