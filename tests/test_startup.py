"""The app starts whatever its limits: a cap below a shipped model hides that model with a note."""

from playground.config import Limits
from playground.ui import build_app
from playground.ui.common import AppContext


def test_a_parameter_cap_below_the_shipped_model_hides_it_with_a_note(tiny_weights):
    ctx = AppContext(limits=Limits(max_parameters=1000), weights=tiny_weights)
    assert ctx.checkpoint_names() == []
    assert "shakespeare-char" in ctx.hidden_note() and "1,000 parameters" in ctx.hidden_note()
    app = build_app(weights=tiny_weights, limits=Limits(max_parameters=1000))  # used to raise at start-up
    assert app.playground_context.hidden_note()


def test_nothing_is_hidden_under_the_default_cap(tiny_weights):
    ctx = AppContext(limits=Limits(), weights=tiny_weights)
    assert ctx.checkpoint_names() == ["shakespeare-char"] and ctx.hidden_note() == ""
