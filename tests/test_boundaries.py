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


# The package by concern, lowest first: a module imports only from its own folder or from a lower rank
# (docs/development.md#layout). The floor's five modules may read each other.
RANKS = {"floor": 0, "text": 1, "attention": 1, "textbook": 2, "model": 3, "checkpoints": 4, "lens": 5,
         "training": 6, "server": 7, "cli": 7, "ui": 8, "doors": 9}
FLOOR = ("__init__", "checks", "config", "settings", "device", "budget")
DOORS = ("train", "sample", "convert", "export", "push")  # python -m playground.X: a few lines importing cli/
MOST_TOP_LEVEL_MODULES = 12


def _room(parts: tuple[str, ...]) -> str:
    """The folder a module (its path's parts below playground/, or its dotted name's) belongs to."""
    first = parts[0].removesuffix(".py")
    if len(parts) == 1:
        return "floor" if first in FLOOR else "doors" if first in DOORS else first
    return first


def test_every_import_points_down():
    upward = []
    for path in sorted(PLAYGROUND.rglob("*.py")):
        mine = _room(path.relative_to(PLAYGROUND).parts)
        for module in imported_modules(ast.parse(path.read_text(encoding="utf-8"))):
            parts = module.split(".")
            if parts[0] != "playground" or len(parts) == 1:
                continue
            theirs = _room(tuple(parts[1:2]) if len(parts) == 2 and parts[1] in (*FLOOR, *DOORS) else tuple(parts[1:]))
            if theirs in RANKS and theirs != mine and RANKS[theirs] >= RANKS[mine]:
                upward.append(f"{path.relative_to(PLAYGROUND)} -> {module}")
    assert not upward


def test_the_top_level_holds_the_floor_and_the_doors_only():
    modules = sorted(p.stem for p in PLAYGROUND.glob("*.py"))
    assert set(modules) <= set(FLOOR) | set(DOORS) and len(modules) - 1 <= MOST_TOP_LEVEL_MODULES, modules


def test_only_the_doors_and_the_command_lines_run_as_main():
    """A library module with a __main__ block ran apply_process_defaults and the CLI from inside the library (train.py
    had two): python -m playground.X lands on a door of a few lines that imports cli/ only."""
    door_or_cli = [PLAYGROUND / f"{door}.py" for door in DOORS] + list((PLAYGROUND / "cli").glob("*.py"))
    runs = [str(p.relative_to(PLAYGROUND)) for p in PLAYGROUND.rglob("*.py")
            if '__name__ == "__main__"' in p.read_text(encoding="utf-8") and p not in door_or_cli]
    assert not runs
    for door in DOORS:
        imported = imported_modules(ast.parse((PLAYGROUND / f"{door}.py").read_text(encoding="utf-8")))
        assert all(m.startswith(("playground.cli", "playground.settings")) for m in imported), (door, imported)


MOST_LINES = 800  # a module past this does several jobs: split it by job (why_tab.py was 1,426 lines doing four)


def test_no_module_is_over_800_lines():
    long = {str(p.relative_to(PLAYGROUND)): n for p in PLAYGROUND.rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MOST_LINES}
    assert not long
