"""Which heads do something recognisable: every head of a model scored on generated probe inputs.

Owns the probes and the scores, nothing about the UI. A probe is a batch of random token sequences (seeded,
drawn uniformly from the model's vocabulary) whose second half repeats its first: ``r1 r2 ... rL r1 r2 ... rL``.
From the attention weights of every layer and head on it:

  previous token   mean weight from position p to p - 1 (p >= 1): the head that lets each token see its left
                   neighbour, which almost every model grows in its first layers;
  induction        mean weight from a repeated token (position L + i) to the token that followed its first
                   occurrence (position i + 1): the two-head circuit that lets a model continue a pattern it
                   has seen once;
  duplicate token  mean weight from position L + i to position i, the earlier copy of the same token;
  first token      mean weight on position 0, the "attention sink" a head parks its weight on when it has
                   nothing to do.

Each score sits beside what a head that spreads its weight evenly over the positions it may see would get
(``chance``), so 0.45 against 0.03 reads as a real pattern and 0.05 against 0.03 as none. Nothing is hard-coded:
a different checkpoint gets a different table.

``looks_over_text`` reads one head on a real text instead of a probe: where its weight goes (a distance back, the
first position, a character wherever it stands), each place beside its chance the same way. The Why tab says the
clearest of them as what the head looks for.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from playground.model.base import run_with_cache
from playground.model.gpt import causal_mask

PATTERNS = ("previous token", "induction", "duplicate token", "first token")
DEFAULT_SEQUENCES = 8
MAX_REPEAT_LENGTH = 48  # L: the probe is 2L tokens, capped so the cost stays small on a big model
RECOGNISABLE_RATIO = 2.0  # a head does a pattern when it scores at least this many times chance


@dataclass(frozen=True)
class HeadScore:
    pattern: str
    layer: int
    head: int
    score: float  # the head's mean weight on the pattern's position
    chance: float  # what an even spread over the visible positions would give

    @property
    def recognisable(self) -> bool:
        """Whether the head clearly does this pattern: at least RECOGNISABLE_RATIO times chance."""
        return self.score >= RECOGNISABLE_RATIO * self.chance

    @property
    def lift(self) -> float:
        """How far above chance: score - chance."""
        return self.score - self.chance


def probe_tokens(vocabulary_size: int, context_size: int, sequences: int = DEFAULT_SEQUENCES,
                 seed: int = 0) -> torch.Tensor:
    """(sequences, 2L) random IDs whose second half repeats the first; L = min(48, context // 2).

    vocabulary 65, context 128 -> (8, 96): each row is 48 random IDs, then the same 48 again.
    """
    length = min(MAX_REPEAT_LENGTH, context_size // 2)
    if length < 2:
        raise ValueError(f"a context of {context_size} tokens is too short to probe heads (needs at least 4)")
    generator = torch.Generator().manual_seed(seed)
    half = torch.randint(vocabulary_size, (sequences, length), generator=generator)
    return torch.cat([half, half], dim=1)  # (S, 2L)


def _diagonal_mean(weights: torch.Tensor, queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """weights (S, h, T, T) -> (h,): the mean over sequences and pairs of weights[:, :, queries[i], keys[i]]."""
    return weights[:, :, queries, keys].mean(dim=(0, 2))


def previous_token_score(weights: torch.Tensor) -> torch.Tensor:
    """(S, h, T, T) weights -> (h,): the mean weight from position p to p - 1 (p >= 1), on a probe or any text."""
    positions = torch.arange(weights.size(-1))
    return _diagonal_mean(weights, positions[1:], positions[:-1])


def first_token_score(weights: torch.Tensor) -> torch.Tensor:
    """(S, h, T, T) weights -> (h,): the mean weight on position 0 from the positions after it."""
    return weights[:, :, 1:, 0].mean(dim=(0, 2))


def same_token_score(weights: torch.Tensor, token_ids: torch.Tensor) -> torch.Tensor:
    """(S, h, T, T) weights and the (S, T) tokens they read -> (h,): the mean weight a query puts on the earlier
    copies of its own token, over the queries that have one (0 where none has). "abca": only the last a has an earlier
    copy, so the score is each head's weight from position 3 on position 0."""
    ids = token_ids.view(weights.size(0), -1).to(weights.device)
    T = ids.size(1)
    earlier = torch.ones(T, T, dtype=torch.bool, device=weights.device).tril(diagonal=-1)
    copies = (ids[:, :, None] == ids[:, None, :]) & earlier  # (S, T queries, T keys)
    has_copy = copies.any(dim=-1)  # (S, T)
    if not bool(has_copy.any()):
        return weights.new_zeros(weights.size(1))
    on_copies = (weights * copies[:, None]).sum(dim=-1)  # (S, h, T)
    return on_copies.transpose(0, 1)[:, has_copy].mean(dim=1)


def spread_score(weights: torch.Tensor) -> torch.Tensor:
    """(S, h, T, T) causal weights -> (h,): each query's entropy over the log of the positions it sees, averaged over
    the queries after position 0: 1 for a head spreading its weight evenly, 0 for one that puts it all on one key."""
    T = weights.size(-1)
    entropy = -torch.special.xlogy(weights, weights).sum(dim=-1)[..., 1:]  # (S, h, T - 1)
    most = torch.log(torch.arange(2, T + 1, dtype=weights.dtype, device=weights.device))  # log(p + 1), p >= 1
    return (entropy / most).mean(dim=(0, 2))


def score_weights(weights: torch.Tensor, repeat_length: int) -> dict[str, torch.Tensor]:
    """One layer's attention weights on a probe, (S, h, 2L, 2L) -> {pattern: (h,) scores}."""
    L = repeat_length
    second_half = torch.arange(L, 2 * L - 1)  # L + i for i in 0..L-2: i + 1 stays inside the first half
    return {
        "previous token": previous_token_score(weights),
        "induction": _diagonal_mean(weights, second_half, second_half - L + 1),
        "duplicate token": _diagonal_mean(weights, second_half, second_half - L),
        "first token": first_token_score(weights),
    }


def chance_levels(repeat_length: int, window: int | None = None) -> dict[str, float]:
    """What a causal head spreading its weight evenly gets: position p sees p + 1 positions, weight 1 / (p + 1).
    ``window`` (Mistral's sliding window): p sees min(p + 1, window), and a key window or more back gets nothing."""
    L = repeat_length
    T = 2 * L
    seen = causal_mask(T, T, window=window).double()  # (T, T)
    spread = seen / seen.sum(1, keepdim=True)  # (T, T): each query's even weights over the keys it sees
    queries, second_half = torch.arange(1, T), torch.arange(L, 2 * L - 1)
    return {
        "previous token": float(spread[queries, queries - 1].mean()),
        "induction": float(spread[second_half, second_half - L + 1].mean()),
        "duplicate token": float(spread[second_half, second_half - L].mean()),
        "first token": float(spread[queries, 0].mean()),
    }


@torch.no_grad()
def attention_patterns(model, token_ids: torch.Tensor) -> list[torch.Tensor]:
    """Each layer's attention weights on ``token_ids`` (B, T): (B, h, T, T) per layer, read at the named point
    ``attn.hook_pattern`` (a GPT and the Llama family alike; a grouped head's row is its own, over the K/V head it
    shares; notebook 004's model keeps its one layer's)."""
    device = next(model.parameters()).device
    token_ids = token_ids.to(device)
    _, points = run_with_cache(model, token_ids, {"attn.hook_pattern"})
    return [points[f"blocks.{layer}.attn.hook_pattern"] for layer in range(model.config.layers_num)]


@torch.no_grad()
def score_heads(model, sequences: int = DEFAULT_SEQUENCES, seed: int = 0) -> list[HeadScore]:
    """Every (pattern, layer, head) of ``model`` (either family, or notebook 004's), ranked by how far above chance
    it scores.

    Runs the model once on the probe, reading its attention_patterns.
    """
    config = model.config
    tokens = probe_tokens(config.vocabulary_size, config.context_size, sequences, seed)
    L = tokens.size(1) // 2
    chance = chance_levels(L, config.sliding_window)
    scores = []
    for layer, weights in enumerate(attention_patterns(model, tokens)):
        per_pattern = score_weights(weights.float().cpu(), L)
        for pattern in PATTERNS:
            for head, value in enumerate(per_pattern[pattern].tolist()):
                scores.append(HeadScore(pattern, layer, head, value, chance[pattern]))
    return sorted(scores, key=lambda s: s.lift, reverse=True)


def best_per_pattern(scores: list[HeadScore], top: int = 3) -> list[HeadScore]:
    """The ``top`` recognisable heads of each pattern (already ranked), patterns in PATTERNS order; a pattern no
    head does has no row (``missing_patterns`` names it)."""
    return [s for pattern in PATTERNS for s in [s for s in scores if s.pattern == pattern and s.recognisable][:top]]


def missing_patterns(scores: list[HeadScore]) -> list[str]:
    """The patterns no head of the model does (none reaches RECOGNISABLE_RATIO times chance)."""
    return [pattern for pattern in PATTERNS if not any(s.pattern == pattern and s.recognisable for s in scores)]


FARTHEST_SCORED = 16  # distances back a text's looks score one by one (a previous-token head's 1, a head's 2 or 3)
LOOK_KINDS = ("distance", "first", "token", "own word", "previous word", "word start")
WORD_LOOKS = LOOK_KINDS[3:]  # read where the text's words are known (word_numbers): a character model's text


@dataclass(frozen=True)
class Look:
    """One answer to "where does this head look" over a text, from its attention weights there.

    kind "distance": ``what`` positions back (0 is the query itself), the mean weight over the queries that see that
    far; "first": the text's first position, over the queries after it (the "attention sink"); "token": key
    ``what`` (a token id) wherever it stands, the mean over every query of the weight on its copies (a token found
    only at position 0 is that position's Look, not counted twice). Where the words are known: "own word", the keys
    of the query's word up to it; "previous word", the word before the query's (for a query between words, the
    last one); "word start", the first letter of every word. ``what`` is 0 for those. ``chance`` is what a head
    spreading its weight evenly over the positions it may see would put there, so a share reads against what the
    text alone gives (a frequent character gets much weight from any head).
    """

    kind: str
    what: int
    share: float
    chance: float

    @property
    def lift(self) -> float:
        """The weight there beyond an even spread: share - chance."""
        return self.share - self.chance

    @property
    def recognisable(self) -> bool:
        """Whether the head clearly looks there: at least RECOGNISABLE_RATIO times chance."""
        return self.share >= RECOGNISABLE_RATIO * self.chance


def word_numbers(characters: str) -> list[int]:
    """Each character's word, numbered from 0 in order, or -1 outside a word: a word is a run of letters
    (str.isalpha). "O Romeo, ..." -> [0, -1, 1, 1, 1, 1, 1, -1, -1, ...]."""
    numbers, word, inside = [], -1, False
    for character in characters:
        if character.isalpha() and not inside:
            word += 1
        inside = character.isalpha()
        numbers.append(word if inside else -1)
    return numbers


def looks_over_text(weights: torch.Tensor, token_ids: torch.Tensor, words=None,
                    window: int | None = None) -> list[Look]:
    """Where one head looks over a text, (T, T) causal attention weights (rows sum to 1) and the text's (T,) token
    ids -> every distance back up to FARTHEST_SCORED (and half the text), the first position, every token of the
    text and, given ``words`` (word_numbers of the text's characters), the query's own word, the word before it and
    the words' starts, as Looks, the most weight beyond an even spread (lift) first.

    The probes (score_heads) find heads that do a known pattern on random tokens; this reads a head on the
    learner's own text, where a head past the first layer may look for a character (a newline) or a place in the
    words (its own word, the word before) rather than a distance. An even spread scores every Look at exactly its
    chance, so a lift is what the head adds. ``window``: a sliding window (Mistral's) the head's mask kept, so query p
    sees min(p + 1, window) positions, and no distance of window or more is scored.
    """
    weights = weights.detach().float().cpu()
    ids = torch.as_tensor(token_ids).view(-1).cpu()
    T = ids.numel()
    if weights.shape != (T, T):
        raise ValueError(f"weights {tuple(weights.shape)} do not match a text of {T} tokens")
    seen = causal_mask(T, T, window=window).float()  # (T, T) the keys each query may see
    even = 1.0 / seen.sum(1)  # query p sees p + 1 positions (at most window)
    looks = []
    # a distance at least half the queries see: a head parked on position 0 is not "11 back" in a text of 12, where
    # one query sees that far
    farthest = min(FARTHEST_SCORED, (T - 1) // 2, T if window is None else window - 1)
    for distance in range(farthest + 1):
        queries = torch.arange(distance, T)
        looks.append(Look("distance", distance, float(weights[queries, queries - distance].mean()),
                          float(even[distance:].mean())))
    if T > 1:
        looks.append(Look("first", 0, float(weights[1:, 0].mean()), float((seen[1:, 0] * even[1:]).mean())))
    for token in dict.fromkeys(ids.tolist()):
        copies = (ids == token).float()  # (T,)
        if T > 1 and copies.sum() == 1 and copies[0] == 1:  # only at position 0: the "first" Look already
            continue
        looks.append(Look("token", token, float((weights @ copies).mean()),
                          float(((seen @ copies) * even).mean())))
    if words is not None:
        looks += _word_looks(weights, torch.as_tensor(words, dtype=torch.long).view(-1), seen * even[:, None])
    return sorted(looks, key=lambda look: -look.lift)


def strongest_look(weights: torch.Tensor, window: int | None = None) -> tuple[int, int, float] | None:
    """(query, key, weight) of a text's (T, T) causal attention weights where a weight lies furthest beyond an even
    spread (1 / (query + 1)), position 0 left out (where a head parks weight it has no use for); None for a text of
    one token. One concrete look of a head that has no one place, which "no one place" alone leaves unsaid (the
    shipped model's L3 H1 puts 0.55 on the `h` of "wherefore" from the end of the question).

    [[1, 0, 0], [0.5, 0.5, 0], [0.1, 0.1, 0.8]] -> (2, 2, 0.8): 0.8 - 1/3 is the furthest beyond an even spread.
    """
    weights = weights.detach().float().cpu()
    T = weights.size(0)
    if T < 2:
        return None
    seen = causal_mask(T, T, window=window)  # (T, T); ``window``: a sliding window's (Mistral's), as looks_over_text
    beyond = weights - 1.0 / seen.sum(1, keepdim=True).float()
    seen[:, 0] = False
    query, key = divmod(int(beyond.masked_fill(~seen, float("-inf")).argmax()), T)
    return query, key, float(weights[query, key])


def apart(a: Look, b: Look, first_token: int) -> bool:
    """Whether two places share no key, so their weights add (a head can look at both): two distances, two tokens,
    the query's own word and the word before it, position 0 and a token not at position 0 (``first_token``, the
    text's first). Any other pair may name the same key: 1 back is in the query's own word inside a word, a word's
    start is in its word."""
    if a.kind == b.kind:
        return a.kind in ("distance", "token") and a.what != b.what
    kinds = {a.kind, b.kind}
    if kinds == {"own word", "previous word"}:
        return True
    if kinds == {"first", "token"}:
        return (a if a.kind == "token" else b).what != first_token
    return False


def _word_looks(weights: torch.Tensor, words: torch.Tensor, spread: torch.Tensor) -> list[Look]:
    """The Looks of WORD_LOOKS: each a (T, T) mask of the keys it names for each query, scored as the weight the head
    puts there against ``spread``, an even spread's (T, T) weights."""
    T = weights.size(0)
    if words.numel() != T:
        raise ValueError(f"{words.numel()} word numbers do not match a text of {T} tokens")
    causal = spread > 0
    inside = words >= 0
    own = (words[:, None] == words[None, :]) & inside[:, None]
    latest = torch.cummax(words, dim=0).values  # the last word begun at or before each query (-1 before any)
    before = torch.where(inside, words - 1, latest)  # the word before the query's own; between words, the last one
    previous = (words[None, :] == before[:, None]) & (before[:, None] >= 0)
    starts = inside & (words != torch.cat([words.new_full((1,), -1), words[:-1]]))
    masks = {"own word": own, "previous word": previous, "word start": starts[None, :].expand(T, T)}
    return [Look(kind, 0, float((weights * (mask & causal)).sum(1).mean()),
                 float((spread * (mask & causal)).sum(1).mean())) for kind, mask in masks.items()]
