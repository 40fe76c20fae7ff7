"""Train tab: start a background run, watch its curves, samples and a probe sentence's attention, stop it.

The tab only talks to the job manager (ctx.jobs); a gr.Timer polls its status, so a reloaded page or a
second browser sees the live run. A run belongs to whoever started it: the browser keeps a random owner token in
``gr.BrowserState`` (made by the page the first time it starts a run, kept in localStorage, so a reloaded page
still owns its run); an API client without one is known by its session (gradio_client keeps one per Client); the
"owner or admin token" field stands in for either, and PLAYGROUND_ADMIN_TOKEN there may stop any run.
"""

from __future__ import annotations

import dataclasses
import functools
import hmac
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gradio as gr

from playground import checks
from playground.budget import MemoryBudget, human
from playground.checkpoints import store as checkpoints
from playground.config import (
    ARCHITECTURE_CHOICES,
    DECAY_CHOICES,
    FAMILY_CHOICES,
    GPT_ARCHITECTURE,
    GPT_FAMILY,
    NOTEBOOK_004,
    OPTIMIZER_CHOICES,
    ConfigError,
    Limits,
    ModelConfig,
    TrainConfig,
)
from playground.device import describe, offered_devices, pick_device
from playground.lens import head_scores
from playground.lens.anatomy.book_models import LAB_TEXT
from playground.model.families import family_settings
from playground.server import admission, tenancy
from playground.server.jobs import FAILED, FINISHED, STOPPED, JobStatus
from playground.text.data import Corpus, decode_text, load_corpus
from playground.text.tokenizer import CharTokenizer, escape_char
from playground.training import curves
from playground.training.estimates import format_budget, format_seconds
from playground.training.presets import DECAY_FLOORS, TRAIN_PRESETS
from playground.training.run import MAX_PROBE_SNAPSHOTS, RunRequest
from playground.ui import forming_plots, plots
from playground.ui.common import AppContext, default_corpus_choice, default_corpus_name, fold, friendly, keep_on_refusal
from playground.ui.events import wire

CORPORA = ("Tiny Shakespeare", "uploaded .txt", "pasted text")
# The fields a preset fills, by start_run's parameter names, in the order /train_preset returns them.
# The run name, the optimizer, the time budget, the learning rate's decay, the architecture and the family come last:
# start_run takes the others first, in this order, and those later (each added after the API had callers, so a call
# that leaves them out still works).
PRESET_FIELDS = ("layers_num", "heads_num", "embedding_dim", "context_size", "batch_size", "steps", "learning_rate",
                 "warmup_steps", "dropout_rate", "seed", "device", "run_name", "optimizer", "time_budget_seconds",
                 "learning_rate_decay", "architecture", "family", "kv_heads_num")
SETTINGS_FIELDS = PRESET_FIELDS[:PRESET_FIELDS.index("run_name")]  # start_run's leading parameters
ESTIMATE_FIELDS = ("layers_num", "heads_num", "embedding_dim", "context_size", "batch_size", "steps", "dropout_rate",
                   "optimizer", "time_budget_seconds", "architecture", "family", "kv_heads_num")
# The one place for the words the page uses for TrainConfig fields whose box is not labelled with the field's name:
# the boxes' labels, the handlers' checks and in_labels (TrainConfig's own messages) all read them here (the time
# budget's box also says what 0 means: TIME_BUDGET_LABEL).
FIELD_LABELS = {"batch_size": "batch size", "learning_rate": "learning rate", "warmup_steps": "warmup steps",
                "time_budget_seconds": "time budget (seconds)", "learning_rate_decay": "learning rate decay"}
TIME_BUDGET_LABEL = "time budget (s; 0: none)"  # the estimate below the fields says what it does
DECAY_INFO = ("after the warm-up the learning rate falls, reaching its lowest at the last step (or when the time "
              "budget runs out): linear, in a straight line to zero; cosine, along half a cosine wave to a tenth of "
              "itself, as nanoGPT does; constant, not at all, as notebook 004's loop. Overlay two runs' curves below "
              "to see what it changes")
ARCHITECTURE_INFO = ("gpt: the playground's GPT (layers of attention and MLP, each head reading the whole "
                     "embedding). notebook_004: notebook 004's attention-only model, one layer whose heads each read "
                     "their own slice of the embedding, no MLP or norm (the toy preset's lab; layers_num 1)")
FAMILY_INFO = ("the blocks of a gpt model. GPT-2's: learned positions, LayerNorm, a GELU MLP. Llama's, as SmolLM2, "
               "Qwen2.5 and TinyLlama have them: rotary positions, RMSNorm, the SwiGLU MLP, query heads sharing the "
               "K/V heads beside")
FAMILY_LABELS = {"gpt": "GPT-2's blocks", "llama": "Llama's blocks"}  # the API's values stay the family names
KV_HEADS_LABEL = "K/V heads (llama; 0: one per query head)"
OPTIMIZER_INFO = ("adamw: AdamW trains every weight. muon: Muon orthogonalises each weight matrix's update "
                  "(Newton–Schulz), so every direction learns at a similar rate; AdamW still trains embeddings, norms "
                  "and the head. A Muon step costs a little more (the estimate counts it) and learns more per step")
TOKEN_CHARS = 200  # an owner or admin token's longest accepted length
STOP_WAIT_SECONDS = 10.0  # Stop answers once the run has saved and ended, or after this long with STOPPING
# The browser keeps its owner token under this key. The secret is fixed, not random per server start, so a token
# survives a restart of the Space (a random one would make every stored token unreadable); it hides nothing
# worth hiding: the token is the visitor's own, and an API client may send any token it likes.
OWNER_STORAGE_KEY, OWNER_STORAGE_SECRET = "attention-playground-owner-token", "attention-playground"
LOCAL_OWNER = "this-process"  # a handler called from Python, with no browser or session (tests)


MEMORISING_PASSES = 20  # passes over the text past which the estimate says the model will memorise it


def corpus_choices(corpus: Corpus) -> list[tuple[str, str]]:
    """The corpus radio's (label, value) pairs: the first is labelled with what it reads, so a server without Tiny
    Shakespeare does not show "Tiny Shakespeare" ticked while it trains on the Sonnets; the value stays the API's."""
    return [(default_corpus_choice(corpus), CORPORA[0]), *((choice, choice) for choice in CORPORA[1:])]


def estimate(layers_num, heads_num, embedding_dim, context_size, batch_size, steps, dropout_rate=0.0,
             optimizer="adamw", time_budget_seconds=0.0, architecture=GPT_ARCHITECTURE, family=GPT_FAMILY,
             kv_heads_num=None, corpus_choice=CORPORA[0],
             upload=None, pasted=None, limits: Limits | None = None, default_corpus: Callable[[], Corpus] = load_corpus,
             memory_budget: MemoryBudget | None = None) -> str:
    """Parameter count, a rough CPU time estimate (a time budget caps it) and the memory a run of the fields as
    they stand needs, its vocabulary the chosen text's symbols (a toy run on pasted "hello world" has 8, not Tiny
    Shakespeare's 65, and its embeddings and head are that much smaller), its parameters those of the
    ``architecture`` (notebook 004's model: 1,048 on "hello world"). ``default_corpus``: what a run on
    "Tiny Shakespeare" reads (offline without it, the built-in Sonnets: 60 symbols)."""
    if corpus_choice not in CORPORA[1:]:
        default = default_corpus()
        symbols = CharTokenizer.train_from_text(default.text).vocabulary_size
        characters = len(default.text)
        name = default_corpus_name(default)
    else:  # nothing uploaded or pasted yet: what Start would say, not Shakespeare's count
        try:
            text, _ = visitors_text(corpus_choice, upload, pasted, limits or Limits())
        except (ValueError, OSError) as exc:
            return f"⚠️ {exc}"
        symbols = CharTokenizer.train_from_text(text).vocabulary_size
        characters = len(text)
        name = "the upload" if corpus_choice == CORPORA[1] else "the pasted text"
    corpus = name + ("'" if name.endswith("s") else "'s")  # "Tiny Shakespeare's", "the built-in Sonnets'"
    try:
        config = ModelConfig(vocabulary_size=symbols, **family_settings(dict(
            context_size=checks.whole_number(context_size, "context_size", 1),
            embedding_dim=checks.whole_number(embedding_dim, "embedding_dim", 1),
            heads_num=checks.whole_number(heads_num, "heads_num", 1),
            layers_num=checks.whole_number(layers_num, "layers_num", 1),
            dropout_rate=0.0 if dropout_rate is None else dropout_rate,
            architecture=checks.choice(architecture or GPT_ARCHITECTURE, "the architecture", ARCHITECTURE_CHOICES),
            **family_fields(family, kv_heads_num))))
        batch = checks.whole_number(batch_size, FIELD_LABELS["batch_size"], 1)
        steps = checks.whole_number(steps, "steps", 1)
        budget = time_budget(time_budget_seconds)
    except ValueError as exc:
        return f"⚠️ {exc}"
    cost = admission.preview(config, batch, steps, limits, optimizer=optimizer, time_budget_seconds=budget,
                             budget=memory_budget)
    by_steps, seconds, memory = cost.by_steps, cost.seconds, cost.memory
    duration = "under a second" if seconds < 1 else f"about {format_seconds(seconds)}"
    # the numbers and the warnings in sight; what qualifies them behind the fold (pictures first: 60 words at most)
    text = (f"**{config.parameter_count():,} parameters** (with {corpus} {checks.count(symbols, 'symbol')}) · "
            f"{batch * config.context_size:,} tokens per step · {duration} of training steps on a quiet 2-core CPU "
            f"· needs about {human(memory)} of memory")
    more = ["The time is rough: evaluations, samples and a busy server add to it."]
    if budget > 0:
        text += f" · time budget {format_budget(budget)}"
        more.append("The time budget ends the run once its training steps have taken that long, its learning rate's "
                    "decay sized to end then: " + (
                        f"all {steps:,} steps would take about {format_seconds(by_steps)} here, so the budget ends it "
                        "first (a faster machine does more steps in it)." if seconds < by_steps else
                        f"its {steps:,} steps should end it first."))
    refusals = cost.refusals  # what Start would refuse, said before it is pressed
    passes = steps * (seconds / by_steps if by_steps else 1.0) * batch * config.context_size / max(characters, 1)
    if passes > MEMORISING_PASSES and not refusals:  # a run that may start: would it only memorise its text?
        text += f" · ⚠️ about {passes:,.0f} passes over {corpus} {characters:,} characters: the model will memorise them"
        more.append("A model that memorises its text sees its validation loss rise while its training loss falls; "
                    "fewer steps or a smaller model learn what carries over to new text.")
    text += "".join(f" · ⚠️ {refusal}" for refusal in refusals)
    return f"{text}\n\n{fold(' '.join(more))}"


def in_labels(message: str) -> str:
    """A TrainConfig message that starts with a field's name, started with its box's label instead:
    "learning_rate must be in (0, 1], got 0.0" -> "learning rate must be in (0, 1], got 0.0"."""
    name, space, rest = message.partition(" ")
    return FIELD_LABELS[name] + space + rest if name in FIELD_LABELS else message


def time_budget(value, limits: Limits | None = None) -> float:
    """The time budget field: seconds, 0 (or empty) for none, at most a server's time limit for a run; the one
    check of it."""
    most = None if limits is None else limits.max_train_seconds
    return 0.0 if value is None else checks.real_number(value, FIELD_LABELS["time_budget_seconds"], 0.0, most)


def preset_note(name: str) -> str:
    """The chosen preset in a sentence: '**tiny**: about a minute on a 2-core CPU: ...', and what this server lacks
    for it ("gpu" on a server without CUDA)."""
    note = f"**{checks.choice(name, 'the preset', tuple(TRAIN_PRESETS))}**: {TRAIN_PRESETS[name].description}"
    wanted = TRAIN_PRESETS[name].train.device
    if wanted not in offered_devices():
        note += (f". This server has no {wanted.upper()} device, so the device is auto ({describe(pick_device())}): "
                 "the estimate below says what that costs")
    return note


def device_box(device: str) -> str:
    """What the device box shows for a run's device: itself where this server offers it, else "auto" (the "gpu"
    preset, or a run started with "cuda", on a server without one: the best it has)."""
    return device if device in offered_devices() else "auto"


def preset_fields(name: str) -> dict[str, Any]:
    """A training preset's value for each field the preset fills, keyed by the field's name (PRESET_FIELDS).

    The run name is the preset's own name; ``preset_values`` makes it a fresh one (tiny-1, tiny-2...).
    """
    if name not in TRAIN_PRESETS:
        raise ValueError(f"unknown preset {checks.shown(name)}; choose one of {', '.join(TRAIN_PRESETS)}")
    preset = TRAIN_PRESETS[name]
    values = {**preset.model.to_dict(), **preset.train.to_dict(), "run_name": name}
    values["device"] = device_box(values["device"])
    values["kv_heads_num"] = values["kv_heads_num"] or 0  # the box's 0: one K/V head per query head
    return {field: values[field] for field in PRESET_FIELDS}


def lab_corpus(name: str, pasted: str | None):
    """The corpus fields for a preset: the toy preset is notebook 004's lab, so it trains on pasted text, "hello
    world" unless something is pasted already; the other presets leave the corpus as it is."""
    if name != "toy":
        return gr.skip(), gr.skip()
    return CORPORA[2], gr.skip() if isinstance(pasted, str) and pasted.strip() else LAB_TEXT


def family_fields(family, kv_heads_num) -> dict:
    """The family radio and the K/V heads box as model settings, checked: ("llama", 2) -> {"family": "llama",
    "kv_heads_num": 2}; 0 or an empty box is None (one K/V head per query head)."""
    heads = None if kv_heads_num in (None, "") else checks.whole_number(kv_heads_num, "kv_heads_num", 0, 64)
    return dict(family=checks.choice(family or GPT_FAMILY, "the family", FAMILY_CHOICES), kv_heads_num=heads or None)


def preset_values(name: str, weights: Path | None = None, taken=()) -> list:
    """/train_preset's outputs: ``preset_fields`` in PRESET_FIELDS order, the run name the first free
    ``<preset>-N`` in ``weights`` and not ``taken`` (so a preset never points at someone's run)."""
    values = preset_fields(name)
    values["run_name"] = checkpoints.fresh_run_name(weights, name, taken)
    return list(values.values())


def identify(ctx: AppContext, token, browser_token, request: gr.Request | None,
             strict: bool = True) -> tenancy.Visitor:
    """Who asks: the typed owner or admin token, else this browser's token, else the API client's session; and from
    where (tenancy.client_address: the client whose share of the quotas it counts against).

    ``strict``: a typed token that is not text of at most TOKEN_CHARS characters is refused; otherwise (the
    status poll) it is ignored. Only its hash leaves this function.
    """
    try:
        typed = checks.text(token, "the owner or admin token", TOKEN_CHARS).strip()
    except ValueError:
        if strict:
            raise
        typed = ""
    stored = browser_token.strip() if isinstance(browser_token, str) and len(browser_token) <= TOKEN_CHARS else ""
    chosen = typed or stored or getattr(request, "session_hash", None) or LOCAL_OWNER
    admin = bool(ctx.admin_token) and hmac.compare_digest(chosen.encode("utf-8", "surrogatepass"),
                                                          ctx.admin_token.encode("utf-8", "surrogatepass"))
    return tenancy.Visitor(tenancy.owner_hash(chosen), admin, ctx.client_of(request))


def start_run(ctx: AppContext, *, layers_num, heads_num, embedding_dim, context_size, batch_size, steps,
              learning_rate, warmup_steps, dropout_rate, seed, device, corpus_choice, upload=None, pasted=None,
              run_name=None, replace=False, token="", browser_token=None, optimizer="adamw",
              time_budget_seconds=0.0, learning_rate_decay="cosine", architecture=GPT_ARCHITECTURE,
              family=GPT_FAMILY, kv_heads_num=None, resume=False, request: gr.Request = None):
    """Validate every field of the Train form, given by name (the API's /train_start takes the same names), then hand
    the run to the job manager.

    A call that leaves out ``optimizer``, ``time_budget_seconds``, ``learning_rate_decay`` or ``architecture`` trains
    a GPT with AdamW, no time budget and cosine decay to a tenth. Notebook 004's model (``architecture``
    "notebook_004") trains with the notebook's AdamW (the toy preset's weight decay 0.01 and no gradient clipping); a
    GPT with the tiny preset's.
    """
    limits = ctx.limits
    visitor = identify(ctx, token, browser_token, request)
    model = dict(layers_num=checks.whole_number(layers_num, "layers_num", 1, 64),
                 heads_num=checks.whole_number(heads_num, "heads_num", 1, 64),
                 embedding_dim=checks.whole_number(embedding_dim, "embedding_dim", 1, 4096),
                 context_size=checks.whole_number(context_size, "context_size", 1, limits.max_context_size),
                 dropout_rate=checks.real_number(dropout_rate, "dropout_rate", 0.0, 0.99), use_bias=False,
                 architecture=checks.choice(architecture or GPT_ARCHITECTURE, "the architecture", ARCHITECTURE_CHOICES),
                 **family_fields(family, kv_heads_num))
    steps = checks.whole_number(steps, "steps", 1, limits.max_steps)
    preset = TRAIN_PRESETS["toy" if model["architecture"] == NOTEBOOK_004 else "tiny"].train
    batch_size = checks.whole_number(batch_size, FIELD_LABELS["batch_size"], 1, 1024)
    try:  # TrainConfig's own checks (learning rate, device...) speak of its fields: said under the page's labels
        train = dataclasses.replace(
            preset, batch_size=batch_size, steps=steps,
            learning_rate=checks.real_number(learning_rate, FIELD_LABELS["learning_rate"]),
            warmup_steps=checks.whole_number(warmup_steps, FIELD_LABELS["warmup_steps"], 0, limits.max_steps),
            seed=checks.seed(seed),
            device=str(device or "auto"), optimizer="adamw" if optimizer is None else optimizer,
            time_budget_seconds=time_budget(time_budget_seconds, limits),
            learning_rate_decay=learning_rate_decay,
            min_learning_rate_ratio=DECAY_FLOORS.get(learning_rate_decay, preset.min_learning_rate_ratio),
            eval_interval=max(1, min(preset.eval_interval, steps // 4 or 1)),
            sample_interval=max(1, min(preset.sample_interval, steps // 4 or 1)),
            checkpoint_interval=max(1, min(500, steps // 2 or 1)))
        TrainConfig.from_dict(train.to_dict())
    except ConfigError as exc:
        raise ConfigError(in_labels(str(exc))) from None
    checks.flag(replace, "replace it")
    corpus_text, corpus_name = visitors_text(corpus_choice, upload, pasted, limits)
    uploaded = corpus_choice == CORPORA[1]
    if uploaded:  # the upload came into Gradio's temp space: keep that within its quota (this file kept)
        ctx.sweep_temp_space(keep=[upload if isinstance(upload, str) else getattr(upload, "name", None)])
    run_name = checkpoints.validate_name("" if run_name is None else run_name, "run name")
    run_request = RunRequest(run_name=run_name, model=model, train=train, corpus_text=corpus_text,
                             resume=bool(resume), weights_dir=ctx.weights, uploaded=uploaded,
                             corpus_name=corpus_name)
    try:
        ctx.jobs.start(run_request, visitor, replace=replace)
    except checkpoints.MissingCheckpointError as exc:  # a reloaded page proposes a fresh name, not its last run's
        last = ctx.jobs.status().run_name
        if resume and last and last != run_request.run_name and ctx.jobs.owned_by(visitor):
            raise checkpoints.MissingCheckpointError(
                f"{exc}; the run on this page is {last}: put {last} in the run name box to resume it") from None
        raise
    # The snapshot slider is left to the status poll: shrunk here (a new run has one snapshot), a poll already on
    # its way with the last run's position would be refused by the slider's new maximum.
    rendered = render_status(ctx.jobs.status(), owned=True)
    return (*rendered[:4], gr.skip(), rendered[5])


def visitors_text(corpus_choice, upload, pasted, limits: Limits) -> tuple[str | None, str | None]:
    """The text an upload or the pasted box holds and its name (the upload's file name without .txt), checked as a run
    takes it; (None, None) for Tiny Shakespeare. Start and the estimate both read it here."""
    if corpus_choice == CORPORA[1]:
        if not upload:
            raise ValueError("choose a .txt file to upload, or pick another corpus")
        path = Path(upload if isinstance(upload, str) else getattr(upload, "name", upload))
        with open(path, "rb") as handle:  # read once, at most one byte past the cap; Gradio's temp space keeps it
            raw = handle.read(limits.max_upload_bytes + 1)
        return decode_text(raw, repr(path.name), limits.max_upload_bytes, size=path.stat().st_size), path.stem
    if corpus_choice == CORPORA[2]:
        text = checks.text(pasted, "The pasted text", limits.max_upload_bytes, limit_bytes=limits.max_upload_bytes)
        if not text.strip():
            raise ValueError("the pasted text is empty")
        return text, None
    if corpus_choice != CORPORA[0]:
        raise ValueError(f"unknown corpus {checks.shown(corpus_choice)}; choose one of {', '.join(CORPORA)}")
    return None, None


def arrival_fields(ctx: AppContext, browser_token=None, request: gr.Request = None) -> list:
    """The PRESET_FIELDS boxes when the page loads. This browser's run, if it is running or stopped: its name and the
    settings it was started with, so Stop and Resume after a reload act on it and Resume goes on as it began (the
    page's tiny-preset values asked a run past step 3,000 to "set steps above"). Else a run name no run has yet,
    the run still training included, and the page's own values in the other boxes."""
    status = ctx.jobs.status()
    if status.run_name and (status.active or status.state == STOPPED) and ctx.jobs.owned_by(
            identify(ctx, "", browser_token, request, strict=False)):
        values = {**status.settings, "run_name": status.run_name}
        values["device"] = device_box(values.get("device", "auto"))
        values["kv_heads_num"] = values.get("kv_heads_num") or 0  # the box's 0: one K/V head per query head
        return [values.get(name, gr.skip()) for name in PRESET_FIELDS]
    return [checkpoints.fresh_run_name(ctx.weights, taken={status.run_name}) if name == "run_name" else gr.skip()
            for name in PRESET_FIELDS]


def stop_run(ctx: AppContext, token="", browser_token=None, request: gr.Request = None):
    """Stop the run in progress: your own, or any with the admin token.

    Waits up to STOP_WAIT_SECONDS for the current step and the checkpoint, so the answer usually says STOPPED
    and where the checkpoint went; a slower step answers STOPPING and the status poll shows the rest.
    """
    visitor = identify(ctx, token, browser_token, request)
    status = ctx.jobs.stop(visitor)
    if not status.active:  # said, not silent: the page showed no change at all
        gr.Warning("Nothing to stop: no run is in progress" +
                   (f" (the last one, {status.run_name}, {status.state})" if status.run_name else ""))
    else:
        status = ctx.jobs.wait(STOP_WAIT_SECONDS)
    return render_status(status, owned=ctx.jobs.owned_by(visitor))


def poll_status(ctx: AppContext, layer, head, snapshot_index, seen, token="", browser_token=None,
                request: gr.Request = None):
    """Redraw only when something changed; follow the newest snapshot while new ones arrive. The last value is the
    name of this page's run once it has finished or stopped with a checkpoint (else unchanged): the Sample tab
    selects it."""
    snapshot_index = checks.real_number(snapshot_index, "snapshot", 0)  # the page's slider: at most its last
    status = ctx.jobs.status()
    owned = ctx.jobs.owned_by(identify(ctx, token, browser_token, request, strict=False))
    key = [status.state, status.run_name, status.step, len(status.probes), len(status.samples), owned, layer, head]
    if seen == key:
        return (*[gr.skip()] * 6, seen, gr.skip())
    follow = not seen or seen[:6] != key[:6]
    finished = owned and status.state in (FINISHED, STOPPED)
    return (*render_status(status, layer or 0, head or 0, None if follow else snapshot_index, owned), key,
            status.run_name if finished else gr.skip())


def render_status(status: JobStatus, layer: int = 0, head: int = 0, snapshot: int | None = None,
                  owned: bool | None = None):
    """(status Markdown, loss figure, samples text, probe heatmap, snapshot slider, heads forming) for one poll.

    ``owned``: whether the page asking owns the run (None: not said). It names no owner either way.
    """
    if status.state == "idle":
        return ("No run yet. Pick a preset, adjust, press **Start**.", plots.line_chart({}, "loss"), "",
                None, gr.Slider(minimum=0, maximum=1, value=0, step=1), None)
    done = max(0, status.step - status.start_step)
    by_steps = status.step / status.steps if status.steps else 0
    progress = max(status.progress, by_steps)
    share = f"{progress:.0%}"
    if status.time_budget_seconds > 0:  # say which of the two ends the run
        budget = format_budget(status.time_budget_seconds)
        share += (f" of its {budget} time budget, or of its {status.steps:,} steps if they come first"
                  if status.progress > by_steps else f" of its steps, or of its {budget} time budget if it comes first")
    bar = "█" * int(progress * 30) + "░" * (30 - int(progress * 30))
    val = f"{status.val_loss[-1][1]:.4f}" if status.val_loss else "–"
    train = f"{status.train_loss[-1][1]:.4f}" if status.train_loss else "–"
    elapsed = format_seconds(status.total_seconds)
    if status.start_step:  # resumed: the run's whole time, and this session's
        elapsed += f" ({format_seconds(status.elapsed_seconds)} since resuming at step {status.start_step})"
    whose, message = "", status.message
    if owned is not False:  # the notes may name the owner's other runs: theirs alone
        message += "".join(f"; {note}" for note in status.notes)
    if status.active and owned is not None:
        whose = (" · your run" if owned else
                 f" · another visitor's run: {status.how_it_ends()}")
    if status.state == FAILED and owned is False:  # the error may name the server's paths or the owner's text
        whose, message = " · another visitor's run", "it failed; its owner sees why (and the server's log keeps it)"
    text = (f"**{status.state.upper()}** · run **{status.run_name}**{whose} · {message}\n\n"
            f"`{bar}` step **{status.step} / {status.steps}** ({share})\n\n"
            f"train loss {train} · validation loss **{val}** · {status.tokens_per_second:,.0f} tokens/s · "
            f"learning rate {status.learning_rate:.2e} · elapsed {elapsed} · "
            f"ETA {format_seconds(status.eta_seconds)}\n\n"
            f"{status.parameter_count:,} parameters · {status.device} · corpus {status.corpus}"
            + (f" · {done} steps this session" if status.start_step else ""))
    # (not when it validates on its training text: its status already says that measures memorising)
    overfitting = curves.overfitting_note(status.train_loss, status.val_loss) if status.held_out else ""
    if overfitting:
        text += f"\n\n⚠️ {overfitting}"
    stride = max(1, len(status.train_loss) // 500)
    figure = plots.line_chart({"train": status.train_loss[::stride], "validation": status.val_loss},
                              "Loss (cross-entropy, nats)")
    samples = "\n\n".join(f"--- step {step} ---\n{sample}" for step, sample in reversed(status.samples[-5:]))
    probe_figure = forming_figure = None
    last = len(status.probes) - 1
    index = last if snapshot is None else max(0, min(int(snapshot), last))
    if status.probes:
        probe = status.probes[index]
        layers, heads = probe.weights.shape[:2]
        # a timer redraws this every poll, so a box out of range or not a whole number is said in the title, not
        # raised as a toast
        try:
            asked = (checks.whole_number(layer, "layer"), checks.whole_number(head, "head"))
            unshown = ""
        except ValueError as exc:
            asked, unshown = (0, 0), f" ({exc}; layer 0 head 0 shown)"
        layer, head = max(0, min(asked[0], layers - 1)), max(0, min(asked[1], heads - 1))
        if not unshown and asked != (layer, head):
            unshown = (f" (asked for layer {asked[0]} head {asked[1]}: this model has layers 0-{layers - 1}, "
                       f"heads 0-{heads - 1})")
        if probe.left_out:  # the run's text lacks them: the probe reads without them, and says so
            listed = ", ".join(f"'{escape_char(c)}'" for c in probe.left_out[:12]) + (
                f" and {len(probe.left_out) - 12} more" if len(probe.left_out) > 12 else "")
            unshown += f" (without {listed}: not in this run's vocabulary)"
        probe_figure = forming_plots.probe_heatmap(
            probe.weights[layer, head], probe.tokens,
            f"Probe attention at step {probe.step} · layer {layer} head {head}{unshown}")
        forming_figure = forming_plots.forming_chart(
            [p.scores for p in status.probes], (layer, head), probe.step,
            _repeat_length(status.settings.get("context_size")), status.settings.get("sliding_window"))
    # a resumed run's snapshots are this session's (they live in memory, not in the checkpoint), unlike its curve
    since = f" since resuming at step {status.start_step}" if status.start_step else ""
    every = _probe_every(status.settings.get("probe_interval"), status.steps)
    slider = gr.Slider(minimum=0, maximum=max(last, 1), value=max(index, 0), step=1,
                       label=f"snapshot ({len(status.probes)} saved{since}, "
                             f"{f'every {every} steps and ' if every else ''}at each evaluation)")
    return text, figure, samples, probe_figure, slider, forming_figure


def _probe_every(interval, steps) -> int:
    """Steps between a run's probe snapshots (run.py's rule: its probe_interval, widened to keep a long run to
    MAX_PROBE_SNAPSHOTS); 0 where it takes them at evaluations only."""
    if not isinstance(interval, int) or interval <= 0:
        return 0
    return max(interval, -(-int(steps or 0) // MAX_PROBE_SNAPSHOTS))


def _repeat_length(context_size) -> int | None:
    """The induction probe's L for a run of ``context_size`` (head_scores.probe_tokens's rule), None where unknown."""
    if not isinstance(context_size, int) or context_size < 4:
        return None
    return min(head_scores.MAX_REPEAT_LENGTH, context_size // 2)


# The page's side of a start: make this browser's owner token (128 random bits) the first time one is needed. It runs
# in the browser as an event of its own, before the handler's, and its value goes to the BrowserState, which keeps it
# in localStorage. (A page-load event cannot make it: it fires before the Train tab's BrowserState has read
# localStorage, and its new token would replace the stored one.)
MAKE_TOKEN_JS = "(token) => window.playgroundPage.ownerToken(token)"  # page/common.js


X_AXES = ("steps", "seconds")


def _series(curve: curves.RunCurve, x_axis: str) -> tuple[str, list, list]:
    if x_axis == X_AXES[0]:
        return curve.label, [(s, loss) for s, loss, _ in curve.val], list(curve.train)
    return (curve.label, [(t, loss) for _, loss, t in curve.val],
            [(s * curve.seconds_per_step, loss) for s, loss in curve.train])


def compare_curves(ctx: AppContext, runs, x_axis, include_current=True):
    """Earlier runs' curves (and the current run's) on one chart, by step or by seconds; a note says what is drawn."""
    x_axis = checks.choice(x_axis, "the x axis", X_AXES)
    names = [] if runs is None else ([runs] if isinstance(runs, str) else runs)
    if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
        raise ValueError("pick earlier runs by name")
    if len(names) > curves.MAX_OVERLAYS:
        raise ValueError(f"pick at most {curves.MAX_OVERLAYS} earlier runs to draw at once (you picked {len(names)})")
    drawn, notes = [], []
    status = ctx.jobs.status()
    if checks.flag(include_current, "include the current run") and status.run_name:
        name = f"{status.run_name} (this run, {status.state})"
        live = curves.live_curve(name, curves.legend(name, status.recipe, status.parameter_count), status.val_loss,
                                 status.train_loss, status.elapsed_seconds, status.step - status.start_step,
                                 status.corpus_name)
        if live is not None:
            drawn.append(live)
            names = [name for name in names if name != status.run_name]
    for name in dict.fromkeys(names):
        curve = curves.read_curve(checkpoints.validate_name(name), ctx.weights)
        if curve is None:
            notes.append(f"{name} has no recorded validation curve")
            continue
        drawn.append(curve)
        if x_axis == X_AXES[1] and curve.seconds_estimated:
            notes.append(f"{name}'s times are its wall time spread evenly over its steps (it was trained before "
                         "runs recorded the time of each evaluation)")
    x_title = "step" if x_axis == X_AXES[0] else "seconds since the run started (evaluation included)"
    figure = plots.curve_overlay([_series(curve, x_axis) for curve in drawn],
                                 title=f"Loss against {x_axis}: validation (bold), training (faint)", x_title=x_title)
    if not drawn:
        notes.insert(0, "Pick earlier runs to draw (and start a run to see it grow against them)")
    elif len(corpora := sorted({curve.corpus for curve in drawn} - {""})) > 1:
        notes.insert(0, f"These runs trained on different texts ({'; '.join(corpora)}): a validation loss compares "
                        "runs only on the same text, so none is named the lowest")
    else:
        best = min(drawn, key=lambda curve: curve.val[-1][1] if curve.val else float("inf"))
        if best.val:
            notes.insert(0, f"Lowest last validation loss: {best.label}: {best.val[-1][1]:.4f} at step "
                            f"{best.val[-1][0]:,} ({format_seconds(best.val[-1][2])})")
    return figure, ". ".join(notes) + "." if notes else ""


def curve_runs(ctx: AppContext) -> gr.Dropdown:
    return gr.Dropdown(choices=curves.runs_with_curves(ctx.weights))


def corpus_fields(choice):
    """Show the upload for "uploaded .txt" and the text box for "pasted text"."""
    return gr.File(visible=choice == CORPORA[1]), gr.Textbox(visible=choice == CORPORA[2])


# A visitor's own text trains a run every visitor can open: said before they paste or upload anything.
SHARED_TEXT_NOTE = ("⚠️ What you upload or paste is not private: the run it trains is listed in every visitor's "
                    "Attention, Model and Sample tabs, its samples show in everyone's Train tab, and a small model "
                    "recites the text it learned. Use text you are happy to share.")


def corpus_note(ctx: AppContext, choice) -> str:
    """Said under the corpus choice before Start: that an upload or pasted text is shared with every visitor (its
    samples show what was pasted, to anyone), and when "Tiny Shakespeare" would
    train on something else (a server offline, or whose download failed, uses the built-in Sonnets)."""
    if choice in (CORPORA[1], CORPORA[2]):
        return SHARED_TEXT_NOTE
    if choice != CORPORA[0]:
        return ""
    corpus = ctx.corpus()
    if corpus.is_tiny_shakespeare:
        return ""
    return (f"⚠️ Tiny Shakespeare is not on this server: {corpus.reason}. A run on it trains on those "
            f"{len(corpus):,} characters, few enough that a long run memorises them (the status says when the "
            "validation loss starts to climb); upload a .txt or paste text for more.")


def build(ctx: AppContext) -> gr.State:
    """The tab; returns the State that names this page's run once it has finished or stopped with a checkpoint."""
    gr.Markdown(
        "Train a small character-level GPT on the server, in the background, and watch its loss fall, its samples "
        "improve and the attention of a fixed probe sentence form. Stop keeps a checkpoint that the Attention, "
        "Model, Why and Sample tabs can load.\n\n" + fold(
            "The toy preset trains notebook 004's attention-only model instead. One run goes at a time, for "
            "everyone. A run is yours: only this browser can stop, resume or replace it. A run stops after "
            f"{format_seconds(ctx.limits.max_train_seconds)}. This server keeps at most {ctx.limits.max_runs} "
            f"visitors' runs, {ctx.limits.max_runs_per_visitor} each (past that your oldest makes room), and keeps "
            f"every run for at least {format_seconds(ctx.limits.run_keep_seconds)} after its last save; after "
            "that the oldest make room for new ones.", "one run at a time, who may stop it, how long runs are kept")
    )
    first = preset_fields("tiny")
    fields: dict[str, gr.components.Component] = {}  # by name: PRESET_FIELDS, start_run's parameters
    with gr.Row():
        preset = gr.Dropdown(list(TRAIN_PRESETS), value="tiny", label="preset", info="fills the fields below")
        fields["run_name"] = gr.Textbox(checkpoints.fresh_run_name(ctx.weights), label="run name (folder in weights/)")
        fields["device"] = gr.Dropdown(offered_devices(), value=first["device"], label="device",
                                       info="the devices this server has")
    preset_md = gr.Markdown(preset_note("tiny"))
    with gr.Row():
        for name in ("layers_num", "heads_num", "embedding_dim", "context_size"):
            fields[name] = gr.Number(first[name], label=name)
        fields["dropout_rate"] = gr.Number(first["dropout_rate"], label="dropout_rate")
    with gr.Row():
        fields["batch_size"] = gr.Number(first["batch_size"], label=FIELD_LABELS["batch_size"])
        fields["steps"] = gr.Number(first["steps"], label="steps")
        fields["time_budget_seconds"] = gr.Number(first["time_budget_seconds"], label=TIME_BUDGET_LABEL)
        fields["learning_rate"] = gr.Number(first["learning_rate"], label=FIELD_LABELS["learning_rate"])
        fields["warmup_steps"] = gr.Number(first["warmup_steps"], label=FIELD_LABELS["warmup_steps"])
        fields["seed"] = gr.Number(first["seed"], label="seed")
    with gr.Row():
        fields["optimizer"] = gr.Radio(list(OPTIMIZER_CHOICES), value=first["optimizer"], label="optimizer",
                                       info=OPTIMIZER_INFO)
        fields["learning_rate_decay"] = gr.Radio(list(DECAY_CHOICES), value=first["learning_rate_decay"],
                                                 label=FIELD_LABELS["learning_rate_decay"], info=DECAY_INFO)
        fields["architecture"] = gr.Radio(list(ARCHITECTURE_CHOICES), value=first["architecture"],
                                          label="architecture", info=ARCHITECTURE_INFO)
        fields["family"] = gr.Radio([(FAMILY_LABELS[name], name) for name in FAMILY_CHOICES], value=first["family"],
                                    label="family", info=FAMILY_INFO)
        fields["kv_heads_num"] = gr.Number(first["kv_heads_num"], label=KV_HEADS_LABEL)
    with gr.Row():
        corpus = gr.Radio(list(CORPORA), value=CORPORA[0], label="corpus")
        upload = gr.File(label=".txt upload", file_types=[".txt"], type="filepath", visible=False)
        pasted = gr.Textbox("", label="pasted text", lines=3, visible=False)
    corpus_md = gr.Markdown(label="corpus note")
    gr.on(None, lambda: gr.Radio(choices=corpus_choices(ctx.corpus())), None, corpus, api_name="train_corpus_label",
          api_visibility="private", show_progress="hidden")
    # the corpus a run reads, as the page opens (not as the app is built: reading it may download Tiny Shakespeare)
    estimate_with_limits = functools.partial(estimate, limits=ctx.limits, default_corpus=ctx.corpus,
                                             memory_budget=ctx.budget)
    estimate_md = gr.Markdown(label="estimate")
    with gr.Row():
        replace_box = gr.Checkbox(False, label="replace it",
                                  info="start over in the run of this name; only its owner can")
        token = gr.Textbox("", label="owner or admin token", type="password", max_length=TOKEN_CHARS,
                           info="empty: this browser's own token")
    with gr.Row():
        start = gr.Button("Start", variant="primary")
        resume = gr.Button("Resume run")
        stop = gr.Button("Stop", variant="stop")
    status_md = gr.Markdown(label="run status")  # "status" is a key of Gradio's own translations: a console warning
    loss_plot = gr.Plot(label="Loss")
    with gr.Accordion("Compare this run's curve with earlier runs", open=False) as compare_section:
        gr.Markdown("Overlay any earlier run's curves on this one, by step or by wall time, to see what another "
                    "optimizer, batch size, learning rate, decay or model size changes.")
        with gr.Row():
            earlier = gr.Dropdown(curves.runs_with_curves(ctx.weights), value=[], multiselect=True,
                                  max_choices=curves.MAX_OVERLAYS, label="earlier runs", scale=3)
            x_axis = gr.Radio(list(X_AXES), value=X_AXES[0], label="x axis", scale=1)
            current = gr.Checkbox(True, label="include the current run", scale=1)
            redraw = gr.Button("Redraw", scale=0, min_width=100)
        compare_plot = gr.Plot(label="Curves compared")
        compare_note = gr.Markdown(label="curves note")
    with gr.Row():
        with gr.Column():
            samples = gr.Textbox(label="Samples (newest first)", lines=12)
        with gr.Column():
            with gr.Row():
                probe_layer = gr.Number(0, label="layer")
                probe_head = gr.Number(0, label="head")
            snapshot = gr.Slider(0, 1, value=0, step=1, label="snapshot")
            probe_plot = gr.Plot(label="Probe sentence attention")
    forming_plot = gr.Plot(label="Heads forming")
    timer = gr.Timer(1.0)
    owner_token = gr.BrowserState("", storage_key=OWNER_STORAGE_KEY, secret=OWNER_STORAGE_SECRET)
    # what the events read of it: a hidden box that mirrors it, so the API's browser_token has a default ("") that an
    # API client leaves out (a BrowserState has no value a client can be offered)
    page_token = gr.Textbox("", visible=False)
    gr.on(None, None, owner_token, page_token, js="(token) => token", api_name="train_page_token",
          api_visibility="private", show_progress="hidden")

    settings = [fields[name] for name in SETTINGS_FIELDS]
    outputs = [status_md, loss_plot, samples, probe_plot, snapshot, forming_plot]

    def preset_changed(name):
        return preset_values(name, ctx.weights, {ctx.jobs.status().run_name})

    # every page load gets a name no run has yet (my-run-1, my-run-2...), so an existing run is replaced only on
    # purpose; a reloaded page whose run is running or stopped gets that run's name and settings, for Stop and Resume
    wire(functools.partial(gr.on, None), arrival_fields, ctx, owner_token, [fields[name] for name in PRESET_FIELDS],
         api_name="train_arrival", api_visibility="private", show_progress="hidden")
    wire(preset.change, preset_changed, None, preset, [fields[name] for name in PRESET_FIELDS],
         api_name="train_preset")
    wire(preset.change, preset_note, None, preset, preset_md, api_name="train_preset_note", api_visibility="private",
         show_progress="hidden")
    preset.change(lab_corpus, [preset, pasted], [corpus, pasted], api_name="train_preset_corpus",
                  api_visibility="private", show_progress="hidden")
    # no triggers: when the page loads and whenever the corpus choice changes
    wire(functools.partial(gr.on, None), corpus_note, ctx, corpus, corpus_md, api_name="train_corpus_note",
         api_visibility="private", show_progress="hidden")
    corpus.change(corpus_fields, corpus, [upload, pasted], api_name="train_corpus", api_visibility="private",
                  show_progress="hidden")
    estimate_inputs = [*(fields[name] for name in ESTIMATE_FIELDS), corpus, upload, pasted]
    gr.on(None, estimate_with_limits, estimate_inputs, estimate_md, api_name="train_estimate_arrival",
          api_visibility="private", show_progress="hidden")
    for name, field in zip((*ESTIMATE_FIELDS, "corpus", "upload", "pasted"), estimate_inputs):
        field.change(estimate_with_limits, estimate_inputs, estimate_md,
                     api_name=f"train_estimate_{name}", api_visibility="private",
                     show_progress="hidden")
    run_inputs = [*settings, corpus, upload, pasted, fields["run_name"], replace_box, token, page_token,
                  fields["optimizer"], fields["time_budget_seconds"], fields["learning_rate_decay"],
                  fields["architecture"], fields["family"], fields["kv_heads_num"]]
    seen = gr.State([])  # what the status poll last drew (poll_status's key)
    started = wire(start.click(None, owner_token, [owner_token, page_token], js=MAKE_TOKEN_JS).then, start_run, ctx,
                   run_inputs,
                   outputs, api_name="train_start")
    resumed = wire(resume.click(None, owner_token, [owner_token, page_token], js=MAKE_TOKEN_JS).then, start_run, ctx,
                   run_inputs,
                   outputs, fixed=dict(resume=True), api_name="train_resume")
    keep_on_refusal(started, outputs, "train_start_refused")
    keep_on_refusal(resumed, outputs, "train_resume_refused")
    # A run can end before the page has Start's answer (notebook 004's lab takes a second or two): a poll that drew it
    # finished, landing first, was then covered by Start's "step 0" for good, the later polls seeing nothing new. Once
    # Start's answer is on the page the poll forgets what it drew, so its next tick draws the run as it stands.
    for event, name in ((started, "train_start_redraw"), (resumed, "train_resume_redraw")):
        event.success(lambda: [], None, seen, api_name=name, api_visibility="private", show_progress="hidden")
    keep_on_refusal(wire(stop.click, stop_run, ctx, [token, page_token], outputs, api_name="train_stop"), outputs,
                    "train_stop_refused")
    compare_io = dict(inputs=[earlier, x_axis, current], outputs=[compare_plot, compare_note],
                      api_visibility="private", show_progress="hidden", **ctx.fast_lane)
    earlier.focus(functools.partial(curve_runs, ctx), None, earlier, api_name="train_curve_runs",
                  api_visibility="private", show_progress="hidden")
    # drawn when opened too: the current run's curve is there before anything is picked
    wire(functools.partial(gr.on, [compare_section.expand, earlier.change, x_axis.change, current.change,
                                   redraw.click]), compare_curves, ctx, api_name="train_compare_curves", **compare_io)
    finished_run = gr.State("")
    # the snapshot slider's bounds follow the run in each page: poll_status checks the value itself
    wire(timer.tick, poll_status, ctx, [probe_layer, probe_head, snapshot, seen, token, page_token],
         [*outputs, seen, finished_run], own_checks=("snapshot_index",), api_name="train_status",
         show_progress="hidden", trigger_mode="always_last")
    # a drag ends in release; a number typed in the slider's box is an input (release came only once the box lost
    # focus: Enter moved the slider but not the chart)
    gr.on([snapshot.release, snapshot.input],
          friendly(lambda layer, head, index: render_status(ctx.jobs.status(), layer or 0, head or 0, index)),
          [probe_layer, probe_head, snapshot], outputs, api_name="train_replay", api_visibility="private",
          trigger_mode="always_last")
    return finished_run
