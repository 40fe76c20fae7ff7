"""The Model tab's views of a Llama-family checkpoint (rotary positions, grouped K/V heads, RMSNorm, SwiGLU): the five
levels read through the model's named points (lens.anatomy.family_levels), drawn with model_views' figures, and what
only this family has drawn as it is: the rotation at levels 1 and 2, the K/V head a query head reads, RMSNorm and the
gated MLP at level 4. ``checkpoint_views`` is the tab's one entry for a checkpoint: other families go to model_views.
"""

from __future__ import annotations

import torch

from playground import budget, checks
from playground.checks import count
from playground.lens import anatomy
from playground.lens.anatomy import family_lessons, lessons
from playground.lens.anatomy import family_levels as family
from playground.ui import model_views, plots
from playground.ui.common import AppContext
from playground.ui.model_views import (
    Settings,
    View,
    _block_guesses,
    _current_part,
    _figure_cells,
    _head_view,
    _heading,
    _heads_figures,
    _heatmap,
    _lens_view,
    _reads_figure,
    _score_view,
    _symmetric,
    _window_start,
)

DEFAULT_SWITCHES = ("pre", True, "gelu", 0.0)  # the block switches as the page first shows them


def checkpoint_view(ctx: AppContext, checkpoint, text: str, settings: Settings, part) -> View:
    return checkpoint_views(ctx, checkpoint, text, settings, part, [settings.query])[0]


def checkpoint_views(ctx: AppContext, checkpoint, text: str, settings: Settings, part, queries: list) -> list[View]:
    """model_views.checkpoint_views for every family: a Llama-family checkpoint's views are made here."""
    loaded = ctx.checkpoint(checkpoint or "")
    if not loaded.config.is_llama:
        return model_views.checkpoint_views(ctx, checkpoint, text, settings, part, queries)
    return _family_views(ctx, loaded, text, settings, part, queries)


def _angles_figure(head: family.RotaryHead, tokens: list[str], query: int):
    """Positions x feature pairs: the angle each pair of q's and k's features turns at each position."""
    angles = torch.remainder(head.angles, 2 * torch.pi)  # (T, d/2), in [0, 2π)
    pairs = [f"d{i}+d{i + head.angles.size(1)}" for i in range(head.angles.size(1))]
    return _heatmap(angles, tokens, pairs, f"The rotation: the angle (radians, mod 2π) each pair of q and k features "
                    f"turns at each position (base {head.rope_theta:g})", colorscale="Twilight", zmin=0.0,
                    zmax=2 * torch.pi, highlight_row=query, row_start=_window_start(query), sparse_columns=True,
                    x_title="feature pair", y_title="position")


def _rotation_figure(head: family.RotaryHead, query: int, key: int):
    """q_i and k_j before and after the rotation, feature by feature."""
    rows = torch.stack((head.q_before[query], head.trace.q[query], head.k_before[key], head.trace.k[key]))  # (4, d)
    return _heatmap(rows, [f"q_{query} before", f"q_{query} rotated", f"k_{key} before", f"k_{key} rotated"],
                    [f"d{n}" for n in range(rows.size(1))], f"The rotation: q_{query} and k_{key} before and after "
                    f"(K/V head {head.kv_head})", **_symmetric(rows), sparse_columns=True, x_title="feature",
                    height=320)


def _mlp_figure(walked: family.GatedBlockWalk, query: int):
    """The gated MLP at the query: gate, SiLU(gate), up and what passes, unit by unit (a window of the units)."""
    mlp = walked.mlp
    rows = torch.stack((mlp.gate[query], mlp.activated[query], mlp.up[query], mlp.gated[query]))  # (4, hidden)
    return _heatmap(rows, ["gate", "SiLU(gate)", "up", "SiLU(gate) × up"], [f"u{n}" for n in range(rows.size(1))],
                    f"The gated MLP (SwiGLU) at position {query}: each hidden unit's gate, up and what passes to "
                    "down_proj", **_symmetric(rows), sparse_columns=True, x_title="hidden unit", height=320)


def _block_view(loaded, walked: family.GatedBlockWalk, tokens: list[str], settings: Settings, where: str,
                notes: list[str]) -> tuple:
    walk = walked.walk
    T, h = walk.weights.size(1), walk.weights.size(0)
    head = checks.index(settings.head, "head", h, "heads per layer")
    query, clamped = anatomy.position(settings.query, "query", T)
    notes = notes + model_views._clamp_notes(clamped, settings.query, False, None, T)
    if (settings.norm_order, settings.causal, settings.activation, settings.dropout) != DEFAULT_SWITCHES:
        notes.append(family_lessons.SWITCHES_NOT_APPLIED)
    config = loaded.config
    reads = _reads_figure(walk.weights[:, query], walk.visible[query], tokens,
                          f"Where each head looks from position {query} ({tokens[query]}): its attention weights "
                          f"({config.heads_num} query heads over {config.kv_heads} K/V heads)", query, head)
    guesses = _block_guesses(loaded, walk, query, tokens)
    names = [point.name for point in walk.points]
    means = plots.bar_chart(names, torch.stack([point.norms for point in walk.points]).mean(dim=1).tolist(),
                            "Mean ‖x‖ over the tokens at each point", "‖x‖", height=420)
    notes.append(family_lessons.grouped_heads(config.heads_num, config.kv_heads) + ".")
    heading = _heading("block", family_lessons.GATED_LOOK_FOR, family_lessons.gated_formula(),
                       family_lessons.gated_text(walked, query), where, notes)
    return heading, reads, _mlp_figure(walked, query), guesses, means, ""


def view_cost(level: str, config, length: int, cells: int, bars: int) -> budget.Cost:
    """model_views' cost of the level, with what reading the named points adds: a whole forward to the logits
    (T, V) and the points kept of one layer (or the stream after every block, at the model level)."""
    T, C, h, V, L = length, config.embedding_dim, config.heads_num, config.vocabulary_size, config.layers_num
    base = anatomy.view_cost(level, length=T, embedding_dim=C, heads_num=h, layers_num=L, vocabulary_size=V,
                             parameters=config.parameter_count(), heatmap_cells=cells, bars=bars)
    f = budget.BYTES_PER_FLOAT
    points = (L + 1) * T * C if level == "model" else 12 * T * C + 2 * h * T * T + 4 * T * config.mlp_width
    return budget.combined(f"this {level} view", base,
                           budget.Cost("", (("the logits", f * T * V), ("the named points", f * points))))


def _family_views(ctx: AppContext, loaded, text: str, settings: Settings, part, queries: list) -> list[View]:
    config = loaded.config
    parts = lessons.map_parts(config.layers_num)
    prepared, refused = model_views.prepared_text(loaded, text, settings, part, parts, queries)
    if refused:
        return refused
    ids, tokens = prepared.ids, prepared.tokens
    T, C, h, d, L = len(tokens), config.embedding_dim, config.heads_num, config.head_size, config.layers_num
    level = settings.level
    layer = 0 if level == "model" else checks.index(settings.layer, "layer", L, "layers")
    forget = level == "heads" and settings.forget_transpose
    cells, bars = _figure_cells(level, T, C, h, d, L, anatomy.TOP, forget)
    cost = view_cost(level, config, T, cells * len(queries), bars * len(queries))
    where = (f"{loaded.name}: {family_lessons.FAMILY}, {L} blocks, {h} query heads over {config.kv_heads} K/V heads "
             f"of {d} features, C = {C}, on your {count(T, 'token')}")
    notes = list(prepared.notices)
    with ctx.budget.reserve(cost, hint=f"use a shorter text (it is {T} tokens)"):
        if level in ("score", "head"):
            head = family.rotary_head(loaded.model, ids, layer, settings.head, tokens)
            told = notes + [family_lessons.head_sharing(head), family_lessons.rotation(head)]
            where_head = (f"layer {layer}, head {head.head} (K/V head {head.kv_head}) of {loaded.name} on your "
                          f"{count(T, 'token')}")
            if level == "score":
                def shown(settings):
                    query, _ = anatomy.position(settings.query, "query", T)
                    key, _ = anatomy.position(settings.key, "key", T)
                    heading, vectors, products, scores, _, table = _score_view(
                        head.trace, settings, where_head, told + [family_lessons.score_rotation(head, query, key)])
                    return heading, vectors, products, scores, _rotation_figure(head, query, key), table
            else:
                hint = (f"The scores read q and k after the rotation; K and V come from K/V head {head.kv_head}, "
                        f"which heads {', '.join(str(n) for n in head.sharing)} share.")

                def shown(settings):
                    query, _ = anatomy.position(settings.query, "query", T)
                    heading, weights, output, *_ = _head_view(head.trace, settings, where_head, told, hint)
                    return heading, weights, output, _angles_figure(head, tokens, query), None, ""
        elif level == "heads":
            heads = family.heads_from_points(loaded.model, ids, layer, forget_transpose=forget)
            head = checks.index(settings.head, "head", h, "heads per layer")
            grouped = family_lessons.grouped_heads(h, config.kv_heads) + "."

            def shown(settings):
                query, clamped = anatomy.position(settings.query, "query", T)
                grid, concatenated, projected = _heads_figures(heads, tokens, query, f"Layer {layer}", head)
                told = notes + [grouped] + model_views._clamp_notes(clamped, settings.query, False, None, T)
                if not forget:
                    return (_heading("heads", lessons.HEADS_LOOK_FOR, lessons.heads_formula(heads),
                                     lessons.heads_text(heads, query, tokens[query]), where, told),
                            grid, concatenated, projected, None, "")
                return (_heading("heads", lessons.FORGOTTEN_LOOK_FOR, lessons.forgotten_formula(heads),
                                 lessons.forgotten_text(heads, query, tokens), f"layer {layer} of {where}", told),
                        grid, concatenated, projected,
                        model_views._forgotten_map(heads.forgotten, tokens, query, f"Layer {layer}"),
                        lessons.forgotten_table(heads.forgotten, tokens, model_views._table_start(query)))
        elif level == "block":
            walked = family.gated_block_walk(loaded.model, ids, layer)

            def shown(settings):
                return _block_view(loaded, walked, tokens, settings, f"layer {layer} of {where}",
                                   list(notes))
        else:
            def shown(settings):
                return _lens_view(loaded, ids, tokens, settings, part, where, notes + [family_lessons.FINAL_RMSNORM])
        views = []
        for query in queries:
            figures = shown(settings._replace(query=query))
            picture = ""
            if level == "heads" and forget:
                picture = model_views.transpose_picture.picture(heads.forgotten, tokens)
            views.append(View(_current_part(level, layer, part, parts), *figures, parts, picture))
    return views
