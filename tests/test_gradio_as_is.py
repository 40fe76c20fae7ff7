"""Gradio as it is: no module of the project subclasses or patches a Gradio class, or rewrites a handler's signature
(a subclass becomes a custom component whose front-end files 404; a patch changes every app in the process)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted([ROOT / "app.py", *(ROOT / "playground").rglob("*.py")])


def _is_gradio(node: ast.AST) -> bool:
    """An expression that starts at the gradio module: gr.Slider, gradio.components.Radio..."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name) and node.id in {"gr", "gradio"}


def test_no_gradio_class_is_subclassed_patched_or_given_a_signature():
    found = []
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.ClassDef) and any(_is_gradio(base) for base in node.bases):
                found.append(f"{where} subclasses a Gradio class")
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
                node, (ast.AugAssign, ast.AnnAssign)) else []
            for target in targets:
                if isinstance(target, ast.Attribute) and _is_gradio(target.value):
                    found.append(f"{where} assigns to {ast.unparse(target)}")
                if isinstance(target, ast.Attribute) and target.attr == "__signature__":
                    found.append(f"{where} rewrites a signature")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr" and \
                    node.args and _is_gradio(node.args[0]):
                found.append(f"{where} sets an attribute of a Gradio class")
    assert found == []


def test_the_check_sees_a_patch():
    """The scan itself finds what it looks for (a test that passes on anything proves nothing)."""
    tree = ast.parse("import gradio as gr\nclass S(gr.Slider):\n    pass\ngr.Radio.preprocess = None\n")
    assert any(isinstance(n, ast.ClassDef) and _is_gradio(n.bases[0]) for n in ast.walk(tree))
    assigned = [n for n in ast.walk(tree) if isinstance(n, ast.Assign)]
    assert _is_gradio(assigned[0].targets[0].value)
