"""Notebook 000 (a character tokenizer on Tiny Shakespeare, the token-ID dataset, one attention head, multi-head
attention), under the notebook's own names: ``CharTokenizer``, ``TokenIdsDataset``, ``AttentionHead(config)``,
``MultiHeadAttention(config)``. The classes take the notebook's ``config`` dict and keep its attribute names
(``Q_weights``, ``casual_attention_mask``, ``linear``), so a notebook reader's ``state_dict`` loads strictly.

``TokenIdsDataset`` is the project's own (playground/text/data.py): the notebook's, plus negative indices and a clear
error when the text is shorter than a window.

    config = {"embedding_dim": 64, "heads_num": 4, "head_size": 16, "context_size": 32, "dropout_rate": 0.0,
              "use_bias": False}
    MultiHeadAttention(config)(torch.randn(2, 10, 64)).shape -> (2, 10, 64)
"""

from __future__ import annotations

import torch
from torch import nn

from playground.text.data import TokenIdsDataset
from playground.textbook.sizes import TextbookError, check_length

__all__ = ["AttentionHead", "CharTokenizer", "MultiHeadAttention", "TokenIdsDataset"]


class CharTokenizer:
    """The notebook's character tokenizer: IDs in the order of ``vocabulary``, repeats dropped (first one kept).

    ``train_from_text(text)`` sorts the text's unique characters, so on Tiny Shakespeare "Hello world" ->
    [20, 43, 50, 50, 53, 1, 61, 53, 56, 50, 42], as the notebook prints. ``encode`` returns a LongTensor;
    ``decode`` takes one. The app's own tokenizer (playground/text/tokenizer.py) gives the same IDs for a sorted
    vocabulary.
    """

    def __init__(self, vocabulary):
        unique_vocab = list(dict.fromkeys(vocabulary))  # keeps the order, drops repeats
        self.token_id_for_char = {char: token_id for token_id, char in enumerate(unique_vocab)}
        self.char_for_token_id = {token_id: char for token_id, char in enumerate(unique_vocab)}

    @staticmethod
    def train_from_text(text):
        return CharTokenizer(sorted(set(text)))

    def encode(self, text):
        """Text -> 1-D LongTensor of IDs; TextbookError naming the first character the vocabulary lacks."""
        missing = next((char for char in text if char not in self.token_id_for_char), None)
        if missing is not None:
            raise TextbookError(f"the character {missing!r} is not in the vocabulary")
        return torch.tensor([self.token_id_for_char[char] for char in text], dtype=torch.long)

    def decode(self, token_ids):
        return "".join(self.char_for_token_id[token_id] for token_id in token_ids.tolist())

    def vocabulary_size(self):
        return len(self.token_id_for_char)


class AttentionHead(nn.Module):
    """One causal head: (B, T, embedding_dim) -> (B, T, head_size).

    ``Q_weights``, ``K_weights``, ``V_weights`` are Linear(embedding_dim, head_size, bias=use_bias); the buffer
    ``casual_attention_mask`` (the notebook's spelling) is the (context_size, context_size) lower triangle of ones.
    The notebook masks the scores before it scales them; dividing -inf by √head_size leaves -inf, so the order
    changes nothing. Dropout acts on the attention weights.
    """

    def __init__(self, config):
        super().__init__()
        self.Q_weights = nn.Linear(config["embedding_dim"], config["head_size"], bias=config["use_bias"])
        self.K_weights = nn.Linear(config["embedding_dim"], config["head_size"], bias=config["use_bias"])
        self.V_weights = nn.Linear(config["embedding_dim"], config["head_size"], bias=config["use_bias"])
        self.dropout = nn.Dropout(config["dropout_rate"])
        casual_attention_mask = torch.tril(torch.ones(config["context_size"], config["context_size"]))
        self.register_buffer("casual_attention_mask", casual_attention_mask)

    def attention_weights(self, input_embeddings):
        """The head's weights before dropout: (B, T, E) -> (B, T, T), each row summing to 1 over keys j <= i."""
        tokens_num = input_embeddings.shape[1]
        check_length(tokens_num, self.casual_attention_mask.shape[0], "context_size")
        Q = self.Q_weights(input_embeddings)  # (B, T, H)
        K = self.K_weights(input_embeddings)  # (B, T, H)
        attention_scores = Q @ K.transpose(1, 2)  # (B, T, T)
        attention_scores = attention_scores.masked_fill(
            self.casual_attention_mask[:tokens_num, :tokens_num] == 0, -torch.inf)
        attention_scores = attention_scores / (K.shape[-1] ** 0.5)
        return torch.softmax(attention_scores, dim=-1)

    def forward(self, input_embeddings):
        V = self.V_weights(input_embeddings)  # (B, T, H)
        return self.dropout(self.attention_weights(input_embeddings)) @ V  # (B, T, H)


class MultiHeadAttention(nn.Module):
    """``heads_num`` AttentionHeads on the same input, concatenated, then ``linear`` (with a bias) and dropout.

    (B, T, embedding_dim) -> (B, T, embedding_dim); heads_num · head_size must equal embedding_dim, as the
    notebook notes. Parameters: 3·E·H per head (+3·H with use_bias), then E² + E for ``linear``.
    """

    def __init__(self, config):
        super().__init__()
        if config["heads_num"] * config["head_size"] != config["embedding_dim"]:
            raise TextbookError(f"heads_num · head_size ({config['heads_num']} · {config['head_size']}) must equal "
                                f"embedding_dim ({config['embedding_dim']})")
        self.heads = nn.ModuleList([AttentionHead(config) for _ in range(config["heads_num"])])
        self.linear = nn.Linear(config["embedding_dim"], config["embedding_dim"])
        self.dropout = nn.Dropout(config["dropout_rate"])

    def forward(self, input_embeddings):
        concatenated_heads = torch.cat([head(input_embeddings) for head in self.heads], dim=-1)  # (B, T, h·H)
        return self.dropout(self.linear(concatenated_heads))  # (B, T, E)
