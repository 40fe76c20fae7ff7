"""The Space owner's Publish button: a checkpoint of this server uploaded to a Hub repo (hub.publish_checkpoint).

Shown only where the owner set PLAYGROUND_ADMIN_TOKEN, and it does something only for that token: a visitor can
never make the server write to the Hub with the owner's HF_TOKEN. Owns the check of who asks; the upload is
hub.py's, finding the checkpoint checkpoints.py's.
"""

from __future__ import annotations

import gradio as gr

from playground import checks
from playground.checkpoints import hub
from playground.checkpoints import store as checkpoints
from playground.ui.common import AppContext, checkpoint_dropdown, keep_on_refusal
from playground.ui.events import wire
from playground.ui.train_tab import TOKEN_CHARS, identify


def publish(ctx: AppContext, checkpoint: str, repo_id: str, private: bool, token: str,
            request: gr.Request = None) -> str:
    """Upload ``checkpoint`` to ``repo_id`` if ``token`` is the owner's admin token; a Markdown note of where."""
    checks.text(token, "the admin token", TOKEN_CHARS)
    if not ctx.admin_token or not identify(ctx, token, None, request).admin:
        raise ValueError("only the Space owner may publish: type the admin token (PLAYGROUND_ADMIN_TOKEN)")
    folder = checkpoints.resolve(checks.text(checkpoint, "the checkpoint", 64).strip(), ctx.weights)
    published = hub.publish_checkpoint(folder, repo_id, private=checks.flag(private, "private repo"),
                                       commit_message=f"Publish {folder.name} from Attention Playground")
    files, repo = ", ".join(published.files), published.repo_id
    if published.layout == checkpoints.GPT2_LAYOUT:
        where = (f"in GPT-2's layout ({files}). Type **{repo}** where a checkpoint is chosen to open it here; in "
                 f"transformers, `AutoModelForCausalLM.from_pretrained(\"{repo}\")` opens it")
    else:
        where = f"({files}): {published.note}. Type **{repo}** where a checkpoint is chosen to open it"
    return f"Published **{folder.name}** to [{published.repo_id}]({published.url}) {where}."


def build(ctx: AppContext) -> None:
    if not ctx.admin_token:
        return  # no owner token: nobody could publish, so nothing is shown
    with gr.Accordion("Publish a checkpoint to the Hub (the Space owner)", open=False):
        gr.Markdown("Uploads the checkpoint in GPT-2's layout with this server's `HF_TOKEN` (a token with write "
                    "access), so the repo opens in any playground and in transformers. Only the owner's admin token "
                    "is accepted.")
        with gr.Row():
            checkpoint = checkpoint_dropdown(ctx, "publish")
            repo_id = gr.Textbox(label="Hub repo (owner/name)", max_length=hub.MAX_REPO_ID_LENGTH)
            private = gr.Checkbox(False, label="private repo")
        token = gr.Textbox(label="admin token", type="password", max_length=TOKEN_CHARS)
        button = gr.Button("Publish")
        result = gr.Markdown()
    keep_on_refusal(wire(button.click, publish, ctx, [checkpoint, repo_id, private, token], result,
                         api_name="publish", api_visibility="private"), [result], "publish_refused")
