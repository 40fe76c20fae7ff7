"""Why the model predicted a character: direct logit attribution, each head's QK and OV circuits, and heads knocked
out. The maths only, on both families (playground.model.gpt.GPT: the character models and the GPT-2 layout;
playground.model.llama.Llama: Llama, Qwen2, SmolLM2), read through family.py, and notebook 004's model; no figures,
no UI.

    logit_attribution(model, ids, position=9, target_id=1)   the target's logit split into the parts that wrote it:
                                                              the embeddings, every head, every MLP, the biases;
                                                              the parts sum to the model's logit (float32, 1e-4)
    logit_attributions(model, ids, target_ids)               the same at every position, from one pass
    logit_attributions(model, ids, target_ids, rival_ids)    logit(target) - logit(rival) split the same way: the
                                                              logit difference attribution (softmax is blind to a
                                                              shift, so a guess is made against its rivals)
    qk_circuit(model, layer=0, head=2)                        (V, V): the score query character i gives key character j
    qk_circuit(llama, layer=0, head=2, distance=3)            the same with rotary positions: the key 3 tokens back
    ov_circuit(model, layer=0, head=2)                        (V, V): the logits head writes when it attends to c
    key_contributions(model, ids, 9, 1, layer=0, head=2)      which attended tokens pushed the target, through it
    every_key_contribution(model, ids, attributions)          the same for every head at every position
    every_key_reading(model, ids, attributions)               and the step between: what each key writes, per unit
                                                              of weight, onto the target (weights x writes = shares)
    head_writes(model, ids)                                   (L, h, V): each head's mean share of every logit over
                                                              the text, centred: what it writes in general
    with ablated(model, [(0, 2)], mode="mean", token_ids=ids):  the model runs with head 2 of layer 0 knocked out
    head_effects(model, ids)                                  every head's knock-out: the loss it adds, ranked
    knock_outs(model, ids, [[(0, 2)], [(0, 2), (2, 1)]], targets)  each set knocked out in a row of one batch:
                                                              the loss, the guesses, p(target) at each position

Direct logit attribution works as TransformerLens's does: the residual stream after the last block is a sum of the
parts' outputs; the final LayerNorm is affine once its scale is frozen at the chosen position, so each part's
centred output, divided by that scale, times the norm's gain, read by the target's row of the LM head, is its share
of the logit. The norm's and the head's biases make one more part. A head's share is its output through its slice
of the output projection; the projection's bias is a part of its own. A Llama's final RMSNorm is read the same way,
its scale sqrt(mean(x²) + eps) frozen, without the centring; a grouped head's part is its own z through its own slice
of W_O (its V the shared K/V head's).

The circuits read token embeddings alone (no position), through the layer's first LayerNorm: for layers past the
first they are the direct path, as if the head read the embeddings straight from the input. With rotary positions
the QK circuit is taken at a distance between query and key.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from playground.config import NOTEBOOK_004
from playground.lens import family
from playground.lens.family import head_name
from playground.lens.family import overriding as _overriding
from playground.lens.family import recorder as _recorder
from playground.model.base import run_with_cache
from playground.model.gpt import GPT
from playground.model.modes import evaluating

ABLATION_MODES = ("zero", "mean")


class CircuitError(ValueError):
    """A circuit or attribution was asked for something the model does not have; the message says what."""


@dataclass(frozen=True)
class LogitAttribution:
    """The parts of one logit: ``values[i]`` is ``names[i]``'s share; ``values.sum()`` is ``logit``."""

    position: int
    target_id: int
    logit: float  # the model's own logit for the target at the position
    names: list[str]  # "token embedding", "position embedding", "L0 H2", "L0 attention bias", "L0 MLP", ...
    values: torch.Tensor  # (parts,) float32
    kinds: list[str]  # per part: "embedding", "head", "bias" or "mlp"
    scale: float  # the final LayerNorm's sqrt(var + eps) at the position, frozen
    # against a rival: the parts split logit(target) - logit(rival) (``logit`` is that difference); None: the logit
    rival_id: int | None = None

    def head(self, layer: int, head: int) -> float:
        return float(self.values[self.names.index(head_name(layer, head))])


def _check_position(position: int, length: int) -> int:
    if isinstance(position, bool) or not isinstance(position, int):
        raise CircuitError(f"position must be a whole number, got {position!r}")
    if not -length <= position < length:
        raise CircuitError(f"position {position} is outside the text's {length} tokens")
    return position % length


def _check_head(model: GPT, layer: int, head: int) -> None:
    config = model.config
    if not 0 <= layer < config.layers_num:
        raise CircuitError(f"layer {layer} is out of range: this model has {config.layers_num} layers (0 to "
                           f"{config.layers_num - 1})")
    if not 0 <= head < config.heads_num:
        raise CircuitError(f"head {head} is out of range: each layer has {config.heads_num} heads (0 to "
                           f"{config.heads_num - 1})")


def _check_token(model: GPT, token_id: int, what: str = "target") -> int:
    vocabulary = model.config.vocabulary_size
    if isinstance(token_id, bool) or not isinstance(token_id, int) or not 0 <= token_id < vocabulary:
        raise CircuitError(f"{what} id {token_id!r} is outside the vocabulary (0 to {vocabulary - 1})")
    return token_id


def _is_notebook(model) -> bool:
    """Notebook 004's attention-only model (architectures.NotebookLanguageModel): one layer of sliced heads, no
    residual, norm or MLP: logits = output(proj(heads side by side))."""
    return getattr(model.config, "architecture", "gpt") == NOTEBOOK_004


def _device(model) -> torch.device:
    return next(model.parameters()).device


def _attentions(model) -> list:
    """Each layer's attention module (notebook 004's model has one)."""
    return [model.attn] if _is_notebook(model) else [block.attn for block in model.blocks]


def _head_projections(model, layer: int, head: int) -> tuple:
    """(W_Q, W_K, W_V, b_Q, b_K, b_V) of one head, each W (C, d) applied as ``x @ W``. Notebook 004's head reads
    only its own slice of the features: its matrices are zero outside it, and it has no biases."""
    if not _is_notebook(model):
        return family.head_projections(model, layer, head)
    attention, d = model.attn, model.config.head_size
    features = slice(head * d, (head + 1) * d)
    full = []
    for linear in (attention.heads[head].query, attention.heads[head].key, attention.heads[head].value):
        matrix = torch.zeros(model.config.embedding_dim, d, device=linear.weight.device, dtype=linear.weight.dtype)
        matrix[features] = linear.weight.T
        full.append(matrix)
    return (*full, None, None, None)


def _layer_input(model, layer: int, x: torch.Tensor) -> torch.Tensor:
    """What a layer's heads read from ``x``: through its first norm (notebook 004's model has none: an identity)."""
    return family.attention_norm(model, layer)(x)


def _output_weight(model, layer: int) -> torch.Tensor:
    """(C, h·d): the weight that writes layer ``layer``'s heads, side by side, into the stream."""
    return family.output_projection(model, layer).weight


def _unembedding(model) -> torch.nn.Linear:
    return model.unembed()


def _read_layers(model, ids: torch.Tensor) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """(what each layer's attention read (1, T, C), each layer's weights (1, h, T, T)), read at the named points
    ln1.hook_normalized and attn.hook_pattern of every layer (model.base.run_with_cache), any family."""
    _, points = run_with_cache(model, ids, {"ln1.hook_normalized", "attn.hook_pattern"})
    layers = range(model.config.layers_num)
    return ([points[f"blocks.{layer}.ln1.hook_normalized"] for layer in layers],
            [points[f"blocks.{layer}.attn.hook_pattern"] for layer in layers])


def _parts_of_the_stream(model: GPT, token_ids: torch.Tensor) -> tuple[list[str], list[str], torch.Tensor,
                                                                       torch.Tensor]:
    """Every part's output at every position, (parts, T, C), and the final residual stream, (T, C) (family.py's
    stream_parts; notebook 004's model has no stream: _notebook_parts)."""
    ids = token_ids.view(1, -1)  # (1, T)
    if _is_notebook(model):
        return _notebook_parts(model, ids)
    return family.stream_parts(model, ids)


def _notebook_parts(model, ids: torch.Tensor) -> tuple[list[str], list[str], torch.Tensor, torch.Tensor]:
    """Notebook 004's model has no residual stream: what its output layer reads is proj(heads side by side), so the
    parts are each head through its slice of proj, and proj's bias; the embeddings reach the output only through
    the heads. (parts, T, C) and what the output reads, (T, C)."""
    d = model.config.head_size
    joined: list[torch.Tensor] = []
    with _overriding({model.attn: _recorder(joined)}):
        read = model.attn(model.embed(ids))[0]  # (T, C)
    proj = model.attn.proj
    names, kinds, parts = [], [], []
    for head in range(model.config.heads_num):
        features = slice(head * d, (head + 1) * d)
        names.append(head_name(0, head))
        kinds.append("head")
        parts.append(joined[0][0][:, features] @ proj.weight[:, features].T)  # (T, C)
    names.append("L0 attention bias")
    kinds.append("bias")
    parts.append(proj.bias.expand(ids.size(1), -1))
    return names, kinds, torch.stack(parts), read


def _frozen_norm(model, stream: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The final norm on the stream (T, C) with its scale frozen at each position: (scale (T,), gain (C,)). A part's
    share reads (part - its mean, for a GPT's LayerNorm) / scale * gain through the LM head."""
    norm = family.final_norm(model)
    return family.frozen_scale(norm, stream), family.gain(norm, stream.size(1), stream.device)


def _final_read(model, stream: torch.Tensor, targets: torch.Tensor,
                rivals: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, bool, torch.Tensor,
                                                             torch.Tensor]:
    """How each position's stream (T, C) becomes its target's logit: (scale (T,), readers (T, C), centred, the
    constant (T,), the logits (T,)). A GPT: its final LayerNorm, affine once its scale is frozen, then the LM head
    (logit = centred stream / scale · reader + constant); a Llama the same through its RMSNorm, not centred.
    Notebook 004's model: its output layer alone (scale 1, not centred). ``rivals`` (T,): each position's reading
    is the target's minus its rival's (the readers, the constants and the logits alike: the read is linear in the
    LM head's row once the scale is frozen)."""
    if rivals is not None:
        scale, readers, centred, constant, logits = _final_read(model, stream, targets)
        _, rival_readers, _, rival_constant, rival_logits = _final_read(model, stream, rivals)
        return scale, readers - rival_readers, centred, constant - rival_constant, logits - rival_logits
    T = stream.size(0)
    head = _unembedding(model)
    constant = torch.zeros(T, device=stream.device)
    if head.bias is not None:
        constant = constant + head.bias[targets]
    if _is_notebook(model):
        logits = head(stream).gather(1, targets.view(T, 1))[:, 0]
        return torch.ones(T, device=stream.device), head.weight[targets], False, constant, logits
    norm = family.final_norm(model)
    scale, gain = _frozen_norm(model, stream)
    if family.norm_bias(norm) is not None:
        constant = constant + head.weight[targets] @ norm.bias
    logits = head(norm(stream)).gather(1, targets.view(T, 1))[:, 0]  # (T,)
    return scale, head.weight[targets] * gain, family.centres(model), constant, logits


def _has_constant(model) -> bool:
    if _is_notebook(model):
        return model.output.bias is not None
    return family.norm_bias(family.final_norm(model)) is not None or _unembedding(model).bias is not None


def _checked_ids(model: GPT, token_ids: torch.Tensor) -> torch.Tensor:
    ids = torch.as_tensor(token_ids).view(-1)
    if ids.numel() == 0:
        raise CircuitError("the text is empty: there is no position to explain")
    if ids.numel() > model.config.context_size:
        raise CircuitError(f"the text is {ids.numel()} tokens; this model reads at most {model.config.context_size}")
    return ids.to(_device(model))


def logit_attributions(model: GPT, token_ids: torch.Tensor, target_ids, rival_ids=None) -> list[LogitAttribution]:
    """logit_attribution at every position of ``token_ids`` (T,) at once, from one pass: ``target_ids`` (T,) is the
    target after each position. The page sends them all, so a new position is drawn without asking the server.
    ``rival_ids`` (T,): split logit(target) - logit(rival) instead, each part's share being its share of the
    target's logit minus its share of the rival's (the biases too): the parts sum to the difference."""
    ids = _checked_ids(model, token_ids)
    T = ids.numel()
    targets = [_check_token(model, int(t)) for t in torch.as_tensor(target_ids).view(-1).tolist()]
    if len(targets) != T:
        raise CircuitError(f"give one target per position: {len(targets)} targets for {T} positions")
    rivals = None
    if rival_ids is not None:
        rivals = [_check_token(model, int(t), "rival") for t in torch.as_tensor(rival_ids).view(-1).tolist()]
        if len(rivals) != T:
            raise CircuitError(f"give one rival per position: {len(rivals)} rivals for {T} positions")
    with evaluating(model):
        names, kinds, parts, stream = _parts_of_the_stream(model, ids)  # (P, T, C), (T, C)
        target_index = torch.tensor(targets, device=stream.device)
        rival_index = torch.tensor(rivals, device=stream.device) if rivals is not None else None
        scale, readers, centred, constant, logits = _final_read(model, stream, target_index, rival_index)
        if centred:
            parts = parts - parts.mean(dim=-1, keepdim=True)
        values = torch.einsum("ptc,tc->pt", parts, readers) / scale  # (P, T)
        if _has_constant(model):
            names.append("final norm and LM head biases" if not _is_notebook(model) else "output bias")
            kinds.append("bias")
            values = torch.cat([values, constant.view(1, T)])
    values = values.float().cpu()
    return [LogitAttribution(p, targets[p], float(logits[p]), list(names), values[:, p].clone(), list(kinds),
                             float(scale[p]), rivals[p] if rivals is not None else None) for p in range(T)]


def logit_attribution(model: GPT, token_ids: torch.Tensor, position: int, target_id: int,
                      rival_id: int | None = None) -> LogitAttribution:
    """The logit of ``target_id`` after ``token_ids[: position + 1]`` split into the parts that wrote it; with
    ``rival_id``, logit(target) - logit(rival) split the same way (TransformerLens's logit difference).

    ``token_ids`` is (T,) or (1, T), T at most the model's context. Runs in eval mode without gradients.
    """
    ids = _checked_ids(model, token_ids)
    position = _check_position(position, ids.numel())
    target_id = _check_token(model, target_id)
    rivals = None if rival_id is None else [_check_token(model, rival_id, "rival")] * ids.numel()
    # the one reading: every position's, from one pass, as the page gets them (_final_read holds the final norm's
    # frozen scale and the LM head's reading for both kinds of model)
    return logit_attributions(model, ids, [target_id] * ids.numel(), rivals)[position]


def key_contributions(model: GPT, token_ids: torch.Tensor, position: int, target_id: int, layer: int,
                      head: int, attribution: LogitAttribution | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Which attended tokens pushed the target up through one head: (its attention weights at ``position``,
    each key's share of the head's part of the logit), both (T,). Key j's share is its weight times what the head
    writes from it (its value through the head's slice of W_O), read as logit_attribution reads a part; the shares
    sum to the head's part. ``attribution``: this position's and target's, when the caller has it already (one made
    against a rival: the shares are of the logit difference)."""
    _check_head(model, layer, head)
    ids = torch.as_tensor(token_ids).view(1, -1).to(_device(model))
    if attribution is None or (attribution.position, attribution.target_id) != (position % ids.size(1), target_id):
        attribution = logit_attribution(model, ids, position, target_id)
    position = attribution.position
    with evaluating(model):
        inputs, patterns = _read_layers(model, ids)
        x = inputs[layer][0]  # (T, C): what the layer's attention read
        weights = patterns[layer][0, head, position]  # (T,)
        _, _, w_value, _, _, b_value = _head_projections(model, layer, head)
        values = x @ w_value + (b_value if b_value is not None else 0)  # (T, d)
        d = model.config.head_size
        written = values @ _output_weight(model, layer)[:, head * d:(head + 1) * d].T  # (T, C)
        reader = _readers(model, torch.tensor([target_id], device=ids.device))[0]  # (C,)
        if attribution.rival_id is not None:  # an attribution against a rival: its keys read the difference
            reader = reader - _readers(model, torch.tensor([attribution.rival_id], device=ids.device))[0]
        if _is_notebook(model):
            shares = weights * (written @ reader)  # (T,)
        else:
            if family.centres(model):
                written = written - written.mean(dim=1, keepdim=True)
            shares = weights * ((written / attribution.scale) @ reader)  # (T,)
    return weights, shares


def _readers(model, targets: torch.Tensor) -> torch.Tensor:
    """(T, C): the rows that read a centred, scaled stream into each target's logit (the final norm's gain times the
    LM head's row; notebook 004's output row, no norm between)."""
    if _is_notebook(model):
        return model.output.weight[targets]
    gain = family.gain(family.final_norm(model), model.config.embedding_dim, targets.device)
    return _unembedding(model).weight[targets] * gain


def every_key_contribution(model: GPT, token_ids: torch.Tensor, attributions: Sequence[LogitAttribution],
                           heads: Sequence[tuple[int, int]] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """key_contributions for every head at every position, from one pass: (attention weights, shares), both
    (layers, heads, T queries, T keys); ``attributions``: logit_attributions' list (each position's target and
    frozen scale). Row [l, h, p] of the shares sums to head h of layer l's part at position p. ``heads``: only
    these (layer, head), in this order: (len(heads), T, T) (GPT-2's 144 heads would hold 75 MB for 256 tokens)."""
    weights, _, shares = every_key_reading(model, token_ids, attributions, heads)
    return weights, shares


def head_writes(model: GPT, token_ids: torch.Tensor) -> torch.Tensor:
    """(layers, heads, V): what each head writes onto every token's logit, averaged over the text's positions, read as
    logit_attributions reads a part (a GPT's final norm with its scale frozen at each position, then the LM head;
    notebook 004's output layer alone) and centred over the vocabulary: entry t is the head's mean share of logit(t)
    less its mean share over every token (softmax ignores what every logit shares). What a head writes in general,
    beside what it wrote at one position."""
    ids = _checked_ids(model, token_ids)
    config = model.config
    notebook = _is_notebook(model)
    with evaluating(model):
        _, kinds, parts, stream = _parts_of_the_stream(model, ids)  # (P, T, C), (T, C)
        heads = parts[[i for i, kind in enumerate(kinds) if kind == "head"]]  # (L * h, T, C), layer by layer
        if notebook:
            read = heads.mean(dim=1)  # (L * h, C): the output layer reads them as they are
        else:
            scale, gain = _frozen_norm(model, stream)
            if family.centres(model):
                heads = heads - heads.mean(dim=-1, keepdim=True)
            read = (heads / scale[None, :, None]).mean(dim=1) * gain
        logits = read @ _unembedding(model).weight.T  # (L * h, V)
        logits = logits - logits.mean(dim=-1, keepdim=True)
    layers = 1 if notebook else config.layers_num
    return logits.view(layers, config.heads_num, -1).float().cpu()


def every_key_reading(model: GPT, token_ids: torch.Tensor, attributions: Sequence[LogitAttribution],
                      heads: Sequence[tuple[int, int]] | None = None) -> tuple[torch.Tensor, torch.Tensor,
                                                                               torch.Tensor]:
    """every_key_contribution with the step between: (attention weights, writes, shares), each (layers, heads,
    T queries, T keys) (or (len(heads), T, T)). ``writes[l, h, p, j]`` is what head h of layer l writes from key j
    onto position p's target per unit of weight: key j's value through the head's slice of W_O, read as
    logit_attribution reads a part (centred, over p's frozen scale, by the target's row). ``shares`` is
    ``weights * writes``, the very float32 product, so a row of shares sums to the head's part at p (1e-4).

    A worked row: weights (0.7, 0.3), writes (+2.0, -1.0) -> shares (+1.4, -0.3) -> the head's part +1.1."""
    ids = _checked_ids(model, token_ids).view(1, -1)
    T = ids.size(1)
    if [a.position for a in attributions] != list(range(T)):
        raise CircuitError("give the attributions of every position, in order (logit_attributions)")
    config = model.config
    d = config.head_size
    every = heads is None
    if every:
        heads = [(layer, head) for layer in range(config.layers_num) for head in range(config.heads_num)]
    for layer, head in heads:
        _check_head(model, layer, head)
    weights = torch.zeros(len(heads), T, T)
    shares = torch.zeros_like(weights)
    writes = torch.zeros_like(weights)
    with evaluating(model):
        inputs, patterns = _read_layers(model, ids)
        device = ids.device
        targets = torch.tensor([a.target_id for a in attributions], device=device)
        centred = not _is_notebook(model) and family.centres(model)
        readers = _readers(model, targets)  # (T queries, C)
        if any(a.rival_id is not None for a in attributions):  # the difference's reader: the target's - the rival's
            rivals = torch.tensor([a.rival_id if a.rival_id is not None else a.target_id for a in attributions],
                                  device=device)
            readers = readers - _readers(model, rivals)
        scales = torch.tensor([a.scale for a in attributions], device=device)  # (T,)
        for i, (layer, head) in enumerate(heads):
            x = inputs[layer][0]  # (T, C)
            proj = _output_weight(model, layer)
            _, _, w_value, _, _, b_value = _head_projections(model, layer, head)
            values = x @ w_value + (b_value if b_value is not None else 0)  # (T, d)
            written = values @ proj[:, head * d:(head + 1) * d].T  # (T keys, C)
            if centred:
                written = written - written.mean(dim=1, keepdim=True)
            push = written @ readers.T / scales  # (T keys, T queries)
            attended = patterns[layer][0, head]  # (T queries, T keys)
            weights[i] = attended.float().cpu()
            writes[i] = push.T.float().cpu()  # (T queries, T keys)
            shares[i] = (attended * push.T).float().cpu()
    if every:
        shape = (config.layers_num, config.heads_num, T, T)
        return weights.view(shape), writes.view(shape), shares.view(shape)
    return weights, writes, shares


def strongest_pairs(table: torch.Tensor, count: int = 5, among=None) -> list[tuple[int, int, float]]:
    """The ``count`` largest entries of a (rows, columns) table, largest first: (row, column, value).

    ``among`` (indices): only rows and columns among them, as the table numbers them. A token the model never saw
    in training keeps its random embedding, whose circuit entries can be the table's largest and mean nothing: the
    Why view lists pairs among the characters of the learner's text.
    """
    if among is not None:
        kept = torch.as_tensor(sorted(set(int(i) for i in among)), dtype=torch.long)
        inner = strongest_pairs(table[kept][:, kept], count)
        return [(int(kept[row]), int(kept[column]), value) for row, column, value in inner]
    flat = table.reshape(-1)
    top = torch.topk(flat, min(count, flat.numel()))
    columns = table.size(1)
    return [(int(i) // columns, int(i) % columns, float(v)) for v, i in zip(top.values, top.indices)]


def _embeddings_through(model: GPT, layer: int, tokens: torch.Tensor | None) -> torch.Tensor:
    """The embeddings of ``tokens`` (every token when None) alone, through layer ``layer``'s first LayerNorm:
    (n, C)."""
    table = model.token_emb.weight if _is_notebook(model) else model.token_embedding.weight
    return _layer_input(model, layer, table if tokens is None else table[tokens])


def _check_tokens(model: GPT, tokens: torch.Tensor | None) -> torch.Tensor | None:
    if tokens is None:
        return None
    tokens = torch.as_tensor(tokens, dtype=torch.long).view(-1)
    if tokens.numel() == 0 or int(tokens.min()) < 0 or int(tokens.max()) >= model.config.vocabulary_size:
        raise CircuitError(f"the tokens must be ids in 0 to {model.config.vocabulary_size - 1}")
    return tokens.to(_device(model))


DEFAULT_DISTANCE = 1  # a rotary head's QK circuit, unless the caller picks: the key one token before the query


def _check_distance(model, distance: int | None) -> int | None:
    """A rotary model's distance (a whole number from 0 to context - 1; None: DEFAULT_DISTANCE); a GPT's is None:
    its positions are embeddings the circuit leaves out, not a rotation."""
    if not family.is_rotary(model):
        if distance is not None:
            raise CircuitError("this model's positions are learned embeddings, not a rotation: its QK circuit has no "
                               "distance (leave it out)")
        return None
    distance = DEFAULT_DISTANCE if distance is None else distance
    context = model.config.context_size
    if isinstance(distance, bool) or not isinstance(distance, int) or not 0 <= distance < context:
        raise CircuitError(f"the distance between query and key must be a whole number from 0 to {context - 1} (the "
                           f"key that many tokens before the query), got {distance!r}")
    return distance


def qk_circuit(model: GPT, layer: int, head: int, tokens: torch.Tensor | None = None,
               distance: int | None = None) -> torch.Tensor:
    """(V, V): the scaled score a query of token i gives a key of token j in head ``head`` of ``layer``, from the
    token embeddings alone (no position) through the layer's norm, W_Q and W_K (with their biases). ``tokens``
    (n,) ids: only those rows and columns, (n, n) (a BPE vocabulary's (V, V) would take gigabytes).

    With rotary positions (the Llama family) a score depends on how far the key sits before the query, so the
    circuit is drawn at ``distance`` (default DEFAULT_DISTANCE): q turned by its position p, k by p - distance,
    which is q turned by ``distance`` against an unturned k (the rotation matrix R(distance) between W_Q and W_K^T).
    A grouped head's W_K is its shared K/V head's. A GPT takes no distance."""
    _check_head(model, layer, head)
    tokens = _check_tokens(model, tokens)
    distance = _check_distance(model, distance)
    with evaluating(model):
        x = _embeddings_through(model, layer, tokens)  # (n, C)
        w_query, w_key, _, b_query, b_key, _ = _head_projections(model, layer, head)
        q = x @ w_query + (b_query if b_query is not None else 0)  # (V, d)
        k = x @ w_key + (b_key if b_key is not None else 0)
        if distance is not None:  # R(p - distance)^T R(p) = R(distance): only the distance turns
            q = family.rotate(model, q, torch.tensor([distance], device=q.device))
        return (q @ k.T) / math.sqrt(model.config.head_size)  # (V, V)


def ov_circuit(model: GPT, layer: int, head: int, tokens: torch.Tensor | None = None) -> torch.Tensor:
    """(V, V): row c is the logits head ``head`` of ``layer`` writes when it attends to token c alone, from c's
    embedding through the layer's norm, W_V (with its bias), the head's slice of W_O, the final norm and the LM head.
    Each row is that head's output read as if it were the whole stream (the final norm on it alone). ``tokens``
    (n,) ids: only those rows and those logits, (n, n)."""
    _check_head(model, layer, head)
    tokens = _check_tokens(model, tokens)
    with evaluating(model):
        x = _embeddings_through(model, layer, tokens)  # (n, C)
        _, _, w_value, _, _, b_value = _head_projections(model, layer, head)  # a grouped head: its K/V head's W_V
        v = x @ w_value + (b_value if b_value is not None else 0)  # (V, d)
        d = model.config.head_size
        written = v @ _output_weight(model, layer)[:, head * d:(head + 1) * d].T  # (n, C)
        if _is_notebook(model):  # straight into the output layer, without its bias (the same for every row)
            logits = written @ model.output.weight.T  # (n, V)
        else:
            logits = _unembedding(model)(family.final_norm(model)(written))  # (n, V)
        return logits if tokens is None else logits[:, tokens]  # (n, n)


def _heads_by_layer(model: GPT, heads: Iterable[tuple[int, int]]) -> dict[int, list[int]]:
    chosen: dict[int, list[int]] = {}
    for layer, head in heads:
        _check_head(model, layer, head)
        chosen.setdefault(layer, []).append(head)
    return chosen


def head_means(model: GPT, token_ids: torch.Tensor) -> list[torch.Tensor]:
    """Per layer, the heads' outputs side by side (before the output projection) averaged over every position of
    ``token_ids`` ((T,) or (B, T)): (C,) each."""
    ids = torch.as_tensor(token_ids)
    ids = ids.view(1, -1) if ids.dim() == 1 else ids
    attentions = _attentions(model)
    joined: list[list[torch.Tensor]] = [[] for _ in attentions]
    with _overriding({attn: _recorder(joined[i]) for i, attn in enumerate(attentions)}), evaluating(model):
        model(ids.to(_device(model)))
    return [outputs[0].mean(dim=(0, 1)) for outputs in joined]


def _knock_out(joined: torch.Tensor, layer: int, head: int, head_size: int, means: list[torch.Tensor] | None):
    """Head ``head``'s features of ``joined`` (..., C), in place: zeros, or their mean over a text (``means``)."""
    features = slice(head * head_size, (head + 1) * head_size)
    joined[..., features] = 0.0 if means is None else means[layer][features]


@contextmanager
def ablated(model: GPT, heads: Sequence[tuple[int, int]], mode: str = "zero",
            token_ids: torch.Tensor | None = None, means: list[torch.Tensor] | None = None) -> Iterator[GPT]:
    """Inside, ``model`` runs with each (layer, head) in ``heads`` knocked out: its output, before the output
    projection, replaced by zeros ("zero") or by its mean over ``token_ids`` ("mean", which needs them, or
    ``means``: head_means of them, computed before). Only this thread's forward passes change
    (model.HEADS_OUTPUT_OVERRIDES): the weights are untouched, and another request running the same model meanwhile
    sees it intact."""
    if mode not in ABLATION_MODES:
        raise CircuitError(f"ablation mode {mode!r} is not one of {', '.join(ABLATION_MODES)}")
    chosen = _heads_by_layer(model, heads)
    if mode == "mean" and token_ids is None and means is None:
        raise CircuitError("mean ablation needs the text whose mean replaces the heads (token_ids)")
    if mode == "mean" and means is None:
        means = head_means(model, token_ids)
    elif mode == "zero":
        means = None
    d = model.config.head_size

    def replace(layer: int):
        def knock_out(joined: torch.Tensor) -> torch.Tensor:
            joined = joined.clone()  # (B, T, C)
            for head in chosen[layer]:
                _knock_out(joined, layer, head, d, means)
            return joined
        return knock_out

    with _overriding({_attentions(model)[layer]: replace(layer) for layer in chosen}):
        yield model


@dataclass(frozen=True)
class HeadEffect:
    layer: int
    head: int
    loss: float  # the loss on the text with this head knocked out
    added: float  # that minus the intact model's loss: how much the text needed this head


def text_loss(model: GPT, token_ids: torch.Tensor) -> float:
    """The mean next-token cross-entropy over ``token_ids`` (T,) (each token predicting the next)."""
    ids = torch.as_tensor(token_ids).view(1, -1).to(_device(model))
    if ids.size(1) < 2:
        raise CircuitError("the text needs at least two tokens to have a next token to predict")
    with evaluating(model):
        logits = model(ids[:, :-1]).logits  # (1, T-1, V)
        return float(F.cross_entropy(logits[0], ids[0, 1:]))


def head_effects(model: GPT, token_ids: torch.Tensor, mode: str = "mean") -> list[HeadEffect]:
    """Every head knocked out alone, the loss on ``token_ids`` each time; the most needed head first.

    One forward pass for all of them: the text repeated once per head, row r of the batch with head r knocked out.
    """
    if mode not in ABLATION_MODES:
        raise CircuitError(f"ablation mode {mode!r} is not one of {', '.join(ABLATION_MODES)}")
    intact = text_loss(model, token_ids)
    layers, heads, d = model.config.layers_num, model.config.heads_num, model.config.head_size
    ids = torch.as_tensor(token_ids).view(1, -1).to(_device(model))
    means = head_means(model, ids) if mode == "mean" else None
    rows = layers * heads  # row r knocks out head r % heads of layer r // heads

    def replace(layer: int):
        def knock_out(joined: torch.Tensor) -> torch.Tensor:
            joined = joined.clone()  # (rows, T, C)
            for head in range(heads):
                _knock_out(joined[layer * heads + head], layer, head, d, means)  # its own row of the batch
            return joined
        return knock_out

    with _overriding({attn: replace(layer) for layer, attn in enumerate(_attentions(model))}), evaluating(model):
        batch = ids[:, :-1].expand(rows, -1)  # (rows, T-1)
        logits = model(batch).logits  # (rows, T-1, V)
        losses = F.cross_entropy(logits.transpose(1, 2), ids[:, 1:].expand(rows, -1), reduction="none").mean(1)
    effects = [HeadEffect(r // heads, r % heads, float(loss), float(loss) - intact) for r, loss in enumerate(losses)]
    return sorted(effects, key=lambda effect: -effect.added)


@dataclass(frozen=True)
class KnockOut:
    """The model on one text with a set of heads knocked out: what a learner compares with the intact model."""

    heads: tuple[tuple[int, int], ...]
    loss: float | None  # the mean next-token cross-entropy over the text; None for a text of one token
    guesses: list[int]  # (T,): the most likely next token after each position
    target_probabilities: list[float]  # (T,): the probability of each position's target


KNOCK_OUT_LOGITS = 1 << 24  # logits held at once (64 MB of float32): rows of the batch run in chunks that fit


def knock_outs(model: GPT, token_ids: torch.Tensor, head_sets: Sequence[Sequence[tuple[int, int]]], target_ids,
               mode: str = "mean", means: list[torch.Tensor] | None = None) -> list[KnockOut]:
    """Each set of (layer, head) in ``head_sets`` knocked out as ``ablated`` knocks them out, in its own row of one
    batch: per set, the loss on ``token_ids`` (T,), the guess after each position and the probability of each
    position's target (``target_ids``, (T,)). ``means``: head_means of the text, computed before (mode "mean").

    A set of one head per row gives every head's knock-out at once (head_effects' losses, and what the page shows
    when one head is ticked); rows run in chunks of at most KNOCK_OUT_LOGITS logits.
    """
    if mode not in ABLATION_MODES:
        raise CircuitError(f"ablation mode {mode!r} is not one of {', '.join(ABLATION_MODES)}")
    ids = _checked_ids(model, token_ids).view(1, -1)  # (1, T)
    T = ids.size(1)
    targets = torch.as_tensor(target_ids, dtype=torch.long).view(-1).to(ids.device)
    if targets.numel() != T:
        raise CircuitError(f"give one target per position: {targets.numel()} targets for {T} positions")
    sets = [tuple((int(layer), int(head)) for layer, head in heads) for heads in head_sets]
    for heads in sets:
        _heads_by_layer(model, heads)
    means = (means if means is not None else head_means(model, ids)) if mode == "mean" else None
    d = model.config.head_size
    rows_at_once = max(1, KNOCK_OUT_LOGITS // (T * model.config.vocabulary_size))
    results: list[KnockOut] = []
    for start in range(0, len(sets), rows_at_once):
        chunk = sets[start:start + rows_at_once]

        def replace(layer: int, chunk=chunk):
            def knock_out(joined: torch.Tensor) -> torch.Tensor:
                joined = joined.clone()  # (rows, T, C)
                for row, heads in enumerate(chunk):
                    for knocked_layer, head in heads:
                        if knocked_layer == layer:
                            _knock_out(joined[row], layer, head, d, means)  # its own row of the batch
                return joined
            return knock_out

        with _overriding({attn: replace(layer) for layer, attn in enumerate(_attentions(model))}), \
                evaluating(model):
            logits = model(ids.expand(len(chunk), -1)).logits.float()  # (rows, T, V)
            losses = (F.cross_entropy(logits[:, :-1].transpose(1, 2), ids[:, 1:].expand(len(chunk), -1),
                                      reduction="none").mean(1).tolist() if T > 1 else [None] * len(chunk))
            probabilities = torch.softmax(logits, dim=-1)  # (rows, T, V)
            chosen = probabilities.gather(2, targets.view(1, T, 1).expand(len(chunk), T, 1))[..., 0]  # (rows, T)
            guesses = logits.argmax(dim=-1)  # (rows, T)
        results += [KnockOut(heads, loss, guesses[row].tolist(), chosen[row].cpu().tolist())
                    for row, (heads, loss) in enumerate(zip(chunk, losses))]
    return results
