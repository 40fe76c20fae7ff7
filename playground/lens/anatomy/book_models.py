"""The notebooks' own models, seen from inside: notebook 002's encoder layer, 003's two-layer transformer and 004's
attention-only model with sliced heads, on the learner's text or on the notebook's own inputs.

For each: every head's attention weights, which input features each head reads (004's heads read only their
slice of the embedding, GPT's and 002/003's read all of it), and the tensors' shapes step by step beside the
shapes the notebook prints or writes in its comments. The classes are playground.textbook's, built with seeded,
untrained weights (the Train tab trains models). Sizes are fixed here, so a view's cost is too.
Knows nothing about figures or the UI.

    book_model("004", "hello world", own_inputs=True).weights[0].shape -> (2, 8, 8)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from playground import checks
from playground.textbook import notebook_000, notebook_002, notebook_003, notebook_004

BOOK_MODELS = {
    "002": "notebook 002's encoder layer",
    "003": "notebook 003's two-layer transformer",
    "004": "notebook 004's sliced heads",
}
MAX_TOKENS = 64  # characters of the learner's text a book model reads (the view's size never grows past it)
SEED = 1337  # notebook 004's torch.manual_seed; the same seed builds every book model
LAB_TEXT = "hello world"

# What notebook 002 prints for its own sizes (batch 30, 200 tokens, d_model 512, 8 heads): one encoder layer's lines
NOTEBOOK_002_PRINTED = (
    ("x.size()", "torch.Size([30, 200, 512])"),
    ("qkv.size", "torch.Size([30, 200, 1536])"),
    ("qkv.size", "torch.Size([30, 200, 8, 192])"),
    ("q.size", "torch.Size([30, 8, 200, 64])"),
    ("scaled.size()", "torch.Size([30, 8, 200, 200])"),
    ("attention.size()", "torch.Size([30, 8, 200, 200])"),
    ("values.size()", "torch.Size([30, 8, 200, 64])"),
    ("values.size()", "torch.Size([30, 200, 512])"),
    ("out.size()", "torch.Size([30, 200, 512])"),
)


@dataclass(frozen=True)
class ShapeRow:
    step: str  # the tensor, in the notebook's words
    notebook: str  # what the notebook prints or writes in its comments
    here: tuple[int, ...]  # the shape the same tensor has in this view


@dataclass(frozen=True)
class BookModel:
    notebook: str  # "002", "003" or "004"
    title: str
    tokens: list[str]  # the characters the model read, in order
    weights: list[torch.Tensor]  # per layer (h, T, T), each row summing to 1
    causal: bool
    reads: torch.Tensor  # (h, C): 1 where head i's queries, keys and values read input feature c
    shapes: list[ShapeRow]
    description: str  # the sizes and where the weights come from
    notes: list[str]



def _seeded_build(build):
    """``build()`` after ``torch.manual_seed(SEED)``, the global RNG state restored afterwards; in eval mode."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED)
        return build().eval()


def _text_ids(text: str) -> tuple[notebook_000.CharTokenizer, torch.Tensor, list[str], list[str]]:
    """The first MAX_TOKENS characters of ``text`` as ids over their own sorted characters, and a note if cut."""
    if not text:
        raise ValueError("the text is empty: type a few characters for the book's model to read")
    shown = text[:MAX_TOKENS]
    tokenizer = notebook_000.CharTokenizer.train_from_text(shown)
    notes = [f"The book's models read the first {MAX_TOKENS} characters of the text."] if len(text) > MAX_TOKENS else []
    return tokenizer, tokenizer.encode(shown).view(1, -1), list(shown), notes


def _all_features(heads: int, width: int) -> torch.Tensor:
    return torch.ones(heads, width)


def encoder_layer(text: str, own_inputs: bool) -> BookModel:
    """Notebook 002's EncoderLayer, unmasked and post-norm, with its fused per-head qkv_layer.

    Own inputs: the notebook's sizes (200 tokens of torch.randn, d_model 512, 8 heads, ffn_hidden 2048), one
    sequence instead of its batch of 30. The learner's text: d_model 16, 4 heads, ffn_hidden 32, each character
    embedded by a seeded table (the notebook starts from embeddings and has none).
    """
    if own_inputs:
        d_model, heads, hidden, T = 512, 8, 2048, 200
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(SEED)
            x = torch.randn(1, T, d_model)  # the notebook's x = torch.randn((batch_size, max_sequence_length, d_model))
        tokens, notes = [f"x{t}" for t in range(T)], []
        source = "the notebook's sizes on torch.randn inputs (batch 1 here, 30 in the notebook)"
    else:
        d_model, heads, hidden = 16, 4, 32
        tokenizer, ids, tokens, notes = _text_ids(text)
        table = _seeded_build(lambda: torch.nn.Embedding(tokenizer.vocabulary_size(), d_model))
        with torch.no_grad():
            x = table(ids)  # (1, T, d_model)
        T = ids.size(1)
        source = f"your text's {T} characters, embedded by a seeded table"
    layer = _seeded_build(lambda: notebook_002.EncoderLayer(d_model, hidden, heads, drop_prob=0.1))
    attention = layer.attention
    with torch.no_grad():
        qkv = attention.qkv_layer(x)  # (1, T, 3·d_model)
        q, k, v = attention.queries_keys_values(x)  # (1, h, T, d)
        values, weights = notebook_002.scaled_dot_product(q, k, v)
        joined = notebook_002.combine_heads(values)
        out = attention.linear_layer(joined)
    here = [x.shape, qkv.shape, (1, T, heads, 3 * attention.head_dim), q.shape, weights.shape, weights.shape,
            values.shape, joined.shape, out.shape]
    shapes = [ShapeRow(step, printed, tuple(shape)) for (step, printed), shape in zip(NOTEBOOK_002_PRINTED, here)]
    return BookModel("002", BOOK_MODELS["002"], tokens, [weights[0]], False, _all_features(heads, d_model), shapes,
                     f"EncoderLayer(d_model={d_model}, ffn_hidden={hidden}, num_heads={heads}, drop_prob=0.1), "
                     f"seeded (torch.manual_seed({SEED})), untrained; {source}", notes)


def two_layer(text: str, own_inputs: bool) -> BookModel:
    """Notebook 003's TwoLayerTransformer, causal, on the learner's text: its default sizes (d_model 256, 4 heads,
    d_ff 1024, max_seq_len 512) as its own, or a small one (d_model 16, 4 heads, d_ff 32)."""
    tokenizer, ids, tokens, notes = _text_ids(text)
    T = ids.size(1)
    sizes = dict(d_model=256, num_heads=4, d_ff=1024, max_seq_len=512) if own_inputs else dict(
        d_model=16, num_heads=4, d_ff=32, max_seq_len=MAX_TOKENS)
    model = _seeded_build(lambda: notebook_003.TwoLayerTransformer(tokenizer.vocabulary_size(), dropout=0.1, **sizes))
    with torch.no_grad():
        x = model.embed(ids)  # (1, T, d_model)
        mask = model.create_causal_mask(T, x.device)
        first = model.layer1.attention.attention_weights(x, x, mask)  # (1, h, T, T)
        after_first = model.layer1(x, mask)
        second = model.layer2.attention.attention_weights(after_first, after_first, mask)
        logits = model.output_projection(model.layer2(after_first, mask))  # the rest of forward, not it again
    d, h = sizes["d_model"], sizes["num_heads"]
    shapes = [
        ShapeRow("x (token ids)", "(batch_size, seq_len)", tuple(ids.shape)),
        ShapeRow("token_emb + pos_emb", "(batch, seq_len, d_model)", tuple(x.shape)),
        ShapeRow("Q = split_heads(W_q(query))", "(batch, num_heads, seq_len, d_k)", (1, h, T, d // h)),
        ShapeRow("scores, attn_weights", "(batch, num_heads, seq_len, seq_len)", tuple(first.shape)),
        ShapeRow("combine_heads(attn_output)", "(batch, seq_len, d_model)", tuple(after_first.shape)),
        ShapeRow("logits", "(batch, seq_len, vocab_size)", tuple(logits.shape)),
    ]
    sizes_text = ", ".join(f"{k}={v}" for k, v in sizes.items())
    return BookModel("003", BOOK_MODELS["003"], tokens, [first[0], second[0]], True, _all_features(h, d), shapes,
                     f"TwoLayerTransformer(vocab_size={tokenizer.vocabulary_size()}, {sizes_text}, dropout=0.1), "
                     f"seeded (torch.manual_seed({SEED})), xavier init, untrained; your text's {T} characters",
                     notes)


def sliced_heads(text: str, own_inputs: bool) -> BookModel:
    """Notebook 004's SimpleLanguageModel: n_embd 16, 2 heads of 8 features each, head i reading only features
    [8i, 8i + 8) of the embedding. Own inputs: the lab's model on "hello world", reading its first 8
    characters. The learner's text: block_size the text's length. Seeded and untrained either way."""
    if own_inputs:
        tokenizer = notebook_000.CharTokenizer.train_from_text(LAB_TEXT)
        ids = tokenizer.encode(LAB_TEXT[:8]).view(1, -1)
        tokens, notes = list(LAB_TEXT[:8]), []
        source = f"the lab's sizes, reading the first 8 characters of \"{LAB_TEXT}\""
    else:
        tokenizer, ids, tokens, notes = _text_ids(text)
        source = f"your text's {ids.size(1)} characters"
    model = _seeded_build(lambda: notebook_004.SimpleLanguageModel(
        tokenizer.vocabulary_size(), block_size=ids.size(1), n_embd=16, n_head=2))
    T, attention = ids.size(1), model.attn
    with torch.no_grad():
        x = model.embed(ids)  # (1, T, n_embd)
        weights = attention.weights(x)  # (1, h, T, T)
        split = attention.slices(x)[0]  # (1, T, C_head)
        logits = model.output(attention(x))  # the rest of forward, from the embeddings already made
    reads = torch.zeros(attention.num_heads, attention.C)
    for head in range(attention.num_heads):
        reads[head, head * attention.C_head:(head + 1) * attention.C_head] = 1.0
    shapes = [
        ShapeRow("idx", "[B, T]", tuple(ids.shape)),
        ShapeRow("tok + pos", "[B, T, n_embd]", tuple(x.shape)),
        ShapeRow("x_split (one head's slice)", "[B, T, C_head]", tuple(split.shape)),
        ShapeRow("scores, weights", "[B, T, T]", (1, T, T)),
        ShapeRow("torch.cat(head_outputs)", "[B, T, C]", tuple(x.shape)),
        ShapeRow("logits", "[B, T, vocab_size]", tuple(logits.shape)),
    ]
    return BookModel("004", BOOK_MODELS["004"], tokens, [weights[0]], True, reads, shapes,
                     f"SimpleLanguageModel(vocab_size={tokenizer.vocabulary_size()}, block_size="
                     f"{model.block_size}, n_embd=16, n_head=2), seeded (torch.manual_seed({SEED})), untrained; "
                     f"{source}", notes)


def book_model(notebook: str, text: str, own_inputs: bool = False) -> BookModel:
    """The view of notebook ``notebook``'s model ("002", "003", "004") on ``text`` or on its own inputs."""
    notebook = checks.choice(notebook, "book model", BOOK_MODELS)
    build = {"002": encoder_layer, "003": two_layer, "004": sliced_heads}[notebook]
    return build(text, bool(own_inputs))
