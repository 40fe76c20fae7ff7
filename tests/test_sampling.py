import re

import pytest
import torch

from playground.config import Limits, ModelConfig
from playground.model.gpt import GPT
from playground.model.sampling import (
    CPU_RATE,
    DecodingRate,
    DecodingWork,
    SamplingSettings,
    check_sampling_time,
    decoding_work,
    generate,
    most_new_tokens_within,
    sampling_cost,
    sampling_distribution,
    sampling_seconds,
    start_text,
    stream,
)
from playground.text.tokenizer import CharTokenizer, UnknownCharacterError


@pytest.fixture
def model_and_tokenizer():
    tokenizer = CharTokenizer.train_from_text("abcdefghij \n")
    torch.manual_seed(0)
    model = GPT(ModelConfig(vocabulary_size=tokenizer.vocabulary_size, context_size=16, embedding_dim=24,
                            heads_num=2, layers_num=2)).eval()
    return model, tokenizer


def test_top_k_keeps_exactly_k_and_renormalises():
    logits = torch.tensor([1.0, 3.0, 2.0, 0.5, -1.0])
    probs = sampling_distribution(logits, top_k=2)
    assert (probs > 0).nonzero().flatten().tolist() == [1, 2]
    torch.testing.assert_close(probs.sum(), torch.tensor(1.0))
    torch.testing.assert_close(probs[[1, 2]], torch.softmax(torch.tensor([3.0, 2.0]), 0))


def test_top_p_keeps_smallest_set_reaching_p():
    probs_in = torch.tensor([0.5, 0.3, 0.15, 0.05])
    probs = sampling_distribution(probs_in.log(), top_p=0.75)
    assert probs[2:].tolist() == [0.0, 0.0]
    torch.testing.assert_close(probs[:2], torch.tensor([0.625, 0.375]))


def test_temperature_sharpens():
    logits = torch.tensor([1.0, 2.0])
    assert sampling_distribution(logits, temperature=0.5)[1] > sampling_distribution(logits)[1]


def test_seed_reproduces_text(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    a = generate(model, tokenizer, "abc", 30, seed=7)
    b = generate(model, tokenizer, "abc", 30, seed=7)
    c = generate(model, tokenizer, "abc", 30, seed=8)
    assert a == b and a != c and len(a) == 30


def test_cache_and_no_cache_agree_within_the_context_and_each_draw_reads_the_window_it_records(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    within = SamplingSettings(max_new_tokens=12, seed=3)  # "abc" + 12 new = 15 tokens: inside the context of 16
    assert [t.text for t in stream(model, tokenizer, "abc", within, use_cache=True)] == \
        [t.text for t in stream(model, tokenizer, "abc", within, use_cache=False)]
    beyond = SamplingSettings(max_new_tokens=40, seed=3)
    for use_cache in (True, False):
        ids = tokenizer.encode("abc").tolist()
        drawn = list(stream(model, tokenizer, "abc", beyond, use_cache=use_cache))
        for token in drawn:  # the recorded window, read afresh without a cache, gives the probability it was drawn with
            with torch.no_grad():
                logits = model(torch.tensor([ids[-token.context_length:]])).logits[0, -1]
            assert abs(float(sampling_distribution(logits)[token.token_id]) - token.probability) < 1e-5
            ids.append(token.token_id)
        windows = [t.context_length for t in drawn]
        if use_cache:  # full at 16 after 14 draws, then rebuilt from the last 8 (twice within 40 draws)
            assert windows[:14] == list(range(3, 17)) and windows[14:] == [*range(8, 17), *range(8, 17), *range(8, 16)]
        else:
            assert windows == [min(3 + i, 16) for i in range(40)]


@pytest.mark.parametrize("context_size", [1, 2, 3])
def test_the_smallest_contexts_sample_with_and_without_the_cache(context_size):
    """A context of 1 reads only the last token: the cache is rebuilt from that one (``ids[-0:]`` kept them all and
    the run failed at its first sample), and both ways draw the same text with the work decoding_work counts."""
    tokenizer = CharTokenizer.train_from_text("ab")
    torch.manual_seed(0)
    model = GPT(ModelConfig(vocabulary_size=2, context_size=context_size, embedding_dim=8, heads_num=1,
                            layers_num=1)).eval()
    settings = SamplingSettings(max_new_tokens=9, seed=1)
    cached = list(stream(model, tokenizer, "abab", settings, use_cache=True))
    assert [t.text for t in cached] == [t.text for t in stream(model, tokenizer, "abab", settings, use_cache=False)]
    assert max(t.context_length for t in cached) <= context_size
    seen = counted_forward(model)
    list(stream(model, tokenizer, "abab", settings, use_cache=True))
    work = decoding_work(4, 9, context_size, True)
    assert (work.steps, work.tokens, work.attention_pairs) == (seen["steps"], seen["tokens"], seen["pairs"])


def test_cached_stream_tracks_cache_length_and_slides_at_the_boundary(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    tokens = list(stream(model, tokenizer, "abcd", SamplingSettings(max_new_tokens=20, greedy=True)))
    lengths = [t.cache_length for t in tokens]
    assert lengths[:12] == list(range(4, 16))  # prompt 4 + each new token, up to context 16
    assert max(lengths) <= 16


def test_empty_prompt_starts_from_newline_and_unknown_is_named(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    assert len(generate(model, tokenizer, "", 5)) == 5
    with pytest.raises(UnknownCharacterError, match="'Z' at position 1"):
        generate(model, tokenizer, "aZ", 5)


@pytest.mark.parametrize("changes,match", [
    ({"temperature": -0.5}, r"^temperature must be at least 0 \(0 is greedy decoding: .*\), got -0.5$"),
    ({"temperature": float("nan")}, r"^temperature must be a finite number, got nan"),
    ({"temperature": "warm"}, r"^temperature must be a number, got 'warm'"),
    ({"top_k": 0}, r"^top_k must be positive, got 0"), ({"top_k": 2.5}, r"^top_k must be a whole number"),
    ({"top_p": 1.5}, r"^top_p must be in \(0, 1\], got 1.5"), ({"top_p": 0}, r"^top_p must be in \(0, 1\]"),
    ({"max_new_tokens": -1}, r"^max_new_tokens must be at least 0, got -1"),
    ({"seed": -3}, r"^seed must be at least 0"), ({"seed": 2**63}, r"^seed must be at most"),
    ({"top_k": True}, "^top_k"), ({"temperature": True}, "^temperature"),
])
def test_settings_are_validated(changes, match):
    """The one check of sampling settings: each message starts with the field's name (the CLI swaps in its flag)."""
    with pytest.raises(ValueError, match=match):
        SamplingSettings(**changes)


def test_temperature_zero_is_greedy_and_reports_the_models_own_probabilities(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    zero = SamplingSettings(max_new_tokens=20, temperature=0, seed=5)
    assert zero.greedy and zero.temperature == 0.0
    greedy = list(stream(model, tokenizer, "abc", SamplingSettings(max_new_tokens=20, temperature=1.0, greedy=True)))
    drawn = list(stream(model, tokenizer, "abc", zero))
    assert [(t.token_id, t.probability) for t in drawn] == [(t.token_id, t.probability) for t in greedy]


def test_settings_normalise_what_number_boxes_send():
    settings = SamplingSettings(max_new_tokens=40.0, temperature="0.5", top_k=5.0, top_p=0.9, seed=7.0)
    assert (settings.max_new_tokens, settings.temperature, settings.top_k, settings.seed) == (40, 0.5, 5, 7)
    assert isinstance(settings.max_new_tokens, int) and isinstance(settings.top_k, int)


def test_the_new_token_cap_is_checked_in_one_place():
    assert SamplingSettings(max_new_tokens=12).within(Limits(max_new_tokens=12)).max_new_tokens == 12
    with pytest.raises(ValueError, match=r"^max_new_tokens must be at most 12 .*PLAYGROUND_MAX_NEW_TOKENS.*got 13"):
        SamplingSettings(max_new_tokens=13).within(Limits(max_new_tokens=12))


@pytest.mark.parametrize("training", [True, False])
def test_generating_leaves_the_model_in_the_mode_it_found(model_and_tokenizer, training):
    model, tokenizer = model_and_tokenizer
    model.train(training)
    modes = [t for t in stream(model, tokenizer, "abc", SamplingSettings(max_new_tokens=3))
             if model.training]  # eval while it generates
    assert modes == [] and model.training is training
    generate(model, tokenizer, "abc", 3)
    assert model.training is training
    early = stream(model, tokenizer, "abc", SamplingSettings(max_new_tokens=50))
    next(early)
    assert not model.training
    early.close()  # a caller that stops early
    assert model.training is training
    with pytest.raises(UnknownCharacterError):
        generate(model, tokenizer, "aZ", 3)  # an error on the way
    assert model.training is training


def test_an_empty_prompt_starts_from_the_start_text(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    assert start_text(tokenizer) == "\n"
    assert generate(model, tokenizer, "", 12, seed=3) == generate(model, tokenizer, "\n", 12, seed=3)
    no_newline = CharTokenizer.train_from_text("cab")
    assert start_text(no_newline) == "a"  # the vocabulary's first symbol


def test_empty_prompt_without_newline_in_vocabulary_starts_from_first_symbol():
    tokenizer = CharTokenizer.train_from_text("abc")
    torch.manual_seed(0)
    model = GPT(ModelConfig(vocabulary_size=3, context_size=8, embedding_dim=8, heads_num=2, layers_num=1))
    assert len(generate(model, tokenizer, "", 4)) == 4
    assert generate(model, tokenizer, "", 6, seed=1) == generate(model, tokenizer, "a", 6, seed=1)


# ------------------------------------------------------------------------------------------- what it costs

def counted_forward(model):
    """Wrap model.forward to count what stream really computes: tokens fed, (query, key) pairs per layer."""
    seen = {"steps": 0, "tokens": 0, "pairs": 0}
    forward = model.forward

    def counting(idx, *args, cache=None, **kwargs):
        cached, fed = (cache.length if cache is not None else 0), idx.size(1)
        seen["steps"] += 1
        seen["tokens"] += fed
        seen["pairs"] += fed * cached + fed * (fed + 1) // 2
        return forward(idx, *args, cache=cache, **kwargs)

    model.forward = counting
    return seen


def test_decoding_work_matches_its_worked_example():
    assert decoding_work(4, 3, 16, use_cache=False) == DecodingWork(3, 15, 46)
    assert decoding_work(4, 3, 16, use_cache=True) == DecodingWork(3, 6, 21)
    assert decoding_work(0, 2, 16, use_cache=True) == decoding_work(1, 2, 16, use_cache=True)  # start_text


@pytest.mark.parametrize("prompt", ["", "abc", "abcdefghij abcdefghij"])  # empty, short, longer than the window
@pytest.mark.parametrize("use_cache", [True, False])
def test_decoding_work_counts_what_stream_computes(model_and_tokenizer, prompt, use_cache):
    """Within the window and beyond it (context 16, 40 new tokens: the cache is rebuilt twice)."""
    model, tokenizer = model_and_tokenizer
    seen = counted_forward(model)
    list(stream(model, tokenizer, prompt, SamplingSettings(max_new_tokens=40, greedy=True), use_cache=use_cache))
    work = decoding_work(len(prompt), 40, 16, use_cache)
    assert (work.steps, work.tokens, work.attention_pairs) == (seen["steps"], seen["tokens"], seen["pairs"])


THIRTEEN_M = ModelConfig(vocabulary_size=65, context_size=1024, embedding_dim=384, heads_num=8, layers_num=7)


def test_the_time_estimate_grows_with_the_work_and_the_cache_saves_it():
    parameters = 12_835_200  # GPT(THIRTEEN_M).parameter_count()
    seconds = [sampling_seconds(THIRTEEN_M, parameters, 7, n, use_cache=False) for n in (10, 100, 1000)]
    assert seconds == sorted(seconds) and seconds[0] > 0
    cached = sampling_seconds(THIRTEEN_M, parameters, 7, 1000, use_cache=True)
    assert cached < seconds[-1] / 10  # one token per step instead of up to 1024
    slow = DecodingRate(CPU_RATE.seconds_per_step * 2, CPU_RATE.seconds_per_layer * 2, CPU_RATE.flops_per_second / 2)
    assert sampling_seconds(THIRTEEN_M, parameters, 7, 1000, False, slow) == pytest.approx(2 * seconds[-1])


def test_the_request_that_blocked_the_server_is_refused_with_what_to_lower():
    """Two /sample calls without the cache on a 13M, context-1024 model held the server for 111 s: now refused."""
    parameters = 12_835_200
    settings = SamplingSettings(max_new_tokens=2000)
    with pytest.raises(ValueError) as refused:
        check_sampling_time(THIRTEEN_M, parameters, 7, settings, use_cache=False, limit_seconds=60)
    message = str(refused.value)
    assert re.match(r"2000 new characters without the KV cache would take about \d+ s on this server, over its "
                    r"limit of 60 s per request \(PLAYGROUND_MAX_REQUEST_SECONDS\): lower max_new_tokens to (\d+) or "
                    r"fewer, or switch the KV cache on \(about \d+ s for all 2000\)$", message), message
    fits = int(re.search(r"to (\d+) or fewer", message).group(1))
    assert fits == most_new_tokens_within(60, THIRTEEN_M, parameters, 7, False, 2000)
    assert sampling_seconds(THIRTEEN_M, parameters, 7, fits, False) <= 60
    assert sampling_seconds(THIRTEEN_M, parameters, 7, fits + 1, False) > 60
    assert check_sampling_time(THIRTEEN_M, parameters, 7, settings, use_cache=True, limit_seconds=60) <= 60
    assert check_sampling_time(THIRTEEN_M, parameters, 7, SamplingSettings(max_new_tokens=fits), False, 60) <= 60


def test_sampling_memory_is_a_forward_pass_and_a_full_kv_cache():
    cost = sampling_cost(THIRTEEN_M, 12_835_200)
    parts = dict(cost.parts)
    assert parts["KV cache"] == 2 * 7 * 1024 * 384 * 4 and parts["weights"] == 4 * 12_835_200
    assert cost.describe().startswith("generating text needs about")
