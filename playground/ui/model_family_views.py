"""The Model tab's views of a checkpoint, any family: ``checkpoint_views`` is the tab's one entry for a checkpoint.
The five levels read every family through its named points (model.base.run_with_cache; lens.anatomy's levels),
drawn with model_views' figures; what only one family has is drawn where it has it (lens.anatomy.family_levels): the
rotation at levels 1 and 2, the K/V head a query head reads, RMSNorm and the gated MLP at level 4. A GPT's block
level keeps its switches (post-norm, encoder, ReLU, dropout), what-ifs rebuilt from the block's own submodules.
"""

from __future__ import annotations

import torch

from playground import budget, checks
from playground.checks import count
from playground.lens import anatomy, walkthrough
from playground.lens import family as lens_family
from playground.lens.anatomy import family_lessons, lessons
from playground.lens.anatomy import family_levels as family
from playground.model.families import describe_architecture, require_gpt
from playground.model.llama import RMSNorm
from playground.ui import model_views, plots, transpose_picture
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
    heading = _heading("block", family_lessons.GATED_LOOK_FOR, family_lessons.gated_formula(),
                       family_lessons.gated_text(walked, query), where, notes)
    return heading, reads, _mlp_figure(walked, query), guesses, means, ""


def view_cost(level: str, config, length: int, cells: int, bars: int, forget_transpose: bool = False,
              model=None) -> budget.Cost:
    """anatomy.view_cost of the level (every family's levels read alike), with what only one family's drawing keeps
    beside it (``model``'s): a rotary head's q and k before and after the rotation and the angles (6 (T, C) at most),
    a gated block's MLP parts (gate, SiLU(gate), up, their product, 4 (T, hidden), and its output (T, C)).
    Measured against a Llama-family model's peak in tests/test_inference_budget.py."""
    T, C, h, V, L = length, config.embedding_dim, config.heads_num, config.vocabulary_size, config.layers_num
    base = anatomy.view_cost(level, length=T, embedding_dim=C, heads_num=h, layers_num=L, vocabulary_size=V,
                             parameters=config.parameter_count(), heatmap_cells=cells, bars=bars,
                             forget_transpose=forget_transpose)
    f, extra = budget.BYTES_PER_FLOAT, []
    if model is not None and level in ("score", "head") and lens_family.is_rotary(model):
        extra.append(("the rotation's q, k and angles", f * 6 * T * C))
    if model is not None and level == "block" and family.is_gated(model, 0):
        extra.append(("the gated MLP's parts", f * (4 * T * config.mlp_width + T * C)))
    return budget.combined(f"this {level} view", base, budget.Cost("", tuple(extra)))


def checkpoint_views(ctx: AppContext, checkpoint, text: str, settings: Settings, part, queries: list) -> list[View]:
    """The view of ``settings`` at each query position of ``queries``, for a checkpoint of any family with blocks, the
    model run once for all of them (a spare round of query positions costs their figures, not a forward pass each)
    under one reservation for them all. Every level reads the model through its named points; what only one family
    has is drawn where it has it: the rotation at levels 1-2, shared K/V heads, the gated MLP and RMSNorm."""
    loaded = ctx.checkpoint(checkpoint or "")
    config = loaded.config
    if not config.is_llama:
        require_gpt(config, loaded.name, "the Model tab")  # notebook 004's model has no blocks to zoom into
    parts = lessons.map_parts(config.layers_num)
    prepared, refused = model_views.prepared_text(loaded, text, settings, part, parts, queries)
    if refused:
        return refused
    ids, tokens = prepared.ids, prepared.tokens
    model = loaded.model
    T, C, h, d, L = len(tokens), config.embedding_dim, config.heads_num, config.head_size, config.layers_num
    level = settings.level
    layer = 0 if level == "model" else checks.index(settings.layer, "layer", L, "layers")
    forget = level == "heads" and settings.forget_transpose
    grouped = config.kv_heads != h  # several query heads share a K/V head
    cells, bars = _figure_cells(level, T, C, h, d, L, anatomy.TOP, forget)
    cost = view_cost(level, config, T, cells * len(queries), bars * len(queries), forget, model)
    heads_text = f"{h} query heads over {config.kv_heads} K/V heads" if grouped else f"{h} heads"
    named = describe_architecture(config).split(" (")[0]  # "Llama family"; a GPT: ""
    where = (f"{loaded.name}: {named + ', ' if named else ''}{L} blocks, {heads_text} of {d} features, C = {C}, on "
             f"your {count(T, 'token')}")
    notes = list(prepared.notices)
    if grouped and level in ("heads", "block"):  # levels 1-2 say which K/V head their one head reads
        notes.append(family_lessons.grouped_heads(h, config.kv_heads) + ".")
    with ctx.budget.reserve(cost, hint=f"use a shorter text (it is {T} tokens)"):
        if level in ("score", "head") and lens_family.is_rotary(model):
            shown = _rotary_levels(model, ids, tokens, layer, settings, level, notes, loaded.name)
        elif level in ("score", "head"):
            head = checks.index(settings.head, "head", h, "heads per layer")
            trace = walkthrough.checkpoint_head_inputs(model, ids, layer, head, tokens=tokens).trace()
            where_head = f"layer {layer}, head {head} of {loaded.name} on your {count(T, 'token')}"
            if level == "score":
                def shown(settings):
                    return _score_view(trace, settings, where_head, notes)
            else:
                hint = (f"**Open the Attention tab** (trained checkpoint, layer {layer}, head {head}) to step "
                        "through this head's seven stages: X, Q K V, scores, scaling, mask, softmax, output.")

                def shown(settings):
                    return _head_view(trace, settings, where_head, notes, hint)
        elif level == "heads":
            heads = anatomy.all_heads(model, ids, layer, forget_transpose=forget)
            head = checks.index(settings.head, "head", h, "heads per layer")

            def shown(settings):
                query, clamped = anatomy.position(settings.query, "query", T)
                grid, concatenated, projected = _heads_figures(heads, tokens, query, f"Layer {layer}", head)
                told = notes + model_views._clamp_notes(clamped, settings.query, False, None, T)
                if not forget:
                    return (_heading("heads", lessons.HEADS_LOOK_FOR, lessons.heads_formula(heads),
                                     lessons.heads_text(heads, query, tokens[query]), where, told),
                            grid, concatenated, projected, None, "")
                return (_heading("heads", lessons.FORGOTTEN_LOOK_FOR, lessons.forgotten_formula(heads),
                                 lessons.forgotten_text(heads, query, tokens), f"layer {layer} of {where}", told),
                        grid, concatenated, projected,
                        model_views._forgotten_map(heads.forgotten, tokens, query, f"Layer {layer}"),
                        lessons.forgotten_table(heads.forgotten, tokens, model_views._table_start(query)))
        elif level == "block" and family.is_gated(model, layer):
            walked = family.gated_block_walk(model, ids, layer)

            def shown(settings):
                return _block_view(loaded, walked, tokens, settings, f"layer {layer} of {where}", list(notes))
        elif level == "block":
            x = anatomy.block_input(model, ids, layer)  # the switches rebuild the block from here (what-ifs)

            def shown(settings):
                return model_views._block_view(model.blocks[layer], x, tokens, h, settings,
                                               f"layer {layer} of {where}", notes, lessons.GPT_SWITCHES, loaded)
        else:
            told = notes + ([family_lessons.FINAL_RMSNORM] if isinstance(model.final_norm(), RMSNorm) else [])

            def shown(settings):
                return _lens_view(loaded, ids, tokens, settings, part, where, told)
        views = []
        for query in queries:
            figures = shown(settings._replace(query=query))
            picture = transpose_picture.picture(heads.forgotten, tokens) if forget else ""
            views.append(View(_current_part(level, layer, part, parts), *figures, parts, picture))
    return views


def _rotary_levels(model, ids, tokens: list[str], layer: int, settings: Settings, level: str, notes: list[str],
                   name: str):
    """Levels 1-2 of a rotary model: the head's trace on q and k after the rotation, the rotation drawn beside it."""
    T = len(tokens)
    head = family.rotary_head(model, ids, layer, settings.head, tokens)
    told = notes + [family_lessons.head_sharing(head), family_lessons.rotation(head)]
    where_head = f"layer {layer}, head {head.head} (K/V head {head.kv_head}) of {name} on your {count(T, 'token')}"
    if level == "score":
        def shown(settings):
            query, _ = anatomy.position(settings.query, "query", T)
            key, _ = anatomy.position(settings.key, "key", T)
            heading, vectors, products, scores, _, table = _score_view(
                head.trace, settings, where_head, told + [family_lessons.score_rotation(head, query, key)])
            return heading, vectors, products, scores, _rotation_figure(head, query, key), table
        return shown
    hint = (f"The scores read q and k after the rotation; K and V come from K/V head {head.kv_head}, "
            f"which heads {', '.join(str(n) for n in head.sharing)} share.")

    def shown(settings):
        query, _ = anatomy.position(settings.query, "query", T)
        heading, weights, output, *_ = _head_view(head.trace, settings, where_head, told, hint)
        return heading, weights, output, _angles_figure(head, tokens, query), None, ""
    return shown
