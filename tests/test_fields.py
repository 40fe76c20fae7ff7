"""The input components refuse wrong values with one readable line, and write nothing into the package."""

from pathlib import Path

import gradio as gr
import pytest

from playground.ui import fields

PACKAGE = Path(fields.__file__).parent


def test_no_stub_files_are_written_next_to_the_source():
    fields.Number(1, label="n")
    assert not list(PACKAGE.glob("*.pyi"))


@pytest.mark.parametrize("payload,message", [
    ("abc", "steps must be a number, got 'abc'"), ([1], "steps must be a number, got [1]"),
    (True, "steps must be a number"), ("NaN", "steps must be a finite number"), ("inf", "finite"),
    (7, "greater than maximum value 5"),
])
def test_number_refusals(payload, message):
    with pytest.raises(gr.Error, match=message.replace("[", r"\[").replace("]", r"\]")):
        fields.Number(1, label="steps", precision=0, minimum=1, maximum=5).preprocess(payload)


def test_number_accepts_numbers_and_numeric_text():
    number = fields.Number(1, label="steps", precision=0)
    assert number.preprocess(3) == 3 and number.preprocess("4") == 4 and number.preprocess(None) is None


def test_slider_refuses_empty_and_text():
    slider = fields.Slider(0, 1, value=0.5, label="top-p")
    assert slider.preprocess(0.25) == 0.25
    for payload, message in [(None, "top-p is empty"), ({"a": 1}, "top-p must be a number")]:
        with pytest.raises(gr.Error, match=message):
            slider.preprocess(payload)


def test_a_long_bad_choice_is_quoted_short():
    radio = fields.Radio(["a", "b"], value="a", label="corpus")
    assert radio.preprocess("b") == "b"
    with pytest.raises(gr.Error) as caught:
        radio.preprocess("x" * 100_000)
    assert "corpus:" in str(caught.value) and len(str(caught.value)) < 200


def test_a_dropdown_with_custom_values_wants_text():
    dropdown = fields.Dropdown(["a"], value="a", label="Checkpoint", allow_custom_value=True)
    assert dropdown.preprocess("owner/name") == "owner/name"
    with pytest.raises(gr.Error, match="Checkpoint must be text"):
        dropdown.preprocess(["a"])


@pytest.mark.parametrize("payload", ["/etc/passwd", 5, {"nope": 1}, [1, 2]])
def test_the_upload_refuses_anything_but_an_uploaded_file(payload):
    upload = fields.UploadFile(label=".txt upload", type="filepath")
    validated = upload.data_model.model_validate(payload, context={"validate_meta": True})
    with pytest.raises(gr.Error, match=".txt upload must be a file uploaded to this server"):
        upload.preprocess(validated)


def test_the_upload_passes_a_real_file(tmp_path):
    path = tmp_path / "a.txt"
    path.write_text("hello")
    upload = fields.UploadFile(label="upload", type="filepath")
    validated = upload.data_model.model_validate({"path": str(path), "meta": {"_type": "gradio.FileData"}},
                                                 context={"validate_meta": True})
    assert upload.preprocess(validated) == str(path)
