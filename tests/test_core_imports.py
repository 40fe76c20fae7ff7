import subprocess
import sys

from conftest import REPO


def _core_modules() -> list[str]:
    """Every module of the package but the UI (playground.ui.*): found, not listed."""
    import pkgutil

    import playground

    names = ["playground"] + [info.name for info in pkgutil.walk_packages(playground.__path__, "playground.")]
    return sorted(name for name in names if not name.startswith("playground.ui"))


CORE = _core_modules()


def test_core_imports_without_gradio_or_plotly():
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('gradio', 'plotly'):\n"
        "            raise ImportError('blocked ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        f"for m in {CORE!r}:\n"
        "    __import__(m)\n"
        "assert not any(k.split('.')[0] in ('gradio', 'plotly') for k in sys.modules)\n"
        "print('ok')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_the_attention_family_does_not_pull_in_the_model_or_the_tokenizer():
    """playground.attention is the Compare tab's family; the GPT and the tokenizer belong to the walkthrough."""
    code = ("import sys\n"
            "import playground.attention, playground.attention.equivalence, playground.attention.costs\n"
            "loaded = sorted(m for m in ('playground.model.gpt', 'playground.text.tokenizer',"
            " 'playground.lens.walkthrough') if m in sys.modules)\n"
            "print(loaded)\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_importing_the_core_does_no_work():
    """No device probing, downloads or model loading at import time: importing takes no network and no files."""
    code = ("import socket\n"
            "socket.socket.connect = lambda *a, **k: (_ for _ in ()).throw(AssertionError('network at import'))\n"
            f"for m in {CORE!r}:\n"
            "    __import__(m)\n"
            "import torch; assert not torch.cuda.is_initialized()\n"
            "print('ok')\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr


def test_the_ui_uses_gradio_components_as_they_are():
    """A subclass of a Gradio component becomes a "custom component" whose front-end files 404 in the browser."""
    import importlib
    import inspect
    import pkgutil

    import gradio as gr

    import playground.ui

    subclasses = []
    for info in pkgutil.iter_modules(playground.ui.__path__):
        module = importlib.import_module(f"playground.ui.{info.name}")
        subclasses += [f"{module.__name__}.{name}" for name, value in inspect.getmembers(module, inspect.isclass)
                       if issubclass(value, gr.components.Component) and value.__module__ == module.__name__]
    assert not subclasses
