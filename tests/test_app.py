"""The app builds, launches on 127.0.0.1, and every public api_name answers through gradio_client."""

from __future__ import annotations

import json
import re
import socket
import time
import urllib.request

import pytest
from conftest import local_client
from gradio_client import handle_file
from gradio_client.exceptions import AppError
from text_support import MOST_WORDS, visible_words

from playground.config import Limits
from playground.ui import build_app, launch_options

TAB_ORDER = ["Tokenize", "Attention", "Model", "Why", "Compare", "Train", "Sample"]


def _figure(plot: dict) -> dict:
    """A gr.Plot output as gradio_client returns it -> the Plotly figure's JSON (data and layout)."""
    assert plot["type"] == "plotly"
    return json.loads(plot["plot"])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def served(tiny_weights, tmp_path_factory):
    weights = tmp_path_factory.mktemp("served-weights")
    for item in tiny_weights.iterdir():
        if not item.name.startswith("."):
            (weights / item.name).mkdir()
            for file in item.iterdir():
                (weights / item.name / file.name).write_bytes(file.read_bytes())
    app = build_app(weights=weights, limits=Limits(max_steps=500, max_new_tokens=300))
    app.launch(server_name="127.0.0.1", server_port=_free_port(), prevent_thread_lock=True, quiet=True,
               **launch_options(app.playground_context.limits))
    client = local_client(app.local_url)
    yield app, client, weights
    app.playground_context.jobs.stop()
    app.playground_context.jobs.wait(30)
    app.close()


def test_number_fields_leave_their_bounds_and_rounding_to_the_handlers(served):
    """A gr.Number with a minimum or maximum makes Gradio refuse out-of-range input itself, with a message that names
    no field ("Value -5 is less than minimum value 1."), and one with a precision rounds silently; without them the
    handler's check names the field."""
    app, client, _ = served
    numbers = [block for block in app.blocks.values() if block.__class__.__name__ == "Number"]
    bounded = [block.label for block in numbers if block.minimum is not None or block.maximum is not None]
    assert numbers and bounded == []
    # nor a precision: precision=0 rounds 1.5 to 2 before the handler sees it (a layer box's 1.5 showed layer 2)
    rounded = [block.label for block in numbers if block.precision is not None]
    assert rounded == []
    with pytest.raises(AppError, match="(?i)T must be a whole number, got 1.5"):
        client.predict(64, 4, 1.5, 1, 0, True, "fp32", "cpu", api_name="/compare")
    with pytest.raises(AppError, match="(?i)embedding_dim must be positive, got -5"):
        client.predict(-5, 4, 8, 1, 0, True, "fp32", "cpu", api_name="/compare")


def test_gradios_own_checks_name_the_field_and_print_no_traceback(served, capfd):
    """Gradio checks a slider's bounds and a radio's choices itself, before the handler: its messages named no field
    ("Value 0 is less than minimum value 0.05.", for either of two sliders), a string for a slider failed as an
    internal error, and each printed a traceback in the server's log (now checked by playground/ui/events.py)."""
    _, client, _ = served
    capfd.readouterr()
    with pytest.raises(AppError, match="^attention dropout p must be at most 0.9, got 1.0$"):
        client.predict("trained checkpoint", "shakespeare-char", "To be", "4. The block", 0, 0, -1, 0, "pre",
                       "decoder", "gelu", 1.0, 0, False, api_name="/model_view")
    # the snapshot slider's bounds change per page with the run: the poll checks it, a value past the end shows the last
    with pytest.raises(AppError, match=r"^Snapshot must be a number, got 'last'$"):
        client.predict(0, 0, "last", "", None, api_name="/train_status")
    with pytest.raises(AppError, match=r"^dtype: 'fp64' is not one of the choices \(fp32, .*\)$"):
        client.predict(64, 4, 8, 1, 0, True, "fp64", "cpu", api_name="/compare")
    with pytest.raises(AppError, match="^temperature is empty$"):  # a slider sent nothing: an internal error before
        client.predict("shakespeare-char", "ROMEO:", 5, None, 0, 1.0, 7, False, True, False, api_name="/sample")
    assert "Traceback" not in capfd.readouterr().err
    text, *_ = client.predict("shakespeare-char", "ROMEO:", 5, "0.8", 0, 1.0, 7, False, True, False,
                              api_name="/sample")  # a slider's number sent as text is read as the number
    assert len(text) == len("ROMEO:") + 5


def test_checkboxes_take_true_or_false_only(served):
    """Gradio hands a checkbox's value over as sent: an API caller's "false" was read as true (bool("false"))."""
    _, client, _ = served
    with pytest.raises(AppError, match="(?i)qkv bias must be true or false, got 'false'"):
        client.predict(64, 4, 8, 1, 0, "false", "fp32", "cpu", api_name="/compare")
    with pytest.raises(AppError, match="(?i)greedy must be true or false, got 'no'"):
        client.predict("shakespeare-char", "ROMEO:", 5, 0.8, 0, 1.0, 7, "no", True, False, api_name="/sample")


def test_tabs_in_order(served):
    app, _, _ = served
    labels = [block.label for block in app.blocks.values() if block.__class__.__name__ == "Tab"]
    assert labels == TAB_ORDER


def test_every_public_endpoint_is_named_and_tested(served):
    _, client, _ = served
    names = set(client.view_api(print_info=False, return_format="dict")["named_endpoints"])
    assert names == {"/tokenize", "/attention_step", "/attention_export", "/train_preset", "/train_start",
                     "/train_resume", "/train_stop", "/train_status", "/sample", "/checkpoint_info", "/model_view",
                     "/why", *COMPARE_ENDPOINTS}


COMPARE_ENDPOINTS = {"/compare", "/compare_timing", "/compare_source"}


def test_api_inputs_have_their_handlers_names(served):
    """gradio_client users read parameter names, not param_0, param_1..."""
    _, client, _ = served
    endpoints = client.view_api(print_info=False, return_format="dict")["named_endpoints"]
    names = {api: [p["parameter_name"] for p in info["parameters"]] for api, info in endpoints.items()}
    assert names["/tokenize"] == ["text", "source", "checkpoint"]
    assert names["/sample"] == ["checkpoint", "prompt", "max_new_tokens", "temperature", "top_k", "top_p", "seed",
                                "greedy", "use_cache", "drop_unknown"]
    assert names["/attention_step"][:4] == ["source", "checkpoint", "layer", "head"]
    assert names["/model_view"][-3:] == ["dropout_seed", "forget_transpose", "book_inputs"]  # optional: older calls
    # still work
    # optional after run_name; the optimizer, the time budget, the decay, the architecture and the family last, so
    # calls written before they existed still train a GPT with AdamW, no time budget and cosine decay
    assert names["/train_start"][14:] == ["run_name", "replace", "token", "browser_token", "optimizer",
                                          "time_budget_seconds", "learning_rate_decay", "architecture", "family",
                                          "kv_heads_num"]
    assert names["/train_stop"] == ["token", "browser_token"] and names["/compare"][0] == "embedding_dim"
    unnamed = {api: params for api, params in names.items() if any(p.startswith("param_") for p in params)}
    assert not unnamed
    outputs = {api: [r["label"] for r in info["returns"]] for api, info in endpoints.items()}
    assert outputs["/sample"] == ["Text", "coloured text", "stats"]
    assert not {api: labels for api, labels in outputs.items() if any(str(x).startswith("value_") for x in labels)}


def test_tokenize(served):
    _, client, _ = served
    chips, ids, decoded, stats, table = client.predict("Hello world", "loaded checkpoint", "shakespeare-char",
                                                       api_name="/tokenize")
    assert ids == str([20, 43, 50, 50, 53, 1, 61, 53, 56, 50, 42]) and decoded == "Hello world"
    assert "11</span>" not in stats and "**11** tokens" in stats
    assert table["data"][20][1] == "H"
    _, ids, _, stats, _ = client.predict("Hi ∑", "loaded checkpoint", "shakespeare-char", api_name="/tokenize")
    assert "not in this vocabulary" in stats and "'∑' at 3" in stats
    _, ids, _, _, table = client.predict("abba", "this text", None, api_name="/tokenize")
    assert ids == "[0, 1, 1, 0]" and [row[3] for row in table["data"]] == [2, 2]


def test_attention_step_and_export(served):
    _, client, _ = served
    settings = ["trained checkpoint", "shakespeare-char", 1, 1, 0, 16, 8, "journey", "To be, or not", True, True,
                1.0, False]
    result = client.predict(*settings, "6. Softmax weights", 3, api_name="/attention_step")
    heading, query_md = result[0], result[7]
    assert "Attention weights" in heading and "T = 13 tokens" in heading
    assert "Query **3**" in query_md
    mask_step = client.predict(*settings, "5. Causal mask", 3, api_name="/attention_step")
    assert "largest difference in the weights = **0**" in mask_step[4]  # the mask-order note belongs to step 5
    files = client.predict(*settings, "2. Q, K, V", api_name="/attention_export")
    assert sorted(f.rsplit("/", 1)[-1] for f in files) == sorted(
        f"step2_{m}.{ext}" for m in "QKV" for ext in ("csv", "npy"))
    preset = client.predict("textbook preset", None, 0, 0, 0, 16, 8, "journey", "", True, True, 1.0, False,
                            "7. Output = weights · V", None, api_name="/attention_step")
    assert "T = 6 tokens" in preset[0]


@pytest.mark.parametrize("changes,message", [
    ({2: 7}, "layer 7 is out of range"), ({8: ""}, "Type some text first"),
    ({11: 0.0}, "^temperature on the scores must be at least 0.1, got 0.0$"),
    ({0: "nonsense"}, r"^Weights from: 'nonsense' is not one of the choices \(trained checkpoint, random weights, "
                      r"textbook preset\)$"),
])
def test_attention_bad_input_is_a_readable_error(served, changes, message):
    _, client, _ = served
    settings = ["trained checkpoint", "shakespeare-char", 0, 0, 0, 16, 8, "journey", "To be", True, True, 1.0,
                False, "1. Input X", None]
    for index, value in changes.items():
        settings[index] = value
    with pytest.raises(AppError, match="(?i)" + message):
        client.predict(*settings, api_name="/attention_step")


def test_model_view_zooms_through_the_api(served):
    _, client, _ = served
    settings = ["trained checkpoint", "shakespeare-char", "To be", "4. The block", 1, 1, -1, 0, "post", "encoder",
                "relu", 0.5, 3]
    part, heading, *figures, numbers = client.predict(*settings, api_name="/model_view")
    assert part == "Layer 1" and "post-norm (notebooks 002/003), encoder (no mask), ReLU" in heading
    # plain values, not gr.Plot updates (an API client got {"__type__": "update", ...} instead of the figure)
    assert [figure is None for figure in figures] == [False, False, False, False] and isinstance(numbers, str)
    assert all("__type__" not in figure and "plot" in figure for figure in figures)
    assert "The guess after each part of the block" in json.loads(figures[2]["plot"])["layout"]["title"]["text"]
    textbook = client.predict("textbook inputs", None, "", "3. All heads", 0, 0, 0, 0, "pre", "decoder", "gelu", 0.0,
                              0, api_name="/model_view")
    assert "[-0.4519, 0.2216, 0.4772, 0.1063]" in textbook[1]
    with pytest.raises(AppError, match="Layer 5 is out of range: this model has 2 layers"):
        client.predict(*settings[:4], 5, *settings[5:], api_name="/model_view")


def test_sample_streams_reproducibly(served):
    _, client, _ = served
    args = ["shakespeare-char", "ROMEO:", 40, 0.8, 0, 1.0, 7, False, True, False]
    first = client.predict(*args, api_name="/sample")
    second = client.predict(*args, api_name="/sample")
    assert first[0] == second[0] and first[0].startswith("ROMEO:") and len(first[0]) == len("ROMEO:") + 40
    assert re.search(r"KV cache: each of the 2 layers holds \d+ keys and \d+ values per head", first[2])
    uncached = client.predict(*args[:-2], False, False, api_name="/sample")
    assert uncached[0] == first[0] and "KV cache off" in uncached[2]
    dropped = client.predict("shakespeare-char", "RO∑MEO:", 5, 0.8, 0, 1.0, 7, False, True, True,
                             api_name="/sample")
    assert dropped[0].startswith("ROMEO:") and "dropped 1 unknown character" in dropped[2]
    info = client.predict("shakespeare-char", api_name="/checkpoint_info")
    assert "parameters" in info and "CPU" in info


@pytest.mark.parametrize("args,message", [
    (["shakespeare-char", "hello ∑", 10, 1.0, 0, 1.0, 0, False, True, False], "does not know: '∑' at 6"),
    (["shakespeare-char", "hi", 10, -0.5, 0, 1.0, 0, False, True, False],
     "^temperature must be at least 0, got -0.5$"),
    (["shakespeare-char", "hi", 10, 1.0, 0, 0, 0, False, True, False],
     r"^top-p \(1 = off\) must be at least 0.05, got 0.0$"),
    (["shakespeare-char", "hi", 10, "warm", 0, 1.0, 0, False, True, False],
     "^temperature must be a number, got 'warm'$"),
    (["shakespeare-char", "hi", 100000, 1.0, 0, 1.0, 0, False, True, False],
     "max new tokens must be at most 300, got 100000"),
    (["shakespeare-char", "hi", -5, 1.0, 0, 1.0, 0, False, True, False], "max new tokens must be positive, got -5"),
    (["shakespeare-char", "hi", 10, 1.0, -3, 1.0, 0, False, True, False],
     r"top-k \(0 = off\) must be at least 0, got -3"),
    (["shakespeare-char", "hi", 10, 1.0, 0, 1.0, -1, False, True, False], "seed must be at least 0, got -1"),
    (["../../etc", "hi", 10, 1.0, 0, 1.0, 0, False, True, False], "not allowed"),
    (["missing", "hi", 10, 1.0, 0, 1.0, 0, False, True, False], "no checkpoint named 'missing'"),
])
def test_sample_bad_input(served, args, message):
    _, client, _ = served
    with pytest.raises(AppError, match="(?i)" + message):
        client.predict(*args, api_name="/sample")


def test_train_start_status_stop(served):
    app, client, weights = served
    values = client.predict("tiny", api_name="/train_preset")
    # the tiny preset in the fields' order: the model's shape, batch, steps, learning rate, warm-up, dropout, seed,
    # device, then the run name (a fresh one), the optimizer, the time budget, the decay, the architecture, the family
    # and its K/V heads (0: one per query head)
    assert list(values) == [2, 3, 96, 64, 32, 3000, 1.2e-2, 50, 0.0, 1337, "auto", "tiny-1", "muon", 50.0, "linear",
                            "gpt", "gpt", 0]
    fields = [1, 2, 16, 16, 4, 400, 3e-3, 2, 0.0, 0, "cpu"]
    status = client.predict(*fields, "pasted text", None, "the quick brown fox jumps over the lazy dog. " * 40,
                            "ui-run", api_name="/train_start")
    assert "ui-run" in status[0]
    with pytest.raises(AppError, match="(?i)a run is in progress"):
        client.predict(*fields, "pasted text", None, "another corpus text " * 100, "other", api_name="/train_start")
    deadline = time.time() + 30
    while time.time() < deadline:
        status = client.predict(0, 0, 0, api_name="/train_status")
        if "step **0 /" not in status[0]:
            break
        time.sleep(0.2)
    assert "· your run ·" in status[0] or "FINISHED" in status[0]
    stranger = local_client(app.local_url)  # another visitor: another session
    if app.playground_context.jobs.status().active:
        assert "another visitor's run: it ends by itself at step 400" in stranger.predict(0, 0, 0,
                                                                                         api_name="/train_status")[0]
        with pytest.raises(AppError, match="This run belongs to another visitor; it ends by itself at step 400"):
            stranger.predict(api_name="/train_stop")
    client.predict(api_name="/train_stop")  # the Client that started it
    app.playground_context.jobs.wait(30)
    status = client.predict(0, 0, 0, api_name="/train_status")
    assert "STOPPED" in status[0] or "FINISHED" in status[0]
    assert (weights / "ui-run" / "model.safetensors").is_file()


def test_the_readmes_training_call_needs_only_what_it_changes(served, tmp_path):
    """docs/command-line.md's gradio_client call: an uploaded file by keyword, the other fields left to the form's
    defaults (the hidden pasted-text box and the empty upload box included)."""
    app, client, weights = served
    corpus = tmp_path / "my-corpus.txt"
    corpus.write_text("to be or not to be, that is the question.\n" * 60, encoding="utf-8")
    status, *_ = client.predict(corpus_choice="uploaded .txt", upload=handle_file(str(corpus)), steps=4,
                                run_name="my-corpus", api_name="/train_start")
    assert "run **my-corpus**" in status
    assert app.playground_context.jobs.wait(60).state == "finished"
    record = json.loads((weights / "my-corpus" / "training.json").read_text())
    assert record["corpus"] == {"name": "my-corpus", "characters": 2520, "source": "upload"}
    assert record["steps_done"] == 4 and (weights / "my-corpus" / "model.safetensors").is_file()


def test_train_refuses_the_killer_request_and_shipped_checkpoints(served):
    """1 layer, 1 head, embedding 1024, context 1024, batch 1024 is refused with what to lower; the server lives."""
    app, client, _ = served
    killer = [1, 1, 1024, 1024, 1024, 10, 3e-3, 0, 0.0, 0, "cpu", "Tiny Shakespeare", None, None, "killer"]
    with pytest.raises(AppError, match=r"Training needs about \d+\.\d GiB.*lower batch_size to at most \d+ "
                                       r"\(now 1,024\)"):
        client.predict(*killer, api_name="/train_start")
    assert app.playground_context.budget.reserved == 0 and not app.playground_context.jobs.status().active
    small = [1, 2, 16, 16, 4, 40, 3e-3, 2, 0.0, 0, "cpu", "Tiny Shakespeare", None, None, "shakespeare-char"]
    for api in ("/train_start", "/train_resume"):
        with pytest.raises(AppError, match="came with the app and is read-only for everyone"):
            client.predict(*small, True, api_name=api)
    assert client.predict("Hello", "this text", None, api_name="/tokenize")[2] == "Hello"  # still up


@pytest.mark.parametrize("changes,message", [
    ({1: 3}, "not divisible by heads_num 3"), ({5: 10**9}, "steps must be at most 500"),
    ({10: "tpu"}, "device: 'tpu' is not one of the choices"), ({14: "../../x"}, "not allowed"),
    ({6: "NaN"}, "learning rate"),
    ({13: ""}, "the pasted text is empty"),
])
def test_train_bad_input_is_refused_before_starting(served, changes, message):
    _, client, _ = served
    values = [1, 2, 16, 16, 4, 20, 3e-3, 2, 0.0, 0, "cpu", "pasted text", None, "some text " * 200, "bad-run"]
    for index, value in changes.items():
        values[index] = value
    with pytest.raises(AppError, match="(?i)" + message):
        client.predict(*values, api_name="/train_start")


def test_compare_equivalence_parameters_and_source(served):
    _, client, _ = served
    summary, equivalence, parameters, grid = client.predict(32, 4, 8, 2, 0, False, "fp32", "cpu",
                                                            api_name="/compare")
    assert equivalence["headers"][:3] == ["name", "agrees", "max |diff|"]  # the answer first (a phone scrolls)
    agrees = {row[0]: row[1] for row in equivalence["data"]}
    assert agrees == {"wrapper": "yes", "heads_list": "yes", "batched": "yes", "fused_qkv": "yes",
                      "sliced_heads": "—", "sdpa": "yes", "torch_mha": "yes"}
    assert "6 of 6 compared implementations agree" in summary
    # the verdict and its Look-for line in sight, what agrees means behind the fold (a stranger counted 80 words)
    assert summary.startswith("**Look for:**") and visible_words(summary) <= MOST_WORDS
    maps = _figure(grid)["data"]  # one causal 8 x 8 map per implementation and head
    assert len(maps) == 7 * 4 and {trace["type"] for trace in maps} == {"heatmap"}
    for trace in maps:
        weights = trace["z"]
        assert len(weights) == 8 and all(abs(sum(row) - 1) < 1e-4 for row in weights)
        assert all(weights[i][j] == 0 for i in range(8) for j in range(i + 1, 8))
    code = client.predict("fused_qkv", api_name="/compare_source")
    assert "class FusedQKVAttention" in code
    _, parameters_gpt2 = client.predict(768, 12, 8, 1, 0, True, "fp32", "cpu", api_name="/compare")[1:3]
    assert dict((row[0], row[1]) for row in parameters_gpt2["data"])["batched"] == "2,362,368"


def test_compare_timing_sweep(served):
    _, client, _ = served
    timing, memory, notes = client.predict(16, 2, 1, "fp32", "cpu", 32, api_name="/compare_timing")
    assert "SDPA backend" in notes
    memory_lines = _figure(memory)["data"]
    names = [line["name"] for line in memory_lines]
    assert "batched" in names and "sdpa" in names and len(names) == len(set(names))
    timing_lines = _figure(timing)["data"]  # each implementation: forward (solid), forward + backward (dotted)
    assert [line["name"] for line in timing_lines] == [n for n in names for _ in range(2)]
    assert [line["line"]["dash"] for line in timing_lines] == ["solid", "dot"] * len(names)
    colours = [line["line"]["color"] for line in timing_lines]
    assert colours[::2] == colours[1::2] and len(set(colours[::2])) == len(names)  # one colour per implementation
    for line in timing_lines + memory_lines:
        assert line["x"] == [16, 32] and all(y > 0 for y in line["y"])


@pytest.mark.parametrize("args,message", [
    ([30, 4, 8, 2, 0, False, "fp32", "cpu"], "embedding_dim 30 is not divisible by heads_num 4"),
    ([32, 4, 5000, 2, 0, False, "fp32", "cpu"], "T must be at most 1024|greater than maximum"),
    # the choices are what this server runs: fp16 and CUDA are offered only where a GPU is, and refused as choices
    ([32, 4, 8, 2, 0, False, "fp16", "cpu"], "fp16 is not supported on CPU|^dtype: 'fp16' is not one of the choices"),
    ([32, 4, 8, 2, 0, False, "fp32", "cuda"],
     "not available on this machine|^device: 'cuda' is not one of the choices"),
])
def test_compare_bad_input(served, args, message):
    _, client, _ = served
    with pytest.raises(AppError, match="(?i)" + message):
        client.predict(*args, api_name="/compare")


def test_why_explains_a_character_through_the_api(served, capfd):
    """/why answers what the page shows: the parts of the logit and the chosen head's chain as numbers (an API
    client sent two bar charts the page no longer drew, and no number of the chain), and the chain's figure."""
    _, client, _ = served
    endpoint = client.view_api(print_info=False, return_format="dict")["named_endpoints"]["/why"]
    assert [r["label"] for r in endpoint["returns"]] == ["heading", "parts", "head_heading", "chain", "numbers",
                                                         "circuits_heading", "qk", "ov", "knock_heading", "ranking"]
    heading, _, head_heading, chain, numbers, *_, knock_heading, _ = client.predict(
        "shakespeare-char", "To be, or not to be", 7, "", "L1 H0", ["L0 H1"], "mean over the text",
        "the guess's logit alone", api_name="/why")
    assert numbers["split"] == "alone"  # the default splits the guess against the runner-up (test_why_tab)
    assert heading.startswith("### Why ") and "the sum of these" in heading
    assert "Its part of the logit" in head_heading and "### Knocked out: L0 H1" in knock_heading
    parts, head = numbers["parts"], numbers["head"]
    assert numbers["position"] == 7 and head["name"] == "L1 H0"
    assert sum(part["value"] for part in parts) == pytest.approx(numbers["logit"], abs=1e-4)
    (part,) = [part["value"] for part in parts if part["name"] == "L1 H0"]
    assert head["part"] == part and [key["character"] for key in head["keys"]] == list("To be, o")
    assert sum(key["push"] for key in head["keys"]) == pytest.approx(part, abs=1e-4)
    assert all(key["push"] == pytest.approx(key["weight"] * key["write"], rel=1e-5, abs=1e-8) for key in head["keys"])
    assert 0 < numbers["probability"] < 1 and 0 < numbers["runner_up"]["probability"] < 1
    assert f"{numbers['logit']:.3f} is the sum" in heading
    figure = _figure(chain)  # the page's chain: the pushes panel holds the same numbers, to 4 digits
    assert figure["data"][2]["y"] == pytest.approx([key["push"] for key in head["keys"]], rel=1e-3, abs=1e-6)
    capfd.readouterr()
    for args, message in ((("", -1, ""), "the text is empty"),
                          (("To be", 5, ""), "position 5 is outside the text's 5 tokens"),
                          (("To be", -1, "∑"), "the target '∑' is not in this model's vocabulary")):
        with pytest.raises(AppError, match="(?i)" + re.escape(message)):
            client.predict("shakespeare-char", *args, "the head that pushed most", [], "zero", api_name="/why")
    with pytest.raises(AppError, match="not one of this model's heads"):
        client.predict("shakespeare-char", "To be", -1, "", "L9 H9", [], "zero", api_name="/why")
    assert "Traceback" not in capfd.readouterr().err


def test_every_font_the_page_declares_is_a_whole_font_file(served):
    """Gradio's default theme declared weight 600 from SemiBold files of 4-5 KB that hold a few glyphs: the title's
    "A" came from Source Sans Pro, every other letter from the system's bold, thinner and shorter beside them. Every
    @font-face of the served theme points at a file of the page's server that is a whole font (over 20 KB)."""
    app, _, _ = served
    css = urllib.request.urlopen(f"{app.local_url}theme.css", timeout=10).read().decode()
    sources = re.findall(r"@font-face\s*{[^}]*?url\(['\"]?([^'\")]+)", css)
    assert len(sources) >= 4, css[:500]
    for source in sources:
        size = len(urllib.request.urlopen(f"{app.local_url}{source.lstrip('/')}", timeout=10).read())
        assert size > 20_000, (source, size)
