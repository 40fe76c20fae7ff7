"""Which model a ModelConfig builds: ``build_model(config)``, the one factory the run, the checkpoint loader and
sampling use, and ``require_gpt``, the one refusal of a view that reads a GPT's blocks.

``config.architecture`` "gpt" builds model.GPT; "notebook_004" builds ``NotebookLanguageModel``: notebook 004's own
``SimpleLanguageModel`` (playground/textbook/notebook_004.py) with what the playground's loop, sampler and probes ask
of a model, and nothing else. Its parameters are the notebook's, under the notebook's names (``token_emb``,
``pos_emb``, ``attn.heads.i.key/query/value``, ``attn.proj``, ``output``), so its checkpoint's model.safetensors loads
strictly into a notebook reader's ``SimpleLanguageModel(len(chars), block_size=8, n_embd=16, n_head=2)``; and it
keeps the notebook's initialisation (PyTorch's defaults), so its first loss is the notebook's, about ln(8) on
"hello world". Knows nothing about files or the UI.

    build_model(ModelConfig(vocabulary_size=8, context_size=8, embedding_dim=16, heads_num=2, layers_num=1,
                            architecture="notebook_004")).parameter_count()  -> 1048
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from playground.config import LLAMA_FAMILY, NOTEBOOK_004, ModelConfig
from playground.model.base import CountsItsWeights, Recorder, record_point
from playground.model.gpt import GPT, GPTOutput, KVCache
from playground.model.llama import Llama
from playground.textbook.notebook_004 import SimpleLanguageModel


class ArchitectureError(ValueError):
    """A view or an operation needs another kind of model than the checkpoint holds; the message says where to go."""


class NotebookLanguageModel(CountsItsWeights, SimpleLanguageModel):
    """Notebook 004's SimpleLanguageModel(vocabulary_size, context_size, embedding_dim, heads_num), answering as
    model.GPT does: ``forward(idx, targets)`` gives a GPTOutput with the loss (the notebook computes it outside,
    ``F.cross_entropy(logits.view(-1, V), y.view(-1))``: the same), and with ``return_attention`` its one layer's
    weights (B, heads, T, T) and what that layer read (the embeddings, (B, T, C): there is no LayerNorm).

    No KV cache (``config.has_kv_cache`` is false): sampling re-reads the last ``context_size`` ids each step, the
    notebook's ``idx[:, -8:]``.
    """

    def __init__(self, config: ModelConfig):
        super().__init__(config.vocabulary_size, config.context_size, config.embedding_dim, config.heads_num)
        self.config = config

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None, *,
                return_attention: bool = False, cache: KVCache | None = None,
                capture: Recorder | None = None) -> GPTOutput:
        """idx (B, T <= context_size) -> logits (B, T, V); the loss with ``targets``; its weights if asked;
        ``capture`` keeps the named points of its one layer (``_attend``)."""
        if cache is not None:
            raise ArchitectureError("notebook 004's model keeps no KV cache: it re-reads its whole window each step")
        x = self.embed(idx)  # (B, T, C)
        logits = self.output(self.attn(x) if capture is None else self._attend(x, capture))  # (B, T, V)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))
        if not return_attention:
            return GPTOutput(logits, loss)
        return GPTOutput(logits, loss, [self.attn.weights(x)], [x])


    def _attend(self, x: torch.Tensor, recorder: Recorder) -> torch.Tensor:
        """The notebook's ``self.attn(x)`` (B, T, C) -> (B, T, C), head by head as its Head computes it, keeping layer
        0's named points (model.base.POINTS) under the names GPT's keep: the stream in is the embeddings, which
        attention reads as they are (no norm: ln1.hook_normalized is the embeddings); q, k, v and the head outputs
        are each head's on its own slice, (B, h, T, C_head); there is no residual and no MLP, so the stream out
        (hook_resid_post) is what the output layer reads, the attention output itself."""
        record_point(recorder, 0, "hook_resid_pre", x)
        record_point(recorder, 0, "ln1.hook_normalized", x)
        T = x.size(1)
        mask = torch.tril(torch.ones(T, T, device=x.device))
        parts = [(head.query(part), head.key(part), head.value(part))  # (B, T, C_head) each
                 for head, part in zip(self.attn.heads, self.attn.slices(x))]
        q, k, v = (torch.stack(tensors, dim=1) for tensors in zip(*parts))  # (B, h, T, C_head) each
        record_point(recorder, 0, "attn.hook_q", q)
        record_point(recorder, 0, "attn.hook_k", k)
        record_point(recorder, 0, "attn.hook_v", v)
        scores = (q @ k.transpose(-2, -1) / self.attn.C_head**0.5).masked_fill(mask == 0, float("-inf"))  # (B, h, T, T)
        record_point(recorder, 0, "attn.hook_attn_scores", scores)
        weights = F.softmax(scores, dim=-1)
        record_point(recorder, 0, "attn.hook_pattern", weights)
        z = weights @ v  # (B, h, T, C_head)
        record_point(recorder, 0, "attn.hook_z", z)
        attended = self.attn.proj(torch.cat(z.unbind(dim=1), dim=-1))  # (B, T, C): the heads side by side, mixed
        record_point(recorder, 0, "hook_attn_out", attended)
        record_point(recorder, 0, "hook_resid_post", attended)
        return attended

    # what every family answers alike (model.base): no norms here (identities), the heads' proj, the output layer
    def attention_norm(self, layer: int) -> nn.Module:
        return nn.Identity()

    def output_projection(self, layer: int) -> nn.Linear:
        return self.attn.proj

    def final_norm(self) -> nn.Module:
        return nn.Identity()

    def unembed(self) -> nn.Linear:
        return self.output


def build_model(config: ModelConfig) -> GPT | Llama | NotebookLanguageModel:
    """The model ``config.architecture`` and ``config.family`` name, freshly initialised (on torch's current default
    device): model.GPT, llama.Llama or notebook 004's."""
    if config.architecture == NOTEBOOK_004:
        return NotebookLanguageModel(config)
    if config.is_llama:
        return Llama(config)
    return GPT(config)


def family_settings(model: dict) -> dict:
    """A run's model settings with what its family implies filled in: the Llama family's MLP is SwiGLU, so its
    activation is silu unless given. {"family": "llama", "heads_num": 4} -> {..., "activation": "silu"}."""
    if model.get("family") == LLAMA_FAMILY and model.get("activation") is None:
        return {**model, "activation": "silu"}
    return model


def describe_architecture(config: ModelConfig) -> str:
    """The kind of model in a few words: 'notebook 004's attention-only model (2 heads, each on its own 8 of the
    embedding's 16 features)', 'Llama family (rotary positions, 4 query heads over 2 K/V heads, RMSNorm, SwiGLU)', or
    '' for a GPT (its description says the rest)."""
    if config.is_gpt:
        return ""
    if config.is_llama:
        return (f"Llama family (rotary positions, {config.heads_num} query heads over {config.kv_heads} K/V "
                f"head{'s' * (config.kv_heads != 1)}, RMSNorm, SwiGLU{', q/k/v biases' if config.qkv_bias else ''})")
    return (f"notebook 004's attention-only model ({config.heads_num} head{'s' * (config.heads_num != 1)}, each on "
            f"its own {config.head_size} of the embedding's {config.embedding_dim} features; no MLP, norm or "
            "residual)")


def optimizer_refusal(config: ModelConfig, optimizer: str) -> str | None:
    """Why ``optimizer`` cannot train a model of ``config``, or None: Muon trains the blocks' matrices, and notebook
    004's model has no blocks."""
    if optimizer == "muon" and config.architecture == NOTEBOOK_004:
        return ("notebook 004's model has no transformer blocks, whose matrices are what Muon trains: pick the "
                "optimizer adamw")
    return None


def require_gpt(config: ModelConfig, name: str, view: str) -> None:
    """Refuse, in a sentence that says where to go instead, a ``view`` (e.g. "the Model tab") that reads a GPT's
    blocks when checkpoint ``name`` holds notebook 004's model."""
    if config.is_gpt:
        return
    if config.is_llama:
        raise ArchitectureError(
            f"The checkpoint {name} is a {describe_architecture(config)} model: open it in the Sample tab; {view} "
            "draws GPT checkpoints only so far")
    raise ArchitectureError(
        f"The checkpoint {name} is notebook 004's attention-only model (the toy preset's lab: sliced heads, no "
        f"blocks): open it in the Sample tab, or score its heads in the Attention tab; {view} needs a GPT checkpoint")


NOTEBOOK_PROMPT = "w"  # what notebook 004 generates from: generate(model, start_str="w", max_new_tokens=100)


def lab_prompt(config: ModelConfig, knows) -> str:
    """The prompt the notebook samples its model from ("w") where ``config`` is notebook 004's and ``knows(text)``
    (a tokenizer's ``find_unknown``, empty when it reads it all) finds nothing unknown in it; '' otherwise."""
    if config.architecture != NOTEBOOK_004 or knows(NOTEBOOK_PROMPT):
        return ""
    return NOTEBOOK_PROMPT
