"""The maths of the Model tab's five zoom levels, as pure functions from a model (or the book's inputs) to numbers.

  1. one score   ``one_score(q_i, k_j)``: the products q_i[n]·k_j[n], their sum S[i, j] and S[i, j] / √d_k
  2. one head    walkthrough.checkpoint_head_inputs(...).trace() (the Attention tab's seven stages, unchanged)
  3. all heads   ``all_heads(model, ids, layer)`` (read at the model's named points, any family) and
                 ``textbook_heads(name)``: every head's weights and output, the concatenation and the output
                 projection; with ``forget_transpose=True`` the heads are joined the way notebook 002's code
                 joins them (``forgotten_join``: no transpose before the view)
  4. the block   ``block_walk(block, x, ...)``: LayerNorm, attention, residual add, LayerNorm, MLP, residual add,
                 rebuilt from the Block's own submodules with switches (post-norm, encoder, ReLU, dropout)
  5. the model   ``logit_lens(model, ids)``: after each block (hook_resid_post), the final norm and the unembedding ->
                 the top next characters

A model is read through the interface every family answers (model.base: run_with_cache's named points, final_norm,
unembed, output_projection); only block_walk's what-ifs rebuild a GPT block from its own submodules, since the
switches (post-norm, encoder, ReLU, dropout) change what the block computes.
Knows nothing about lesson text (lessons.py), tokenizers, files, Gradio or Plotly. Every result is detached,
float32 and on the CPU, whatever device the model runs on.

    block_walk(model.blocks[0], x).output  ==  model.blocks[0](x[None])[0][0]        (pre-norm, causal, GELU)
    logit_lens(model, ids).stages[-1]      ->  the top 10 of softmax(model(ids[None]).logits[0])
    textbook_heads("wrapper").concatenated[0]  ->  [-0.4519, 0.2216, 0.4772, 0.1063]   (notebook 001)
    all_heads(model, ids, 0, forget_transpose=True).projected
        ==  attn.proj(head_outputs.contiguous().view(T, h·d))        (notebook 002's line, the same weights)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from playground import budget, checks
from playground.attention import MultiHeadAttentionWrapper
from playground.attention.batched import BatchedAttention
from playground.config import ModelConfig
from playground.lens.walkthrough.sources import JOURNEY_EMBEDDINGS, JOURNEY_TOKENS
from playground.model.base import run_with_cache
from playground.model.gpt import GPT, Block, causal_mask
from playground.model.gpt import activation as model_activation
from playground.model.modes import evaluating
from playground.textbook import ForgottenTranspose, combine_heads, forgotten_transpose

LEVELS = ("score", "head", "heads", "block", "model")  # the zoom levels, from one number to the whole model
NORM_ORDERS = ("pre", "post")  # pre: x + f(LN(x)) (GPT); post: LN(x + f(x)) (the original Transformer, nb 002/003)
ACTIVATIONS = ("gelu", "relu")
TOP = 10  # next characters the logit lens keeps per position
BLOCK_TOP = 5  # next characters block_lens keeps at each point of one block
TEXTBOOK_SEED = 123  # notebook 001's torch.manual_seed
TEXTBOOK_LAYERS = ("wrapper", "batched")  # MultiHeadAttentionWrapper and MultiHeadAttention of notebook 001
# forgotten_transpose's two (T, h·d, 3) int64 source tables and the int64 index tensors that build them
FORGOTTEN_MAP_BYTES = 2 * 3 * 8 + 5 * 8


def _cpu(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.detach().to("cpu", torch.float32)


@contextmanager
def _seeded(seed: int) -> Iterator[None]:
    """``torch.manual_seed(seed)`` inside, as a notebook does; the global RNG state restored afterwards."""
    state = torch.random.get_rng_state()
    try:
        torch.manual_seed(seed)
        yield
    finally:
        torch.random.set_rng_state(state)


def position(value, name: str, length: int) -> tuple[int, bool]:
    """A token position: -1 means the last; one past the end is clamped to the last. Returns (position, clamped).

        position(-1, "query", 6) -> (5, False)      position(9, "query", 6) -> (5, True)
    """
    asked = checks.whole_number(value if value not in (None, "") else -1, name, -1)
    if asked < 0:
        return length - 1, False
    return min(asked, length - 1), asked > length - 1


def check_token_ids(model: GPT, token_ids: torch.Tensor) -> torch.Tensor:
    """A 1-D tensor of 1..context_size IDs inside the vocabulary, on the model's device."""
    config = model.config
    if not isinstance(token_ids, torch.Tensor) or token_ids.dim() != 1 or token_ids.is_floating_point():
        raise ValueError("token_ids must be a 1-D tensor of integer token IDs")
    T = token_ids.numel()
    if T == 0:
        raise ValueError("Type some text first: there are no tokens")
    if T > config.context_size:
        raise ValueError(f"the sequence has {T} tokens but this model's context_size is {config.context_size}; "
                         "shorten it (prepare_text cuts it for you)")
    low, high = int(token_ids.min()), int(token_ids.max())
    if low < 0 or high >= config.vocabulary_size:
        bad = low if low < 0 else high
        raise ValueError(f"token id {bad} is outside this model's vocabulary (0-{config.vocabulary_size - 1})")
    return token_ids.to(next(model.parameters()).device)


# --------------------------------------------------------------------------------------------- 1. one score

@dataclass(eq=False)
class ScoreCell:
    """One cell of the score matrix: S[i, j] = Σ_n q_i[n]·k_j[n], then S[i, j] / √d_k."""

    q: torch.Tensor  # (d,) query i
    k: torch.Tensor  # (d,) key j
    products: torch.Tensor  # (d,) q_i[n]·k_j[n], element by element
    total: float  # their sum: the raw score S[i, j]
    scaled: float  # total / √d: the score softmax sees (before the mask)

    @property
    def head_size(self) -> int:
        return self.q.numel()


def one_score(q_i: torch.Tensor, k_j: torch.Tensor) -> ScoreCell:
    """The dot product of one query and one key, every term kept.

        one_score(tensor([1., 2.]), tensor([3., -1.])) -> products [3, -2], total 1, scaled 1/√2 = 0.7071
    """
    for name, vector in (("q_i", q_i), ("k_j", k_j)):
        if not isinstance(vector, torch.Tensor) or vector.dim() != 1 or not vector.is_floating_point():
            raise ValueError(f"{name} must be a 1-D tensor of floating-point numbers")
    if q_i.numel() != k_j.numel() or q_i.numel() == 0:
        raise ValueError(f"q_i and k_j must have the same positive length, got {q_i.numel()} and {k_j.numel()}")
    q, k = _cpu(q_i), _cpu(k_j)
    products = q * k  # (d,)
    total = products.sum()
    return ScoreCell(q, k, products, float(total), float(total / math.sqrt(q.numel())))


# --------------------------------------------------------------------------------------------- 3. all heads

@dataclass(eq=False)
class ForgottenJoin:
    """Notebook 002's forgotten transpose on one layer's heads, the "what if": the heads' outputs (h, T, d) joined
    with ``.contiguous().view(T, h·d)`` straight away, as the notebook's code does, the output projection applied
    to that, and the right join and projection beside them. The same weights throughout: only the join differs.

    The view reads the (h, T, d) numbers in memory order, so row t of the join is the flat range
    [t·h·d, (t+1)·h·d): its block i (features i·d..(i+1)·d-1) is head (t·h + i) // T's row for token (t·h + i) % T.
    """

    pitfall: ForgottenTranspose  # textbook.pitfalls: both joins (1, T, h·d) and the source of every feature
    right_concatenated: torch.Tensor  # (T, h·d): transpose, then view (head i on features i·d..(i+1)·d-1)
    wrong_concatenated: torch.Tensor  # (T, h·d): the view alone, notebook 002's line
    right_projected: torch.Tensor | None  # (T, C_out) the output projection of the right join; None without one
    wrong_projected: torch.Tensor | None  # (T, C_out) ... of the wrong join: what the notebook's code returns

    @property
    def heads_num(self) -> int:
        return self.pitfall.num_heads

    @property
    def length(self) -> int:
        return self.pitfall.num_tokens

    @property
    def block_sources(self) -> torch.Tensor:
        """(T, h, 2) long: the (head, token) whose d features the wrong join put in block i of row t."""
        return self.pitfall.wrong_source[:, :: self.pitfall.head_size, :2]

    @property
    def misplaced(self) -> torch.Tensor:
        """(T, h) bool: True where block i of row t is not (head i, token t), what the right join puts there."""
        sources = self.block_sources
        heads = torch.arange(self.heads_num).view(1, -1)  # (1, h)
        tokens = torch.arange(self.length).view(-1, 1)  # (T, 1)
        return (sources[..., 0] != heads) | (sources[..., 1] != tokens)

    @property
    def mixed_rows(self) -> list[int]:
        """The rows that hold some other token's features: every row but those that read only their own token."""
        tokens = torch.arange(self.length).view(-1, 1)  # (T, 1)
        return [int(t) for t in (self.block_sources[..., 1] != tokens).any(dim=1).nonzero()[:, 0]]

    @property
    def concatenated_difference(self) -> float:
        """max |wrong − right| over the joins."""
        return self.pitfall.max_abs_difference

    @property
    def output_difference(self) -> float:
        """max |wrong − right| over what the layer returns: the projection, or the join without one."""
        if self.wrong_projected is None:
            return self.concatenated_difference
        return float((self.wrong_projected - self.right_projected).abs().max())


def forgotten_join(head_outputs: torch.Tensor,
                   projection: Callable[[torch.Tensor], torch.Tensor] | None = None) -> ForgottenJoin:
    """Join head_outputs (h, T, d) both ways (textbook.pitfalls.forgotten_transpose) and apply ``projection``
    (the layer's output projection, e.g. ``attn.proj`` or notebook 002's ``W_o``) to each, on the outputs'
    device and dtype, as the layer itself would. No gradients; every result float32 on the CPU.

        forgotten_join(msa.heads_output(x)[0], msa.W_o).wrong_projected
            == MultiHeadSelfAttention(d_model, h, forget_transpose=True) with msa's weights, on x
    """
    if not isinstance(head_outputs, torch.Tensor) or head_outputs.dim() != 3 or not head_outputs.is_floating_point():
        raise ValueError("head_outputs must be a 3-D (h, T, d) tensor of floating-point numbers")
    with torch.no_grad():
        batch = head_outputs.detach()[None]  # (1, h, T, d): the notebook's B of one
        pitfall = forgotten_transpose(batch)  # (1, T, h·d) each way, on the outputs' device
        right, wrong = pitfall.right[0], pitfall.wrong[0]  # (T, h·d)
        right_projected = wrong_projected = None
        if projection is not None:
            right_projected, wrong_projected = _cpu(projection(right)), _cpu(projection(wrong))  # (T, C_out)
    pitfall = ForgottenTranspose(right=_cpu(pitfall.right), wrong=_cpu(pitfall.wrong),
                                 max_abs_difference=pitfall.max_abs_difference, wrong_source=pitfall.wrong_source,
                                 right_source=pitfall.right_source, num_heads=pitfall.num_heads,
                                 head_size=pitfall.head_size)
    return ForgottenJoin(pitfall, _cpu(right), _cpu(wrong), right_projected, wrong_projected)


@dataclass(eq=False)
class AllHeads:
    """Every head of one attention layer on one sequence: weights, outputs, concatenation, projection.

    With ``forgotten`` set (``forget_transpose=True``), ``concatenated`` and ``projected`` are what notebook 002's
    code computes, the heads joined without the transpose; ``forgotten`` holds the right ones and the map.
    """

    x: torch.Tensor  # (T, C_in) what the heads read (a GPT layer: the LayerNorm'd residual stream)
    weights: torch.Tensor  # (h, T, T) each head's attention weights
    head_outputs: torch.Tensor  # (h, T, d) each head's weights @ values
    concatenated: torch.Tensor  # (T, h·d) the heads' outputs side by side (scrambled when forgotten is set)
    projected: torch.Tensor | None  # (T, C_out) the output projection of the concatenation; None without one
    description: str = ""
    batch_rows_equal: bool | None = None  # textbook: whether both copies in the batch of two gave the same numbers
    forgotten: ForgottenJoin | None = None  # the forgotten-transpose what-if, when asked for

    @property
    def heads_num(self) -> int:
        return self.weights.size(0)

    @property
    def head_size(self) -> int:
        return self.head_outputs.size(2)

    @property
    def length(self) -> int:
        return self.weights.size(1)


def _points(model, ids: torch.Tensor, layer: int, names) -> dict[str, torch.Tensor]:
    """Layer ``layer``'s named points ``names`` on ids (T,) (model.base.run_with_cache; the blocks above it are not
    run), by point name, (B, ...) without the batch, float32 on the CPU."""
    _, recorder = run_with_cache(model, ids[None], set(names), {layer}, stop_when_kept=True)
    return {name: _cpu(recorder[f"blocks.{layer}.{name}"][0]) for name in names}


def heads_description(config, layer: int, length: int) -> str:
    """'layer 0 of the model: 4 heads of 16 features on 12 tokens', or of a grouped layer '4 query heads over 2 K/V
    heads of 16 features'."""
    heads = f"{config.heads_num} heads"
    if config.kv_heads != config.heads_num:  # grouped: several query heads share a K/V head
        heads = f"{config.heads_num} query heads over {config.kv_heads} K/V heads"
    return f"layer {layer} of the model: {heads} of {config.head_size} features on {checks.count(length, 'token')}"


def all_heads(model, token_ids: torch.Tensor, layer: int, forget_transpose: bool = False) -> AllHeads:
    """Every query head of layer ``layer`` on token_ids (1-D, at most context_size), read at the model's named points
    (any family: what its heads read, their weights and outputs, the attention output), joined side by side;
    ``forget_transpose``: joined notebook 002's way and the layer's own output projection applied to that."""
    config = model.config
    layer = checks.index(layer, "layer", config.layers_num, "layers")
    ids = check_token_ids(model, token_ids)
    points = _points(model, ids, layer, ("ln1.hook_normalized", "attn.hook_pattern", "attn.hook_z", "hook_attn_out"))
    head_outputs = points["attn.hook_z"]  # (h, T, d)
    h, T, d = head_outputs.shape
    description = heads_description(config, layer, T)
    if forget_transpose:
        projection = model.output_projection(layer)
        forgotten = forgotten_join(head_outputs.to(projection.weight.device, projection.weight.dtype), projection)
        return AllHeads(points["ln1.hook_normalized"], points["attn.hook_pattern"], head_outputs,
                        forgotten.wrong_concatenated, forgotten.wrong_projected,
                        description=description + ", joined without the transpose", forgotten=forgotten)
    concatenated = head_outputs.transpose(0, 1).reshape(T, h * d)  # (T, h·d): head i on features i·d..(i+1)·d-1
    return AllHeads(points["ln1.hook_normalized"], points["attn.hook_pattern"], head_outputs, concatenated,
                    points["hook_attn_out"], description=description)


def textbook_inputs() -> tuple[torch.Tensor, list[str]]:
    """Notebook 001's "Your journey starts with one step": six 3-d embeddings (6, 3) and their words."""
    return torch.tensor(JOURNEY_EMBEDDINGS), list(JOURNEY_TOKENS)


def textbook_heads(name: str, seed: int = TEXTBOOK_SEED, forget_transpose: bool = False) -> AllHeads:
    """Notebook 001's two multi-head layers on the batch of two copies of its 6 × 3 inputs, through the
    project's attention family (playground.attention), built after ``torch.manual_seed(seed)``.

    "wrapper": the book's ``MultiHeadAttentionWrapper(d_in=3, d_out=2, context_length=6, 0.0, num_heads=2)``:
    two heads of width 2, concatenated, no projection. The family's d_out is the total width, so it is
    ``MultiHeadAttentionWrapper(3, 4, 6, 0.0, num_heads=2)`` here; row 0 is [-0.4519, 0.2216, 0.4772, 0.1063].
    "batched": the book's ``MultiHeadAttention(d_in=3, d_out=2, 6, 0.0, num_heads=2)``: two heads of width 1,
    their context vectors, then out_proj; row 0 is [0.3190, 0.4858]. The global RNG state is restored.
    ``forget_transpose`` ("batched" only): its context vectors joined notebook 002's way, then its out_proj.
    """
    name = checks.choice(name, "textbook layer", TEXTBOOK_LAYERS)
    if forget_transpose and name == "wrapper":
        raise ValueError("the wrapper joins its heads with torch.cat along the features: it has no transpose to "
                         "forget (the batched MultiHeadAttention has one)")
    seed = checks.whole_number(seed, "seed", 0)
    embeddings, _ = textbook_inputs()
    batch = torch.stack((embeddings, embeddings))  # (2, 6, 3): the book's batch of two copies
    T = embeddings.size(0)
    forgotten = None
    with _seeded(seed):
        if name == "wrapper":
            module = MultiHeadAttentionWrapper(3, 4, T, 0.0, num_heads=2)
        else:
            module = BatchedAttention(3, 2, T, 0.0, num_heads=2)
    with evaluating(module):
        weights = module.attention_weights(batch)  # (2, h, T, T)
        if name == "wrapper":
            output = module(batch)  # (2, T, 4): the concatenation itself
            head_outputs = torch.stack([head(batch) for head in module.heads], dim=1)  # (2, h, T, d)
            concatenated, projected = output, None
        else:
            concatenated = module.context_vectors(batch)  # (2, T, 2)
            projected = module(batch)  # (2, T, 2)
            head_outputs = concatenated.view(2, T, module.num_heads, module.head_dim).transpose(1, 2)  # (2, h, T, d)
            if forget_transpose:  # the book's context_vectors with the transpose left out, then its out_proj
                forgotten = forgotten_join(head_outputs[0], module.out_proj)
                concatenated = combine_heads(head_outputs, forget_transpose=True)  # (2, T, 2)
                projected = module.out_proj(concatenated)  # (2, T, 2)
    final = concatenated if projected is None else projected
    description = ("the book's MultiHeadAttentionWrapper(d_in=3, d_out=2, num_heads=2): two heads of width 2, "
                   "concatenated" if name == "wrapper" else
                   "the book's MultiHeadAttention(d_in=3, d_out=2, num_heads=2): two heads of width 1, then out_proj")
    if forget_transpose:
        description += ", its heads joined without the transpose (notebook 002's line)"
    return AllHeads(embeddings, _cpu(weights[0]), _cpu(head_outputs[0]), _cpu(concatenated[0]),
                    None if projected is None else _cpu(projected[0]),
                    description=f"{description}; torch.manual_seed({seed}), a batch of two copies",
                    batch_rows_equal=bool(torch.equal(final[0], final[1])),
                    forgotten=forgotten)


# --------------------------------------------------------------------------------------------- 4. the block

@dataclass(eq=False)
class StreamPoint:
    """The (T, C) numbers at one point of a block, and whether they are the residual stream itself."""

    name: str
    values: torch.Tensor  # (T, C)
    stream: bool  # True: the residual stream (what the next part reads); False: a branch or a LayerNorm'd copy

    @property
    def norms(self) -> torch.Tensor:
        """(T,) each token's length ‖x‖ at this point."""
        return self.values.norm(dim=-1)


@dataclass(eq=False)
class BlockWalk:
    """One block, step by step, under the chosen switches."""

    points: list[StreamPoint]  # in order, the block's input first and its output last
    weights: torch.Tensor  # (h, T, T) attention weights before dropout
    kept: torch.Tensor  # (h, T, T) bool: False where dropout zeroed the weight (all True with dropout off)
    dropped_weights: torch.Tensor  # (h, T, T) what multiplies V: weights · kept / (1 - p)
    mlp_hidden: torch.Tensor  # (T, 4C) the MLP's hidden units after the activation
    norm_order: str = "pre"
    causal: bool = True
    activation: str = "gelu"
    dropout_p: float = 0.0
    seed: int = 0

    @property
    def output(self) -> torch.Tensor:
        return self.points[-1].values  # (T, C)

    @property
    def visible(self) -> torch.Tensor:
        """(T, T) True where a query may look at a key: the causal mask, or everywhere in encoder mode."""
        T = self.weights.size(-1)
        return causal_mask(T, T) if self.causal else torch.ones(T, T, dtype=torch.bool)

    @property
    def dropped(self) -> torch.Tensor:
        """(h, T, T) True where dropout zeroed a weight a query could see."""
        return ~self.kept & self.visible


def _block_switches(norm_order, causal, activation, dropout_p, seed) -> tuple[str, bool, str, float, int]:
    norm_order = checks.choice(norm_order, "norm order", NORM_ORDERS)
    activation = checks.choice(activation, "activation", ACTIVATIONS)
    dropout_p = checks.real_number(dropout_p, "dropout")
    if not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"dropout must be at least 0 and below 1, got {dropout_p:g}")
    return norm_order, bool(causal), activation, dropout_p, checks.seed(seed, "dropout seed")


def block_walk(block: Block, x: torch.Tensor, *, norm_order: str = "pre", causal: bool = True,
               activation: str = "gelu", dropout_p: float = 0.0, seed: int = 0) -> BlockWalk:
    """Run ``block`` on x (T, C) from its own submodules (ln_1, attn.project_qkv, attn.proj, ln_2, mlp.fc,
    mlp.proj) and keep every point of the residual stream.

    pre (GPT):    a = x + attn(ln_1(x));   out = a + mlp(ln_2(a))      == Block.forward
    post (002):   a = ln_1(x + attn(x));   out = ln_2(a + mlp(a))
    ``causal`` False is an encoder: every token sees every token. ``activation`` is the MLP's. With
    ``dropout_p`` > 0 the attention weights go through dropout as in training mode, with a mask drawn from
    ``torch.Generator().manual_seed(seed)``: each weight is zeroed with probability p and the rest are
    multiplied by 1/(1-p). The residual and MLP dropouts stay off, as in eval mode.
    """
    norm_order, causal, activation, dropout_p, seed = _block_switches(norm_order, causal, activation, dropout_p,
                                                                      seed)
    if not isinstance(x, torch.Tensor) or x.dim() != 2 or not x.is_floating_point():
        raise ValueError("x must be a 2-D (T, C) tensor of floating-point numbers")
    C = block.ln_1.normalized_shape[0]
    if x.size(1) != C or x.size(0) == 0:
        raise ValueError(f"x must have shape (T, {C}) with T at least 1, got {tuple(x.shape)}")
    attn = block.attn
    own = getattr(block.mlp, "activation", "gelu")  # the block's GELU: erf, or GPT-2's tanh approximation
    act = (lambda t: model_activation(own if own != "relu" else "gelu", t)) if activation == "gelu" else F.relu
    parameter = next(block.parameters())
    T = x.size(0)
    generator = torch.Generator().manual_seed(seed)

    def attention(inp: torch.Tensor) -> tuple[torch.Tensor, ...]:
        q, k, v = (t[0] for t in attn.project_qkv(inp[None]))  # (h, T, d) each
        scores = q @ k.transpose(-2, -1) / math.sqrt(attn.head_size)  # (h, T, T)
        if causal:
            scores = scores.masked_fill(~causal_mask(T, T, inp.device), float("-inf"))
        weights = F.softmax(scores, dim=-1)  # (h, T, T)
        if dropout_p > 0:
            kept = torch.rand(weights.shape, generator=generator) >= dropout_p  # drawn on the CPU: same everywhere
            used = weights * kept.to(weights.device) / (1.0 - dropout_p)
        else:
            kept, used = torch.ones(weights.shape, dtype=torch.bool), weights
        heads = used @ v  # (h, T, d)
        return attn.proj(heads.transpose(0, 1).reshape(T, C)), weights, kept, used  # (T, C)

    def mlp(inp: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        hidden = act(block.mlp.fc(inp))  # (T, 4C)
        return block.mlp.proj(hidden), hidden  # (T, C)

    with evaluating(block):
        x = x.detach().to(parameter.device, parameter.dtype)
        if norm_order == "pre":
            normed_1 = block.ln_1(x)
            attended, weights, kept, used = attention(normed_1)
            after_attention = x + attended
            normed_2 = block.ln_2(after_attention)
            mlp_out, hidden = mlp(normed_2)
            output = after_attention + mlp_out
            points = [("block input", x, True), ("LayerNorm 1", normed_1, False),
                      ("attention output", attended, False), ("residual add 1", after_attention, True),
                      ("LayerNorm 2", normed_2, False), ("MLP output", mlp_out, False),
                      ("residual add 2 (block output)", output, True)]
        else:
            attended, weights, kept, used = attention(x)
            added_1 = x + attended
            normed_1 = block.ln_1(added_1)
            mlp_out, hidden = mlp(normed_1)
            added_2 = normed_1 + mlp_out
            output = block.ln_2(added_2)
            points = [("block input", x, True), ("attention output", attended, False),
                      ("residual add 1", added_1, False), ("LayerNorm 1", normed_1, True),
                      ("MLP output", mlp_out, False), ("residual add 2", added_2, False),
                      ("LayerNorm 2 (block output)", output, True)]
    return BlockWalk([StreamPoint(name, _cpu(values), stream) for name, values, stream in points], _cpu(weights),
                     kept.cpu(), _cpu(used), _cpu(hidden), norm_order, causal, activation, dropout_p, seed)


def block_input(model, token_ids: torch.Tensor, layer: int) -> torch.Tensor:
    """The residual stream entering block ``layer`` (T, C), read at its named point hook_resid_pre (any family)."""
    layer = checks.index(layer, "layer", model.config.layers_num, "layers")
    ids = check_token_ids(model, token_ids)
    return _points(model, ids, layer, ("hook_resid_pre",))["hook_resid_pre"]


def textbook_block(seed: int = TEXTBOOK_SEED) -> Block:
    """A block around the book's 3-d inputs (one head of width 3, an MLP of 12 hidden units), built with
    PyTorch's default initialisation after ``torch.manual_seed(seed)``: seeded random weights, not trained ones.
    The global RNG state is restored."""
    with _seeded(checks.whole_number(seed, "seed", 0)):
        return Block(ModelConfig(vocabulary_size=len(JOURNEY_TOKENS), context_size=len(JOURNEY_TOKENS),
                                 embedding_dim=3, heads_num=1))


# --------------------------------------------------------------------------------------------- 5. the model

@dataclass(eq=False)
class LensStage:
    """What the model would predict if it stopped here: the final norm and the unembedding on the residual stream
    at this point."""

    name: str  # "embeddings", "layer 0", ...
    top_ids: torch.Tensor  # (T, top) the most likely next tokens, most likely first
    top_probs: torch.Tensor  # (T, top) their probabilities
    next_probs: torch.Tensor  # (T-1,) the probability of the token that actually comes next in the text
    final_choice_probs: torch.Tensor  # (T,) the probability of the model's final top choice at this point


@dataclass(eq=False)
class LogitLens:
    stages: list[LensStage]  # embeddings, then after each block; the last is the model's own prediction

    @property
    def length(self) -> int:
        return self.stages[0].top_ids.size(0)


def _streams(model, ids: torch.Tensor) -> list[tuple[str, torch.Tensor]]:
    """The residual stream (1, T, C) after the embeddings and after each block (in eval mode, without gradients), the
    blocks' read at their named point hook_resid_post (any family)."""
    _, recorder = run_with_cache(model, ids[None], points={"hook_resid_post"})
    return [("embeddings", model.embed(ids[None]))] + [
        (f"layer {layer}", recorder[f"blocks.{layer}.hook_resid_post"]) for layer in range(model.config.layers_num)]


def logit_lens(model: GPT, token_ids: torch.Tensor, top: int = TOP) -> LogitLens:
    """The top ``top`` next tokens at every position after the embeddings and after each block.

    Each stage reads the residual stream through the model's final LayerNorm and LM head, so the last stage is
    exactly the model's output. Keeps only the top ``top`` per position, the probability of the text's own next
    token and of the model's final top choice: one stage's (T, V) probabilities are alive at a time.
    """
    ids = check_token_ids(model, token_ids)
    top = checks.whole_number(top, "top", 1, model.config.vocabulary_size)
    T = ids.numel()
    with evaluating(model):
        streams = _streams(model, ids)
        norm, unembed = model.final_norm(), model.unembed()

        def probabilities(stream: torch.Tensor) -> torch.Tensor:
            return F.softmax(unembed(norm(stream))[0].float(), dim=-1)  # (T, V)

        final = probabilities(streams[-1][1]).topk(1, dim=-1).indices[:, 0]  # (T,) the model's own top choice
        stages = []
        for name, stream in streams:
            probs = probabilities(stream)
            top_probs, top_ids = probs.topk(top, dim=-1)  # (T, top)
            next_probs = probs[torch.arange(T - 1, device=probs.device), ids[1:]]  # (T-1,)
            stages.append(LensStage(name, top_ids.cpu(), _cpu(top_probs), _cpu(next_probs),
                                    _cpu(probs.gather(1, final[:, None])[:, 0])))
    return LogitLens(stages)


@dataclass(eq=False)
class BlockLens:
    """What one position's residual stream would give as the next token at each point of a block where it is the
    stream (its input, after attention's add, after the MLP's add): the logit lens inside one block."""

    names: list[str]  # the walk's stream points, in order
    top_ids: torch.Tensor  # (points, top) the most likely next tokens, most likely first
    top_probs: torch.Tensor  # (points, top) their probabilities


def block_lens(model: GPT, walk: BlockWalk, position: int, top: int = BLOCK_TOP) -> BlockLens:
    """Read the stream at ``position`` after each of ``walk``'s stream points through the model's final LayerNorm
    and LM head, as logit_lens does between blocks: what attention, then the MLP, change in the guess, which shows
    what the output projection and the MLP add in the next character. Of the
    last block the last point is the model's own prediction, of any block the first is logit_lens's stage before it.
    """
    position = checks.index(position, "position", walk.points[0].values.size(0), "positions")
    top = checks.whole_number(top, "top", 1, model.config.vocabulary_size)
    points = [point for point in walk.points if point.stream]
    parameter = next(model.parameters())
    rows = torch.stack([point.values[position] for point in points]).to(parameter.device, parameter.dtype)
    with evaluating(model):
        probabilities = F.softmax(model.unembed()(model.final_norm()(rows[None]))[0].float(), dim=-1)  # (points, V)
    top_probs, top_ids = probabilities.topk(top, dim=-1)
    return BlockLens([point.name for point in points], top_ids.cpu(), _cpu(top_probs))


# --------------------------------------------------------------------------------------------- what a view costs

def view_cost(level: str, *, length: int, embedding_dim: int, heads_num: int, layers_num: int,
              vocabulary_size: int, parameters: int, heatmap_cells: int, bars: int = 0,
              forget_transpose: bool = False) -> budget.Cost:
    """Peak memory of one view of ``level`` on T = ``length`` tokens, from what the level runs (float32): a
    forward pass (budget.inference_cost), the level's own tensors and the figures.

      score, head   a pass up to the layer's normed input, no maps, no LM head (checkpoint_head_inputs stops there:
                    run_with_cache's stop_when_kept), then one head's trace: the tensors of
                    budget.attention_view_cost (its working space is the pass's)
      heads         a pass up to the layer, keeping its named points (run_with_cache, stop_when_kept), then
                    4 (h, T, T) and 4 (T, C);
                    forgetting the transpose adds 6 (T, C) floats (both joins and projections, and their CPU copies)
                    and FORGOTTEN_MAP_BYTES per (T, C) entry for the maps
      block         the stream up to the block, a pass without maps, then 5 (h, T, T), 12 (T, C) and 2 (T, 4C):
                    at most four float (h, T, T) and the dropout mask are alive at once (the masked scores, the
                    weights, the kept weights before and after their 1/(1-p)); the fifth is the allocator's room;
                    and block_lens's 2 (3, V) (the logits and their probabilities at three points)
      model         the stream after every block, a pass without maps, 3 (T, V) (one stage at a time), the stream
                    kept after every block (T, C) and their top lists

    Measured in memory-limited children with the forward pass and sampling (tests/test_inference_budget.py).
    """
    level = checks.choice(level, "level", LEVELS)
    T, C, h, V = length, embedding_dim, heads_num, vocabulary_size
    traced = level in ("score", "head")
    # every level's pass is without maps and stops before the LM head (the logit lens prices its own (T, V))
    forward = budget.inference_cost(parameters=parameters, layers_num=layers_num, heads_num=h, embedding_dim=C,
                                    context_size=T, vocabulary_size=0, attention_maps=False)
    f = budget.BYTES_PER_FLOAT
    if traced:
        trace = budget.attention_view_cost(length=T, embedding_dim=C, head_size=max(1, C // h))
        own = sum(size for name, size in trace.parts if name != "working space")
    else:
        own = {
            "heads": f * (4 * h * T * T + 4 * T * C) + forget_transpose * (6 * f + FORGOTTEN_MAP_BYTES) * T * C,
            "block": f * (5 * h * T * T + 12 * T * C + 2 * 4 * T * C + 2 * 3 * V),
            "model": f * (3 * T * V + (layers_num + 1) * T * C) + (layers_num + 1) * 16 * T * TOP,
        }[level]
    figures = heatmap_cells * budget.BYTES_PER_HEATMAP_CELL + bars * budget.BYTES_PER_BAR
    return budget.combined(f"this {level} view", forward,
                           budget.Cost("", (("the level's tensors", own), ("figures", figures))))
