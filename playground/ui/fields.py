"""Input components that refuse a wrong value with a short, readable gr.Error.

Gradio's own Number, Slider, Radio, Dropdown and File check their payload before a handler runs, and
some of those checks fail with a TypeError or a pydantic error (text in a number field, a list in an
upload slot), which the client only sees as Gradio's generic "error" text; others repeat the whole
value, however long. The subclasses here check the payload first and say what was wrong, in a line.
The browser never sends such values; the API can.

They are made with ``_Quiet``, a metaclass that skips what Gradio's own does for a new component class
beyond ABCMeta's work: it writes a .pyi stub next to the class's source file (into this package, at
import time), and these classes define no events or __init__ for it to wrap. Subclasses, not wrapped
instances, because Gradio rebuilds a component from ``block.__class__`` whenever a handler updates it.
"""

from __future__ import annotations

import math
from abc import ABCMeta
from typing import Any

import gradio as gr
from gradio.component_meta import ComponentMeta
from gradio.data_classes import FileData as _GradioFileData
from gradio.data_classes import ListFiles
from pydantic import model_validator

SHOWN_CHARS = 60


def shown(value: Any) -> str:
    """A value as a message may quote it: its repr, cut to SHOWN_CHARS characters."""
    text = repr(value)
    if len(text) > SHOWN_CHARS:
        text = f"{text[:SHOWN_CHARS]}... ({len(text):,} characters)"
    return text


def _number(label: str | None, payload: Any) -> float:
    name = label or "this field"
    if isinstance(payload, bool) or not isinstance(payload, (int, float, str)):
        raise gr.Error(f"{name} must be a number, got {shown(payload)}")
    try:
        number = float(payload)
    except (ValueError, OverflowError):
        raise gr.Error(f"{name} must be a number, got {shown(payload)}") from None
    if not math.isfinite(number):
        raise gr.Error(f"{name} must be a finite number, got {shown(payload)}")
    if isinstance(payload, int):
        return payload
    return number


class _Quiet(ComponentMeta):
    def __new__(mcs, name, bases, attrs):
        if "__init__" in attrs or "EVENTS" in attrs:
            raise TypeError(f"{name}: a _Quiet component may not define __init__ or EVENTS")
        return ABCMeta.__new__(mcs, name, bases, attrs)


class Number(gr.Number, metaclass=_Quiet):
    """gr.Number that refuses text, lists, booleans, NaN and infinities with a message naming the field."""

    def preprocess(self, payload: Any) -> float | int | None:
        if payload is None or payload == "":
            return None  # the handler says the field is empty
        return super().preprocess(_number(self.label, payload))


class Slider(gr.Slider, metaclass=_Quiet):
    """gr.Slider with the same checks as Number (and a message for an empty value)."""

    def preprocess(self, payload: Any) -> float:
        if payload is None or payload == "":
            raise gr.Error(f"{self.label or 'this slider'} is empty")
        return super().preprocess(_number(self.label, payload))


def _check_choice(component: gr.Radio | gr.Dropdown, payload: Any) -> None:
    if payload is None:
        return
    if getattr(component, "allow_custom_value", False):
        if not isinstance(payload, (str, int, float)):
            raise gr.Error(f"{component.label or 'this field'} must be text, got {shown(payload)}")
        return
    values = [value for _, value in component.choices]
    if payload not in values:
        listed = ", ".join(shown(v) for v in values[:12]) + (", ..." if len(values) > 12 else "")
        raise gr.Error(f"{component.label or 'this field'}: {shown(payload)} is not one of the choices ({listed})")


class Radio(gr.Radio, metaclass=_Quiet):
    """gr.Radio whose refusal of an unknown choice quotes at most SHOWN_CHARS characters of it."""

    def preprocess(self, payload: Any) -> Any:
        _check_choice(self, payload)
        return super().preprocess(payload)


class Dropdown(gr.Dropdown, metaclass=_Quiet):
    """gr.Dropdown (single choice) with the same short refusal; custom values, when allowed, must be text."""

    def preprocess(self, payload: Any) -> Any:
        _check_choice(self, payload)
        return super().preprocess(payload)


_NOT_A_FILE = "\x00not-an-uploaded-file"


class FileData(_GradioFileData):
    """A file uploaded to this server (gradio_client: handle_file(path))."""

    # Gradio's FileData, letting anything but an uploaded file's description through as a marked value: Gradio
    # validates this model outside the component's error handling, where any error reaches the client as the
    # generic text, so a bad value is marked here and refused by UploadFile.preprocess. The same name as
    # Gradio's, so the API schema and gradio_client see an ordinary file input. This docstring is the schema's
    # description, shown in the API page.

    @model_validator(mode="before")
    @classmethod
    def _mark_non_files(cls, value: Any) -> Any:
        if isinstance(value, _GradioFileData):
            return value
        if not isinstance(value, dict) or not isinstance(value.get("path"), str) or value["path"] == _NOT_A_FILE:
            return {"path": _NOT_A_FILE, "orig_name": shown(value), "meta": {"_type": "gradio.FileData"}}
        return value


class UploadFile(gr.File, metaclass=_Quiet):
    """gr.File for uploads that refuses a non-file value with a readable message."""

    @property
    def data_model(self):
        return FileData if self.file_count == "single" else ListFiles

    @data_model.setter
    def data_model(self, _value) -> None:  # gr.File.__init__ assigns Gradio's own; ours stands
        pass

    def preprocess(self, payload: Any) -> Any:
        if isinstance(payload, _GradioFileData) and payload.path == _NOT_A_FILE:
            raise gr.Error(f"{self.label or 'the upload'} must be a file uploaded to this server "
                           f"(gradio_client: handle_file(path)), got {payload.orig_name}")
        return super().preprocess(payload)
