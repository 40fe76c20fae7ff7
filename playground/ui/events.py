"""Handlers on Gradio events: each input passed by name, checked under its label before the handler runs.

``wire(button.click, fn, ctx, [a, b], outputs, api_name=...)`` calls ``fn(ctx, x=a's value, y=b's value)``, where
``x`` and ``y`` are ``fn``'s own parameter names after ``ctx`` in order (a ``request`` parameter gets the
``gr.Request``). It registers through Gradio's documented ``inputs_kwargs``, so the API names each input as the
handler does (``text``, ``temperature``), and with ``preprocess=False``, so each value is checked here first, by
the rule ``playground.checks`` applies everywhere else, and a refusal names the field by its label ("temperature
must be at least 0.05, got 0.0") instead of Gradio's nameless "Value 0 is less than minimum value 0.05.". Then the
component's own ``preprocess`` turns the value into what the handler takes (a file's path, a rounded number), as
Gradio would have. No Gradio class is patched and no signature is rewritten.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import logging
from collections.abc import Callable, Iterable
from typing import Any

import gradio as gr

from playground import checks
from playground.server.fast_lane import FastLaneBusyError
from playground.ui.common import FAST_LANE, AppContext, friendly

logger = logging.getLogger(__name__)


def _unchanged(result):
    return result


def _label(component, name: str) -> str:
    return str(getattr(component, "label", None) or name)


def checked(component, name: str, value: Any) -> Any:
    """``value`` as the handler takes it: a slider's number within its bounds (numeric text too; a slider always
    holds a number, so None is refused as empty), a radio's or single dropdown's value among its choices (a custom
    value where the dropdown allows them), then the component's own preprocessing. ValueError names the field."""
    label = _label(component, name)
    if isinstance(component, gr.Slider):
        value = checks.real_number(value, label, component.minimum, component.maximum)
    elif isinstance(component, (gr.Radio, gr.Dropdown)) and value is not None and not (
            getattr(component, "multiselect", False) or getattr(component, "allow_custom_value", False)):
        value = checks.choice(value, label, [choice for _, choice in component.choices])
    data_model = getattr(component, "data_model", None)
    try:
        if data_model is not None and value is not None:
            value = data_model.model_validate(value, context={"validate_meta": True})
        return component.preprocess(value)
    except gr.Error as exc:
        raise ValueError(f"{label}: {exc.message}") from None
    except ValueError as exc:
        raise ValueError(f"{label}: {checks.shown(str(exc))}") from None


def input_names(fn: Callable, count: int, *, skip: int = 1) -> list[str]:
    """The names of ``fn``'s first ``count`` parameters after the first ``skip`` (the context), ``request``
    and ``progress`` left out (Gradio fills them).

    ValueError when ``fn`` takes fewer: an input would have nowhere to go."""
    parameters = [p for p in list(inspect.signature(fn).parameters.values())[skip:]
                  if p.name not in ("request", "progress") and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    if count > len(parameters):
        raise ValueError(f"{fn.__name__} takes {len(parameters)} inputs, not {count}")
    return [p.name for p in parameters[:count]]


def handler(fn: Callable, ctx: AppContext | None, components: dict[str, Any], *, then: Callable = _unchanged,
            own_checks: Iterable[str] = (), **fixed) -> Callable:
    """``fn(ctx, **checked values, **fixed)`` (without ``ctx`` where it is None; with ``request=`` and ``progress=``
    where ``fn`` takes them, as Gradio gives them), its result passed through ``then``, errors made readable by
    ``friendly``. ``own_checks`` names the inputs ``fn`` checks itself (a slider whose bounds a handler changes per
    session), passed as sent."""
    parameters = inspect.signature(fn).parameters
    takes_request = "request" in parameters
    takes_progress = isinstance(getattr(parameters.get("progress"), "default", None), gr.Progress)
    unchecked = frozenset(own_checks)
    context = () if ctx is None else (ctx,)

    def run(request, progress, values: dict):
        try:
            kwargs = {name: value if name in unchecked else checked(components[name], name, value)
                      for name, value in values.items()}
        except ValueError as exc:  # said as the check words it, under the field's label as the page shows it
            logger.info("input refused: %s", exc)
            raise gr.Error(str(exc), print_exception=False) from None
        if takes_request:
            kwargs["request"] = request
        if takes_progress:
            kwargs["progress"] = progress
        return fn(*context, **kwargs, **fixed)

    # Gradio gives a request to a parameter annotated gr.Request and tracks progress for one defaulting to
    # gr.Progress(); the forms differ only in whether that second parameter is there
    if inspect.isgeneratorfunction(fn):
        if takes_progress:
            def call(request: gr.Request, progress=gr.Progress(), **values):  # noqa: B008 (Gradio's own idiom)
                yield from map(then, run(request, progress, values))
        else:
            def call(request: gr.Request, **values):
                yield from map(then, run(request, None, values))
    elif takes_progress:
        def call(request: gr.Request, progress=gr.Progress(), **values):  # noqa: B008
            return then(run(request, progress, values))
    else:
        def call(request: gr.Request, **values):
            return then(run(request, None, values))
    call.__name__, call.__qualname__, call.__doc__ = fn.__name__, fn.__qualname__, fn.__doc__
    return friendly(call)


def wire(listener: Callable, fn: Callable, ctx: AppContext | None, inputs, outputs, *, then: Callable = _unchanged,
         own_checks: Iterable[str] = (), fixed: dict | None = None, **options):
    """Register ``fn`` on ``listener`` (``button.click``, ``textbox.change``, ``functools.partial(gr.on, triggers)``,
    ``event.then``) with ``inputs`` given to ``fn``'s parameters in order, by name (after ``ctx``, unless it is None).
    Returns Gradio's dependency."""
    if inputs is None:
        inputs = []
    elif not isinstance(inputs, (list, tuple)):
        inputs = [inputs]
    components = dict(zip(input_names(fn, len(inputs), skip=0 if ctx is None else 1), inputs, strict=True))
    return listener(handler(fn, ctx, components, then=then, own_checks=own_checks, **(fixed or {})),
                    inputs_kwargs=components, outputs=outputs, preprocess=False, **options)


def once_shown(arrival, element_id: str, api_name: str, then_js: str = ""):
    """``arrival`` (the page's load, ``gr.on(None, ...)``) held in the page until the element ``element_id`` is on
    screen, that is until the visitor first opens its tab: what follows it (a tab's first view) runs then, not on
    every page load, whether or not the visitor opens the tab (held back, a page load's server CPU
    measured 1.0-1.6 s against 1.4-2.3 s: benchmarks/page_load_cpu.py; the Attention tab's, 1.82-2.18 s against
    2.06-2.84 s). The Why tab keeps its own at load, so it opens drawn: its reading is kept per text
    (why_reading.ReadingCache), so holding it back saves about 0.9 s on a server's first load and nothing measurable
    after.
    ``then_js``: a page function (its name, "window.attentionPage.whenOpened") whose promise is waited for as well
    once the element is shown."""
    after = f", {then_js}" if then_js else ""
    wait = f"() => window.playgroundPage.whenShown({json.dumps(element_id)}{after})"  # page/common.js
    return arrival.then(None, None, None, js=wait, api_name=api_name, api_visibility="private",
                        show_progress="hidden", queue=False)


def share_fast_lane(app: gr.Blocks, ctx: AppContext) -> int:
    """Every event of the fast lane (``ctx.fast_lane``) made to hold one of ``ctx.fast_places``' places while it runs:
    a share per client and a time cap per call (server/fast_lane.py), whichever way it was registered. Its client is
    the request Gradio is serving (``LocalContext.request``), named as every share names it (``ctx.client_of``).
    Returns how many events it covers."""
    covered = 0
    for block_fn in app.fns.values():
        fn = block_fn.fn
        if block_fn.concurrency_id != FAST_LANE or fn is None or inspect.iscoroutinefunction(fn) \
                or inspect.isasyncgenfunction(fn):
            continue
        block_fn.fn = _in_place(ctx, fn)
        covered += 1
    return covered


@contextlib.contextmanager
def _place(ctx: AppContext):
    from gradio.context import LocalContext

    with contextlib.ExitStack() as held:
        try:
            held.enter_context(ctx.fast_places.place(ctx.client_of(LocalContext.request.get(None))))
        except FastLaneBusyError as exc:
            raise gr.Error(str(exc), print_exception=False) from None
        yield


def _in_place(ctx: AppContext, fn: Callable) -> Callable:
    """``fn`` (a function or a generator) holding a place of the fast lane while it runs; its signature unchanged
    (``functools.wraps``: Gradio reads it for the request and progress it gives)."""
    if inspect.isgeneratorfunction(fn):
        @functools.wraps(fn)
        def held(*arguments, **settings):
            with _place(ctx):
                yield from fn(*arguments, **settings)
    else:
        @functools.wraps(fn)
        def held(*arguments, **settings):
            with _place(ctx):
                return fn(*arguments, **settings)
    return held
