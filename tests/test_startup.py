"""The app starts whatever its limits: a cap below a shipped model hides that model with a note."""

from playground.config import Limits
from playground.ui import build_app
from playground.ui.common import AppContext


def test_a_parameter_cap_below_the_shipped_model_hides_it_with_a_note(tiny_weights):
    ctx = AppContext(limits=Limits(max_parameters=1000), weights=tiny_weights)
    assert ctx.checkpoint_names() == []
    assert "shakespeare-char" in ctx.hidden_note() and "1,000 parameters" in ctx.hidden_note()
    app = build_app(weights=tiny_weights, limits=Limits(max_parameters=1000))  # used to raise at start-up
    assert app.playground_context.hidden_note()


def test_nothing_is_hidden_under_the_default_cap(tiny_weights):
    ctx = AppContext(limits=Limits(), weights=tiny_weights)
    assert ctx.checkpoint_names() == ["shakespeare-char"] and ctx.hidden_note() == ""


def test_a_first_page_slower_than_gradios_3_second_probe_does_not_stop_the_server(monkeypatch):
    """launch() probes its own page once the server is up (one HEAD request, 3 s, no retry after a timeout) and shut
    the server down where it timed out: on a loaded 2-core machine app.py started, answered the browser tests' first
    request, then closed ("When localhost is not accessible, a shareable link must be created") and every browser
    test after it met a refused connection. A probe that fails leaves the server serving."""
    import urllib.request

    import gradio as gr
    from gradio import networking
    from test_app import _free_port

    from playground.ui import launch_options

    monkeypatch.setattr(networking, "url_ok", lambda url: False)  # the page took longer than the probe waits
    with gr.Blocks() as app:
        gr.Markdown("served")
    port = _free_port()
    try:
        app.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True,
                   **launch_options())
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(f"http://127.0.0.1:{port}/", timeout=30) as response:
            assert response.status == 200
    finally:
        app.close()
