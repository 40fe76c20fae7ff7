"""The Gradio app: build_app() assembles the five tabs. The only package besides plots.py that imports gradio."""

from __future__ import annotations

import os
from pathlib import Path

import gradio as gr

from playground import checkpoints
from playground.config import Limits
from playground.device import pick_device
from playground.ui import attention_tab, compare_tab, sample_tab, tokenize_tab, train_tab
from playground.ui.common import AppContext
from playground.ui.server import BodySizeLimit, body_cap

TITLE = "Attention Playground"
SESSION_CAPACITY = 200  # sessions whose inputs and outputs Gradio keeps in memory
CACHE_SWEEP = (600, 3600)  # every 10 minutes, delete files Gradio served more than an hour ago
CSS = ".tok-chips { font-size: 1rem; } footer { visibility: hidden; }"


def build_app(weights: Path | None = None, limits: Limits | None = None, device: str | None = None) -> gr.Blocks:
    """Build the five tabs: Tokenize · Attention · Compare · Train · Sample.

    Checkpoints run on ``device`` (default ``PLAYGROUND_DEVICE``, else CUDA, then MPS, then CPU).
    """
    ctx = AppContext(limits=limits or Limits.from_env(),
                     weights=Path(weights) if weights else checkpoints.weights_dir(),
                     device=pick_device(device or os.environ.get("PLAYGROUND_DEVICE") or "auto"))
    checkpoints.recover(ctx.weights)  # once, at start-up: what saves killed mid-way left (listing only reads)
    with gr.Blocks(title=TITLE, analytics_enabled=False, delete_cache=CACHE_SWEEP) as app:
        gr.Markdown(f"# {TITLE}\nLearn attention by doing it: on your own text, with real trained weights.")
        if ctx.hidden_note():
            gr.Markdown(ctx.hidden_note())
        with gr.Tabs():
            with gr.Tab("Tokenize", id="tokenize"):
                tokenize_tab.build(ctx)
            with gr.Tab("Attention", id="attention"):
                attention_tab.build(ctx)
            with gr.Tab("Compare", id="compare"):
                compare_tab.build(ctx)
            with gr.Tab("Train", id="train"):
                train_tab.build(ctx)
            with gr.Tab("Sample", id="sample"):
                sample_tab.build(ctx)
    app.queue(default_concurrency_limit=4)
    app.playground_context = ctx  # for tests and app.py; not looked up by the UI itself
    return app


def launch_options(limits: Limits | None = None) -> dict:
    """The keyword arguments every launch uses (app.py and the tests alike).

    ``show_error``: a payload Gradio's own components refuse before a handler runs (text in a number slot,
    an unknown choice sent to the API) reaches the client with Gradio's message instead of an empty error.
    ``state_session_capacity``: Gradio keeps each session's inputs and outputs, and every API call is a new
    session, so it keeps the last SESSION_CAPACITY (its default, 10,000, held gigabytes of figures).
    The body cap answers 413 before Gradio parses an oversized request.
    """
    from starlette.middleware import Middleware

    limits = limits or Limits.from_env()
    return dict(css=CSS, max_file_size=limits.max_upload_bytes, show_error=True,
                state_session_capacity=SESSION_CAPACITY,
                app_kwargs={"middleware": [Middleware(BodySizeLimit, max_bytes=body_cap(limits.max_upload_bytes))]})
