"""Bring a nanoGPT checkpoint through the browser: upload ckpt.pt (and meta.pkl, or paste the characters), and it
is converted once into a checkpoint folder that every tab opens by name.

Owns the upload's checks, in the order an upload meets them: the file's size (before a byte is read), the
name (new, not a shipped one), the memory it takes to read; then, once its declared shape is known and before any
tensor is converted, the memory and the disk that shape takes (a few KB of stride-0 tensors can declare 73 MB of
weights), against the server's budget and the visitor-run quota. The conversion is
playground/convert.py's (torch.load(weights_only=True), a meta.pkl unpickler that refuses every class, a refused
compressed archive). The converted folder records its uploader like a visitor's run, so the quota can remove it.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import gradio as gr

from playground import budget, checks
from playground.budget import human
from playground.checkpoints import store as checkpoints
from playground.checkpoints.nanogpt import convert_nanogpt
from playground.server import admission, tenancy
from playground.ui.common import AppContext, keep_on_refusal
from playground.ui.events import wire
from playground.ui.train_tab import identify

MAX_CHARACTERS = 4096  # a pasted character vocabulary: nanoGPT's shakespeare_char has 65


def _path(upload) -> Path | None:
    if upload is None or upload == "":
        return None
    return Path(upload if isinstance(upload, str) else getattr(upload, "name", upload))


def convert_upload(ctx: AppContext, ckpt, meta, characters, name, request: gr.Request = None) -> str:
    """Check and convert an uploaded nanoGPT ckpt.pt; return a Markdown note naming the new checkpoint."""
    ckpt_path, meta_path = _path(ckpt), _path(meta)
    if ckpt_path is None:
        raise ValueError("choose nanoGPT's ckpt.pt to upload (out/ckpt.pt after its train.py)")
    size = ckpt_path.stat().st_size
    cap = ctx.limits.max_model_upload_bytes
    if size > cap:
        raise ValueError(f"{ckpt_path.name} is {human(size)}; this server converts checkpoints up to {human(cap)} "
                         "(PLAYGROUND_MAX_MODEL_UPLOAD_BYTES)")
    pasted = checks.text(characters, "the pasted characters", MAX_CHARACTERS) if characters else ""
    if meta_path is None and not pasted:
        raise ValueError("add the vocabulary: nanoGPT's data/<dataset>/meta.pkl, or paste its characters in ID order")
    if meta_path is not None and pasted:
        raise ValueError("give the vocabulary once: meta.pkl or the pasted characters, not both")
    name = checkpoints.validate_name(checks.text(name, "the checkpoint name", 64).strip())
    if checkpoints.is_shipped(name) or checkpoints.exists(name, ctx.weights):
        raise ValueError(f"a checkpoint named {name} already exists; pick a new name, such as "
                         f"{checkpoints.fresh_run_name(ctx.weights, stem='my-nanogpt')}")
    visitor = identify(ctx, "", None, request)
    ctx.sweep_temp_space(keep=[ckpt_path, meta_path])  # the uploads came into Gradio's temp space: within its quota
    with ctx.budget.reserve(budget.conversion_cost(upload_bytes=size), hint="try again when the server is less busy"), \
            contextlib.ExitStack() as held:
        admit = admission.conversion_admitter(ctx.budget, held, visitor, ctx.weights, ctx.limits, size)
        target = convert_nanogpt(ckpt_path, name, meta_path=meta_path, characters=pasted or None,
                                 directory=ctx.weights, max_parameters=ctx.limits.max_parameters,
                                 command=f"uploaded {ckpt_path.name} through the app",
                                 record={tenancy.OWNER_FIELD: visitor.owner, tenancy.CLIENT_FIELD: visitor.client},
                                 before_converting=admit)
    config = checkpoints.read_config(target)
    return (f"Converted **{ckpt_path.name}** into the checkpoint **{name}**: {config.parameter_count():,} "
            f"parameters, {config.layers_num} layers, {config.heads_num} heads, embedding {config.embedding_dim}, "
            f"context {config.context_size}, {config.vocabulary_size} characters. Pick **{name}** in any tab's "
            "checkpoint list.")


def build(ctx: AppContext) -> None:
    """An accordion: the uploads, the name, a Convert button and its result."""
    with gr.Accordion("Bring your own nanoGPT checkpoint", open=False):
        gr.Markdown(
            "Trained a character model with [nanoGPT](https://github.com/karpathy/nanoGPT)? Upload its `ckpt.pt` "
            "and the dataset's `meta.pkl` (or paste the characters in ID order). It is converted once, read with "
            "`torch.load(weights_only=True)` and an unpickler that refuses any code, into a checkpoint every tab "
            f"opens. Up to {human(ctx.limits.max_model_upload_bytes)} and "
            f"{ctx.limits.max_parameters:,} parameters.")
        with gr.Row():
            ckpt = gr.File(label="ckpt.pt", file_types=[".pt"], type="filepath")
            meta = gr.File(label="meta.pkl", file_types=[".pkl"], type="filepath")
        with gr.Row():
            characters = gr.Textbox(label="or the characters, in ID order", lines=1, max_lines=3,
                                    max_length=MAX_CHARACTERS)
            name = gr.Textbox(label="Name it", value=checkpoints.fresh_run_name(ctx.weights, stem="my-nanogpt"),
                              max_length=64)
        convert = gr.Button("Convert", variant="secondary")
        result = gr.Markdown()
    keep_on_refusal(wire(convert.click, convert_upload, ctx, [ckpt, meta, characters, name], result,
                         api_name="convert_nanogpt", api_visibility="private"), [result], "convert_nanogpt_refused")
