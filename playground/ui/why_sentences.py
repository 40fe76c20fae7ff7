"""The Why tab's sentences: what a reading (why_reading.Reading) means, in words. The headings (why this character,
a head at a position, a knock-out's table), where a head looks and what it writes over the text, its circuits'
Look-for line and their fold. Each takes the reading and asks it; nothing here draws or runs the model.
"""

from __future__ import annotations

import torch

from playground.lens import circuits, head_scores
from playground.text.tokenizer import CharTokenizer
from playground.ui.why_page import (
    HERE,
    KNOCK_BARELY,
    KNOCK_BARELY_MOVES,
    KNOCK_COLUMNS,
    KNOCK_FALLS,
    KNOCK_FOLD,
    KNOCK_HINT,
    KNOCK_NAMED,
    LOOK_FOR_KNOCK,
)
from playground.ui.why_reading import (
    LOOKS_CLEARLY,
    LOOKS_RATIO,
    Reading,
    above,
    by_position,
    clear,
    heads_named,
)

QUIET_HEADS = 0.5  # the heads (or the named head) write less than this fraction of the largest other part: said
LOOK_FOR_PARTS = "**Look for:** the longest bars. Green pushed this character up, red down."
# the two characters by name: with a target typed, "the guess" could be the model's or the typed one
LOOK_FOR_VERSUS = "**Look for:** the longest bars. Green favours `{target}`, red `{rival}`."
LOOK_FOR_HEAD = ("**Look for:** read down: weight (①) × write (②) = push (③); pushes sum to the head's bar (④); "
                 "softmax (⑤).")
LOOK_FOR_CIRCUITS = "**Look for:** dark blue cells: strong pairs."  # where no cell is outlined (in_the_tables)
PAIRS = 5  # the strongest pairs of a head's QK and OV tables said in words
# a rank past this and past a quarter of the row in a head's tables (QK: the key; OV: the target, where the head pushed
# it up) is called low, with its reason: the head looks by position, or (past the first layer) reads what the layers
# before wrote, neither of which the tables read
TABLE_RANK_SHOWN = 3
LOOKS_LISTED = 4  # more places a head looks over the text, behind the fold
WORD_PLACES = {"own word": "within its own word", "previous word": "at the word before", "word start": "at word starts"}
NEAREST = {"own word": "its own word"}  # a place named after "one place:" (WORD_PLACES' "within" does not read there)
# where the tables' ranks are low (in_the_tables): the chain is what the head did, the tables what it would do on the
# characters alone
CHAIN_HOLDS = "trust the chain above"
# a head with no one place over the text: where it looked at the position on screen is the chain's, above; its
# strongest look goes behind the fold, where it cannot read as a second answer
NO_ONE_PLACE = "No one place: where it looks changes with the query"
# when the Look-for line calls a rank low (low, in_the_tables), the rule, said behind the fold
LOW_RANKS = (f"The Look-for line calls a rank low past the {TABLE_RANK_SHOWN}rd and past a quarter of its row; the "
             "guess's rank in OV only where the head pushed it up, since one it pushed down ranks low as the chain "
             "says.")
CIRCUIT_MORE = ("Both tables read each character's token embedding alone, without its position, through the "
                "layer's LayerNorm: for a layer past the first that is the direct path, as if the head read the input "
                "itself. QK: the scaled score a query character gives a key character (softmax runs over a row). OV: "
                "the logits the head writes when all its weight is on one character, through W_V, W_O, the final "
                "norm and the LM head.")
ROTARY_MORE = ("Both tables read each token's embedding alone through the layer's RMSNorm: for a layer past the "
               "first that is the direct path. Positions enter as a rotation of q and k, so a score depends on how far "
               "back the key is: QK is drawn for keys the **distance** box's number of tokens back. A grouped head "
               "reads the K/V head it shares. OV: the logits the head writes when all its weight is on one token, "
               "through W_V, W_O, the final norm and the LM head.")
NOTEBOOK_MORE = ("Notebook 004's model: one layer of heads, each reading its own slice of the embedding, then the "
                 "output projection and the output layer, with no norm, MLP or residual. Both tables read each "
                 "character's token embedding alone, without its position. QK: the scaled score a query character "
                 "gives a key character. OV: the logits the head writes when all its weight is on one character, "
                 "through W_V, its columns of the projection and the output layer (without its bias).")


def who_decides(parts: circuits.LogitAttribution, named: tuple[int, int]) -> str:
    """A sentence where the heads together, or the head named, write little beside the largest other part (an MLP,
    an embedding, a bias), from the numbers: "No head decides this one: the heads together write +0.30, L2 MLP
    +2.90; all bars sum to +4.10; the longest head bar is L2 H3's." (the head the list opens, named because it may
    have pushed against the guess: a red bar); "" where a head does decide."""
    values = parts.values.tolist()
    others = [(abs(v), name, v) for name, kind, v in zip(parts.names, parts.kinds, values) if kind != "head"]
    heads = [v for kind, v in zip(parts.kinds, values) if kind == "head"]
    if not others or not heads:
        return ""
    _, largest, written = max(others)
    together, own = sum(heads), parts.head(*named)
    if abs(together) < QUIET_HEADS * abs(written):
        return (f" **No head decides this one:** the heads together write {together:+.2f}, {largest} {written:+.2f}; "
                f"all bars sum to {parts.logit:+.2f}; the longest head bar is {circuits.head_name(*named)}'s.")
    if abs(own) < QUIET_HEADS * abs(written):
        return (f" **No one head decides this one:** {circuits.head_name(*named)} writes {own:+.2f}, {largest} "
                f"{written:+.2f}; all bars sum to {parts.logit:+.2f}.")
    return ""


def who_pushed(parts: circuits.LogitAttribution, named: tuple[int, int], target: str) -> str:
    """Where the head named decides (who_decides says nothing), that it pushed hardest, its part and which way:
    " **L3 H1 pushed hardest** for `?`: +2.81." The way is a word, since a sign alone under a typed target does not
    say for which character; the character comes before the number, so "`.`." never reads as ".."."""
    part = parts.head(*named)
    way = "for" if part >= 0 else "against"
    return f" **{circuits.head_name(*named)} pushed hardest** {way} `{target}`: {part:+.2f}."


def heading(reading: Reading, position: int) -> str:
    parts = reading.attributions[position]
    target_id = parts.target_id
    probabilities = reading.probabilities[position]
    name = reading.label(target_id)
    rank = int((probabilities > probabilities[target_id]).sum()) + 1
    strongest = reading.strongest(position)
    said = who_decides(parts, strongest) or who_pushed(parts, strongest, name)
    quiet = said + dropped_line(reading)
    if parts.rival_id is None:
        return (f"### Why `{name}` after `{reading.tokens[position]}` (position {position})\n\n{LOOK_FOR_PARTS}"
                f"{quiet}\n\nThe model gives `{name}` probability {float(probabilities[target_id]):.3f} (its choice "
                f"number {rank}); its logit {parts.logit:.3f} is the sum of these {len(parts.names)} bars.")
    rival = reading.label(parts.rival_id)
    role = "the runner-up" if rank == 1 else "the model's guess"
    logits = reading.logits[position]
    return (f"### Why `{name}` and not `{rival}` after `{reading.tokens[position]}` (position {position})\n\n"
            f"{LOOK_FOR_VERSUS.format(target=name, rival=rival)}{quiet}\n\n"
            f"`{name}` (p {float(probabilities[target_id]):.3f}) against {role} "
            f"`{rival}` ({float(probabilities[parts.rival_id]):.3f}): logits {float(logits[target_id]):.3f} − "
            f"{float(logits[parts.rival_id]):.3f} = {parts.logit:+.3f} is the sum of these {len(parts.names)} bars.")


def head_heading(reading: Reading, position: int, layer: int, which: int) -> str:
    weights, shares = (keys[position] for keys in reading.keys[(layer, which)])
    seen = slice(0, position + 1)
    # the character whose push has the head's own sign: a head that lowers the logit is read by what pushed down
    part = reading.attributions[position].head(layer, which)
    top = int((shares[seen] if part >= 0 else -shares[seen]).argmax())
    pushed = "Pushed it up most" if float(shares[top]) >= 0 else "Pushed it down most"
    parts = reading.attributions[position]
    what = "the logit" if parts.rival_id is None else "the logit difference"
    # what the head looked for at this query, the keys themselves: the circuits' pairs are over the vocabulary, not
    # this position
    looked = reading.looked_most(position, layer, which)
    at = " and ".join(f"{token_at(reading, i)} ({float(weights[i]):.2f})" for i in looked)
    # a head below zero said in words: where no head decides, the head with the longest bar can be one that worked
    # against the guess, which its sign alone says too quietly
    against = f", **against** `{reading.label(parts.target_id)}`" if part < 0 else ""
    return (f"### {circuits.head_name(layer, which)} at position {position}\n\n{LOOK_FOR_HEAD}\n\nIts part "
            f"of {what}: {part:+.3f} of {parts.logit:+.3f}{against}. After `{reading.tokens[position]}` it looked most "
            f"at {at}. {pushed}: `{reading.tokens[top]}` at {top} (weight {float(weights[top]):.2f}, "
            f"{float(shares[top]):+.3f}).")


def texts(reading: Reading, position: int) -> tuple[str, str, str]:
    """(heading, the head's heading, the knock-out heading) at ``position``."""
    return (heading(reading, position), head_heading(reading, position, *reading.head_at(position)),
            knock_text(reading, position))


def knock_text(reading: Reading, position: int) -> str:
    """The knock-out heading at ``position``. The page writes the same from the same numbers (why_page's
    knockText): keep the two alike."""
    names = heads_named(reading.knocked_heads)
    more = len(reading.knocked_heads) - KNOCK_NAMED + 1  # past KNOCK_NAMED: three named, the rest counted
    titled = f"{heads_named(reading.knocked_heads[:KNOCK_NAMED - 1])} and {more} more" if more > 1 else names
    lines = [f"### {f'Knocked out: {titled}' if names else 'Knock heads out'}\n\n{LOOK_FOR_KNOCK}"]
    if names:
        target = reading.label(reading.targets[position])
        intact, knocked = reading.knocks[""], reading.knocks[names]
        guess, knocked_guess = (reading.label(k.guesses[position]) for k in (intact, knocked))
        p_target, knocked_p = intact.target_probabilities[position], knocked.target_probabilities[position]
        table = [KNOCK_COLUMNS, "|---|---|---|---|"]
        if intact.loss is not None:
            change = knocked.loss - intact.loss
            table.append(f"| loss on the text | {intact.loss:.3f} | {knocked.loss:.3f} | {change:+.3f} |")
        table.append(f"| guess at position {position} | `{guess}` | `{knocked_guess}` | "
                     f"{'same' if guess == knocked_guess else 'changed'} |")
        table.append(f"| p(`{target}`) | {p_target:.3f} | {knocked_p:.3f} | {knocked_p - p_target:+.3f} |")
        lines.append("\n".join(table))
        if intact.loss is not None and abs(change) < KNOCK_BARELY:
            lines.append(KNOCK_BARELY_MOVES[len(reading.knocked_heads) > 1])
        elif intact.loss is not None and change < 0:
            lines.append(KNOCK_FALLS[len(reading.knocked_heads) > 1])
    else:
        lines.append(KNOCK_HINT)
    lines.append(KNOCK_FOLD[0] + reading.ranking_note + KNOCK_FOLD[1])  # the ranking's words, behind the fold
    return "\n\n".join(lines)


def parts_title(reading: Reading, position: int) -> str:
    target, rival = reading.contest(position)
    if rival is None:
        return f"The logit of '{target}', part by part"
    return f"The logit of '{target}' − the logit of '{rival}', part by part"


def parts_axis(reading: Reading, position: int) -> str:
    """What the parts' bars are, under them: "added to logit('u') − logit('a')", in the logit's own units (a bare
    "logit" would be the model's; "share of" would read as a fraction, where the bars add up to the logit)."""
    target, rival = reading.contest(position)
    return f"added to logit('{target}')" if rival is None else f"added to logit('{target}') − logit('{rival}')"


def in_the_tables(reading: Reading, position: int, layer: int, which: int) -> str:
    """The circuits' Look-for line: where this position's query and the key it looked at most sit in the head's
    tables below, in words: "**Look for:** outlined cells, position 30: QK row `e` ranks `f` 4th of the text's 32;
    OV row `f` ranks `␣` 39th of 65.", and where they are low "… QK row `o` ranks `h` 29th; OV row `h` ranks `?` 18th.
    Both low: tables read characters, not layers 0–2; trust the chain above." The tables' strongest pairs are not
    what the head did at this position, and their ranks can seem to contradict the chain: a low rank (is_low: the key
    in QK, or the target in OV where the head pushed it up) is named, its reason said, and that the chain holds: a
    head that looks by position (why_reading.by_position), at any layer, reads what the tables leave out; past the
    first layer, the layers before. A target outside the tables (a BPE guess) gives what the key's OV row promotes
    most instead. Where the query or the key is outside them (a long
    BPE text) nothing is outlined, and the line is LOOK_FOR_CIRCUITS. The same cells are outlined on the tables
    (cell_shapes)."""
    cells = reading.table_cells(position, layer, which)
    if cells is None:
        return f"\n\n{LOOK_FOR_CIRCUITS}"
    query, key, _, column = cells
    rows = reading.table_rows()
    index = {token: row for row, token in enumerate(rows)}
    qk, ov = reading.tables(layer, which)
    in_text = sorted({index[token] for token in reading.ids.tolist() if token in index})
    qk_rank = int((qk[query, in_text] > qk[query, key]).sum()) + 1
    name = lambda row: reading.label(rows[row])  # noqa: E731
    ov_rank = None
    if rows[column] == reading.attributions[position].target_id:
        ov_rank = int((ov[key] > ov[key, column]).sum()) + 1
    # a target the head pushed down ranks low in the key's OV row as the chain says: no reason to give
    pushed_up = reading.attributions[position].head(layer, which) > 0
    lows = [kind for kind, low in (("QK", is_low(qk_rank, len(in_text))),
                                   ("OV", ov_rank is not None and pushed_up and is_low(ov_rank, len(rows)))) if low]
    low = " Both low:" if len(lows) == 2 else f" {''.join(lows)} low:"  # which rank is low, by name
    # which answer holds, said with the reason: low ranks beside the chain's key would otherwise read as a second
    # answer. Then the ranks go without their rows' lengths ("29th", not "29th of the text's 32"): "low" says as
    # much, and the words in sight stay within 60
    why = ""
    if lows and by_position(reading.looks(layer, which)):
        why = f"{low} tables leave out position; {CHAIN_HOLDS}."
    elif layer > 0 and lows:  # the tables read embeddings alone (the direct path), not what the layers before wrote
        before = f"layers 0–{layer - 1}" if layer > 1 else "layer 0"
        why = f"{low} tables read characters, not {before}; {CHAIN_HOLDS}."
    of_text, of_rows = ("", "") if why else (f" of the text's {len(in_text)}", f" of {len(rows)}")
    promotes = (f"ranks `{name(column)}` {ordinal(ov_rank)}{of_rows}" if ov_rank is not None
                else f"promotes `{name(column)}` most")  # a BPE guess outside the table's tokens: its row's first
    at = ""
    if reading.distance is not None:  # rotary positions: the QK table holds one distance, the key may sit at another
        back = position - reading.looked_most(position, layer, which)[0]
        at = (f" at distance {reading.distance}" if back == reading.distance
              else f" at distance {reading.distance} (this key sits {back} back: set distance {back} to read its own)")
    return (f"\n\n**Look for:** outlined cells, position {position}: QK row `{name(query)}`{at} ranks "
            f"`{name(key)}` {ordinal(qk_rank)}{of_text}; OV row `{name(key)}` {promotes}.{why}")


def look_name(reading: Reading, look: head_scores.Look) -> str:
    """A Look's place in words: "1 back", "at itself", "at position 0", "at `\\n`", "within its own word", "at the
    word before", "at word starts"."""
    if look.kind in WORD_PLACES:
        return WORD_PLACES[look.kind]
    if look.kind == "distance":
        return "at itself" if look.what == 0 else f"{look.what} back"
    if look.kind == "first":
        return "at position 0"
    return f"at `{reading.label(look.what)}`"


def looks_line(reading: Reading, layer: int, which: int) -> str:
    """What the head does over the reader's text, in sight under "What L0 H2 does over your text": "Looks 1 back (92%
    of its weight overall; by chance: 5%); writes `␣` most.", with a second place where one shares no key with the first
    and comes near it (Reading.beside: "Looks at `\\n` (23% …) and at position 0 (20%; 5%)"); where no place gets
    LOOKS_RATIO times an even spread and LOOKS_CLEARLY beyond it (why_reading.clear), that where it looks changes from
    query to query, the chain above being what it did at the position on screen; its strongest look and the place that
    comes nearest are behind the fold (looks_more), where they cannot read as a second answer beside the chain's key.
    The QK and OV tables cannot say either: a previous-token head looks by position, which they leave out, and a later
    layer's head reads what the layers before wrote. What it writes is the token Reading.writes puts first. Only what
    it writes where its weights were not read."""
    looks = reading.looks(layer, which)
    writes = f"writes `{reading.label(reading.writes(layer, which)[0][0])}` most"
    if not looks:
        return f"\n\n{writes.capitalize()}."
    top = looks[0]
    if clear(top):
        second = reading.beside(looks)
        beside = "" if second is None else \
            f" and {look_name(reading, second)} ({second.share:.0%}; {second.chance:.0%})"
        # "overall": the text's average, not where the head looked at the position on screen
        return (f"\n\nLooks {look_name(reading, top)} ({top.share:.0%} of its weight overall; by "
                f"chance: {top.chance:.0%}){beside}; {writes}.")
    return f"\n\n{NO_ONE_PLACE}; {writes}."


def no_one_place_more(reading: Reading, layer: int, which: int) -> str:
    """For the fold of a head with no one place (looks_line): its strongest look over the text (one concrete look,
    head_scores.strongest_look: "`␣`@54 to `R`@48 (0.94)") and the place that comes nearest to one; "" for a head
    that has one."""
    looks = reading.looks(layer, which)
    if not looks or clear(looks[0]):
        return ""
    top = looks[0]
    nearest = NEAREST.get(top.kind) or look_name(reading, top).removeprefix("at ")
    strongest = head_scores.strongest_look(reading.keys[(layer, which)][0], reading.model.config.sliding_window)
    example = "" if strongest is None else (f"Its strongest look: {token_at(reading, strongest[0])} to "
                                            f"{token_at(reading, strongest[1])} ({strongest[2]:.2f}). ")
    return (f"{example}Nearest to one place: {nearest}, {top.share:.0%} of its weight (by chance: "
            f"{top.chance:.0%}).\n\n")


def token_at(reading: Reading, position: int) -> str:
    """A token of the text at its position, as the chain names its keys: "`h`@63"."""
    return f"`{reading.tokens[position]}`@{position}"


def looks_more(reading: Reading, layer: int, which: int) -> str:
    """For the fold: the next LOOKS_LISTED places the head looks over the text, those with LOOKS_RATIO times an even
    spread ("at itself 8% (6%)" is no place it looks). A character model's words are said to be runs of letters, so
    the space after a word is in none. Then the WRITES_LISTED tokens it writes most, with their shares."""
    writes = ", ".join(f"`{reading.label(token)}` {value:+.2f}"
                       for token, value in reading.writes(layer, which))
    wrote = (f"What it writes most over your text, its mean share of each logit less the mean over every logit: "
             f"{writes}.\n\n")
    first = no_one_place_more(reading, layer, which)
    every = reading.looks(layer, which)
    named = [*every[:1], reading.beside(every)]  # in sight already (looks_line), or just before (no_one_place_more)
    looks = [look for look in every if look not in named and above(look)][:LOOKS_LISTED]
    if not looks:
        return first + wrote
    listed = "; ".join(f"{look_name(reading, look)} {look.share:.0%} ({look.chance:.0%})" for look in looks)
    words = " A word is a run of letters: spaces and punctuation are in none." if isinstance(
        reading.tokenizer, CharTokenizer) else ""
    return (f"{first}Where else it looks over your text, weight (and by chance): {listed}. \"By chance\" is what a "
            f"place would get if the head spread its weight evenly over every position a query may see. The line above "
            f"names a place that gets at least {LOOKS_RATIO:g} times its chance and {LOOKS_CLEARLY * 100:g} points of "
            f"weight more than chance.{words}\n\n{wrote}")


def is_low(rank: int, of: int) -> bool:
    """A rank in a table's row the chain would not lead a reader to expect: past TABLE_RANK_SHOWN and a quarter of
    the row ("4th of 32" is not low)."""
    return rank > max(TABLE_RANK_SHOWN, of // 4)


def ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def past_window(reading: Reading) -> bool:
    """Whether a sliding-window model's (Mistral's) QK tables are read at a distance the window masks."""
    window = reading.model.config.sliding_window
    return reading.distance is not None and window is not None and reading.distance >= window


def outside_window(reading: Reading) -> str:
    """Where past_window, the sentence that says the mask hides that key: the table is what the head would score
    there, never what it uses; else ""."""
    if not past_window(reading):
        return ""
    window = reading.model.config.sliding_window
    return (f"\n\n**Outside the window:** the sliding window masks keys {window} or more back, so at distance "
            f"{reading.distance} the QK table is what the head would score, never what it uses: set a distance below "
            f"{window}.")


def key_back(distance: int) -> str:
    """Where a rotary QK table's key sits: "key 1 back", "key 3 back", "key at the query" (distance 0)."""
    return "key at the query" if distance == 0 else f"key {distance} back"


def tables_read(config) -> str:
    """What the tables read, for this kind of model (behind the circuits' fold)."""
    if config.is_llama:
        return ROTARY_MORE
    return CIRCUIT_MORE if config.is_gpt else NOTEBOOK_MORE


def pairs_in_words(table: torch.Tensor, names: list[str], verb: str, among=None) -> list[str]:
    """The PAIRS strongest pairs of ``table`` in words, strongest first: "`q` looks for `u` (+1.23)"."""
    pairs = circuits.strongest_pairs(table, PAIRS, among)
    return [f"`{names[row]}` {verb} `{names[col]}` ({value:+.2f})" for row, col, value in pairs]


def dropped_line(reading: Reading) -> str:
    """The line that says the view reads only the text's first tokens, and what to do ("" where it reads it all)."""
    if not reading.dropped:
        return ""
    kept = reading.ids.numel()
    return (f"\n\n**Reads the first {kept} of {kept + reading.dropped} tokens** ({reading.reads}'s most): shorten "
            "the text.")


def circuits_heading(reading: Reading, layer: int, which: int) -> str:
    """The heading of a head's QK and OV tables: where it looks and what it writes over the text in sight (looks_line),
    HERE where the position's Look-for line goes (in_the_tables), and behind the fold the rest of where it looks, the
    tables' strongest pairs among the text's own tokens (one the model never saw keeps a random embedding, whose
    entries can be the table's largest and mean nothing) and what the tables read."""
    config = reading.model.config
    vocabulary, subset = reading.vocabulary(), reading.subset
    qk, ov = reading.tables(layer, which)
    shown_of = "" if subset is None else f" ({subset.numel()} of the {config.vocabulary_size:,} tokens: the text's, " \
                                         "then the lowest ids)"
    in_text = set(reading.ids.tolist())
    among = [k for k, token in enumerate(reading.table_rows()) if token in in_text]
    looks, promotes = (pairs_in_words(qk, vocabulary, "looks for", among),
                       pairs_in_words(ov, vocabulary, "promotes", among))
    # the pairs read characters alone: a head that looks by position, or one past the first layer (which reads what
    # the layers before wrote), is told apart from them, so a pair cannot read as a second answer beside the chain
    positional = ("This head looks by position, which the tables leave out: their pairs say little of it. "
                  if by_position(reading.looks(layer, which)) else "")
    direct_pairs = ("Like the tables, the pairs below read the characters alone, not what the layers before wrote; the "
                    "chain above is what the head did. " if layer > 0 else "")
    return (f"### What {circuits.head_name(layer, which)} does over your text{looks_line(reading, layer, which)}"
            f"{outside_window(reading)}{HERE}"
            f"\n\n<details><summary>more</summary>\n\n{looks_more(reading, layer, which)}"
            f"{positional}{direct_pairs}The strongest pairs among your text's characters: "
            f"{'; '.join(looks)}; {'; '.join(promotes)}.{shown_of}\n\n"
            f"{tables_read(reading.model.config)} {LOW_RANKS}\n\n</details>")
