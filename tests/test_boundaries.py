"""Who may know what: the run and the checkpoint store know nothing of visitors or owners, and the command lines never
load the server layer (playground/server/). Read from the source (names and imports), not from behaviour."""

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

PLAYGROUND = REPO / "playground"
# module -> words no name, string or import of it may contain (case-insensitive); neither imports playground.server
UNAWARE = {"training/run.py": ("visitor",), "checkpoints/store.py": ("visitor", "owner")}
RUN_MOST_LINES = 450  # run.py runs a run; what it may cost and who may start it live elsewhere


def names_and_strings(tree: ast.AST):
    """Every identifier a module defines or uses, every string it holds (docstrings too), every module it imports."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            yield node.id
        elif isinstance(node, ast.Attribute):
            yield node.attr
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield node.name
        elif isinstance(node, ast.arg):
            yield node.arg
        elif isinstance(node, ast.keyword) and node.arg:
            yield node.arg
        elif isinstance(node, ast.alias):
            yield node.name
            if node.asname:
                yield node.asname
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.value


def imported_modules(tree: ast.AST) -> set[str]:
    modules = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules.add(node.module)
            modules.update(f"{node.module}.{alias.name}" for alias in node.names)
    return modules


@pytest.mark.parametrize("module", sorted(UNAWARE))
def test_the_run_and_the_store_know_nothing_of_visitors(module):
    tree = ast.parse((PLAYGROUND / module).read_text(encoding="utf-8"))
    found = sorted({name for name in names_and_strings(tree) for word in UNAWARE[module] if word in name.lower()})
    assert not found, f"{module} mentions {found}"
    assert not [m for m in imported_modules(tree) if m.startswith("playground.server")]


def test_the_run_module_stays_a_run():
    lines = len((PLAYGROUND / "training" / "run.py").read_text(encoding="utf-8").splitlines())
    assert lines < RUN_MOST_LINES, f"run.py has {lines} lines"


def test_no_core_module_imports_the_server_layer():
    """Only the UI (and the server package itself) may: the core and the command lines are the operator's."""
    offenders = []
    for path in sorted(PLAYGROUND.rglob("*.py")):
        relative = path.relative_to(PLAYGROUND).parts
        if relative[0] in ("server", "ui"):
            continue
        modules = imported_modules(ast.parse(path.read_text(encoding="utf-8")))
        if any(m == "playground.server" or m.startswith("playground.server.") for m in modules):
            offenders.append("/".join(relative))
    assert not offenders


def test_the_command_lines_never_load_the_server_layer():
    """Imported for real, in a fresh interpreter: nothing they pull in, however indirectly, is playground.server."""
    cli = sorted(f"playground.cli.{p.stem}" for p in (PLAYGROUND / "cli").glob("*.py") if p.stem != "__init__")
    code = ("import importlib, json, sys\n"
            f"for name in {cli!r}: importlib.import_module(name)\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith('playground.server'))))")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300,
                            env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HOME": str(Path.home())})
    assert result.returncode == 0, result.stderr[-2000:]
    assert cli and json.loads(result.stdout.strip().splitlines()[-1]) == []
