"""One helper per kind of value: the same message wherever a value enters (handler, config, CLI)."""

import math
import re

import pytest

from playground import checks
from playground.config import ConfigError, ModelConfig


@pytest.mark.parametrize("value,error", [
    (None, "steps is empty"), ("", "steps is empty"), (2.5, "steps must be a whole number, got 2.5"),
    (float("nan"), "whole number"), ("abc", "whole number, got 'abc'"), (True, "whole number"),
    ([1], r"whole number, got \[1\]"), (-1, "steps must be at least 0, got -1"), (10**20, "at most 100"),
])
def test_whole_number_messages(value, error):
    with pytest.raises(ValueError, match=error):
        checks.whole_number(value, "steps", 0, 100)


def test_whole_numbers_from_number_boxes_and_text():
    assert checks.whole_number(4.0, "n") == 4 and checks.whole_number("7", "n") == 7
    assert isinstance(checks.whole_number(4.0, "n"), int)
    with pytest.raises(ValueError, match="heads_num must be positive, got 0"):
        checks.whole_number(0, "heads_num", 1)


@pytest.mark.parametrize("value", [math.nan, math.inf, "x", None, "inf", False])
def test_real_number_refuses_what_is_not_a_finite_number(value):
    with pytest.raises(ValueError, match="learning rate"):
        checks.real_number(value, "learning rate")


def test_real_number_range_and_text():
    assert checks.real_number("0.5", "p", 0, 1) == 0.5
    with pytest.raises(ValueError, match="p must be at most 1, got 1.5"):
        checks.real_number(1.5, "p", 0, 1)


def test_a_long_value_is_quoted_short():
    with pytest.raises(ValueError) as caught:
        checks.whole_number("x" * 100_000, "steps")
    assert len(str(caught.value)) < 200 and "100,000 characters" in str(caught.value)


def test_text_counts_characters_and_bytes():
    assert checks.text(None, "The text", 10) == ""
    with pytest.raises(ValueError, match="11 characters long; this server's limit is 10"):
        checks.text("a" * 11, "The text", 10)
    with pytest.raises(ValueError, match="12 bytes of UTF-8; this server's limit is 10 bytes"):
        checks.text("中" * 4, "The corpus", 10, limit_bytes=10)
    with pytest.raises(ValueError, match="must be text"):
        checks.text(5, "The text", 10)


def test_choice_lists_the_choices():
    assert checks.choice("a", "corpus", ["a", "b"]) == "a"
    with pytest.raises(ValueError, match=r"corpus: 'x.*is not one of the choices \(a, b\)"):
        checks.choice("x" * 500, "corpus", ["a", "b"])


def test_a_flag_is_true_or_false_only():
    """Gradio passes a checkbox's value through as the API caller sent it: "false" must not read as true."""
    assert checks.flag(True, "greedy") is True and checks.flag(False, "greedy") is False
    for value in ("false", 0, 1, None, "true"):
        with pytest.raises(ValueError, match=f"greedy must be true or false, got {re.escape(repr(value))}"):
            checks.flag(value, "greedy")


def test_configs_use_the_same_checks_with_their_own_error():
    with pytest.raises(ConfigError, match="layers_num must be a whole number, got 2.5"):
        ModelConfig(vocabulary_size=65, layers_num=2.5)
    assert ModelConfig(vocabulary_size=65, layers_num=2.0).layers_num == 2


def test_every_seed_has_one_range():
    """The Sample tab took seeds up to 2**63 - 1 and the Compare tab only to 2**31 - 1; now each place a seed enters
    (the tabs, SamplingSettings, TrainConfig, the CLIs through them) uses checks.seed."""
    from playground.config import TrainConfig
    from playground.model.sampling import SamplingSettings

    too_big = "seed must be at most 2147483647, got 2147483648"
    assert checks.seed(2**31 - 1) == 2**31 - 1 and checks.seed(0.0) == 0
    for make in (lambda: checks.seed(2**31), lambda: SamplingSettings(seed=2**31), lambda: TrainConfig(seed=2**31)):
        with pytest.raises(ValueError, match=too_big):
            make()
    with pytest.raises(ValueError, match="dropout seed must be at least 0, got -1"):
        checks.seed(-1, "dropout seed")


def test_a_value_that_shares_itself_is_quoted_without_being_written_out():
    """[a, a] nested 60 deep has 2**60 items written out; what a message quotes of it is read from its first few."""
    nested_list, nested_tuple = [], ()
    for _ in range(60):
        nested_list, nested_tuple = [nested_list, nested_list], (nested_tuple, nested_tuple)
    for value in (nested_list, nested_tuple, {0: nested_list}, {i: i for i in range(10**5)}, 10**5000, b"x" * 10**6):
        assert len(checks.shown(value)) < 120
    assert checks.shown(nested_list).endswith("(list of 2 items)")
    assert checks.shown(10**5000) == "<int of 16,610 bits>"


def test_text_is_shown_as_it_is_cut_to_its_first_line():
    assert checks.shown("Connection refused\nTraceback ...", quote=False) == "Connection refused"
    assert checks.shown("y" * 500, quote=False) == "y" * checks.SHOWN_CHARS + "... (500 characters)"
