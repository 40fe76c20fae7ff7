"""Gradio's own checks of what a request sends, before any handler runs, made to name the field.

A slider's bounds and a radio's or dropdown's choices are checked by Gradio itself when a request arrives. Its
messages named no field ("Value 0 is less than minimum value 0.05." for either of the Sample tab's two sliders), a
string sent for a slider failed with an internal error, and each refusal printed a traceback in the server's log.
``name_input_refusals`` wraps those components' ``preprocess`` once, for the whole process: a refusal names the
field by its label, in the words of playground.checks like every other refusal ("temperature must be at least
0.05, got 0.0"), logs one line, and prints no traceback. What the component accepts is what it did, plus a
slider's number sent as text ("0.5"). The wrapper is on the class, not on each instance,
because Gradio rebuilds a component from its class when a handler updates it (a slider's new maximum).
Subclassing instead would make each a "custom component" whose front-end files the browser cannot load.
"""

from __future__ import annotations

import functools
import logging

import gradio as gr

from playground import checks

logger = logging.getLogger(__name__)

NAMED = "_playground_named_refusals"  # set on a class whose preprocess is wrapped, so wrapping twice does nothing


def _label(component) -> str:
    return str(getattr(component, "label", None) or "a field")


def _bounded(component, payload):
    """A slider's value as a number within its bounds (numeric text too), by checks.real_number. A slider always
    holds a number, so None is refused as empty too (Gradio's own check failed on it with an internal error)."""
    return checks.real_number(payload, _label(component), getattr(component, "minimum", None),
                              getattr(component, "maximum", None))


def _chosen(component, payload):
    """A radio's or single dropdown's value, one of its choices by checks.choice (a custom value where the dropdown
    allows them; None passes)."""
    if payload is None or getattr(component, "multiselect", False) or getattr(component, "allow_custom_value", False):
        return payload
    return checks.choice(payload, _label(component), [value for _, value in component.choices])


def _wrap(cls, check) -> None:
    if cls.__dict__.get(NAMED):
        return
    original = cls.preprocess

    @functools.wraps(original)
    def preprocess(self, payload):
        try:
            return original(self, check(self, payload))
        except ValueError as exc:
            reason = str(exc)
        except gr.Error as exc:  # a check of Gradio's that ``check`` does not repeat: named all the same
            reason = f"{_label(self)}: {exc.message}"
        logger.info("input refused: %s", reason)
        raise gr.Error(reason, print_exception=False)

    cls.preprocess = preprocess
    setattr(cls, NAMED, True)


def name_input_refusals() -> None:
    """Wrap Slider's, Radio's and Dropdown's ``preprocess`` (once per process). Number boxes are left to the
    handlers, which check each under its label and take what a box sends when cleared."""
    _wrap(gr.Slider, _bounded)
    _wrap(gr.Radio, _chosen)
    _wrap(gr.Dropdown, _chosen)
