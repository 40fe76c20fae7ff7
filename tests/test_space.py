"""What a Hugging Face Space builds from this repository: the README's front matter says ``sdk: gradio``, and such a
Space installs ``pre-requirements.txt``, then ``requirements.txt``. PyPI's Linux torch is the CUDA build (a dry run
against PyPI alone lists torch with nvidia-cudnn-cu13, nvidia-nccl-cu13, triton and cuda-toolkit), so the CPU
build has to be installed first, from PyTorch's index; the index cannot be reached from here, so the files are
read in the Space's order and pip's own resolver checks what requirements.txt adds once that torch is in place."""

from __future__ import annotations

import json
import re
import subprocess
import sys

from conftest import REPO
from packaging.requirements import Requirement
from packaging.version import Version

CPU_INDEX = "https://download.pytorch.org/whl/cpu"
CUDA_PACKAGE = re.compile(r"^(nvidia-|cuda-|triton$|pytorch-triton)", re.IGNORECASE)


def read_requirements(name: str) -> tuple[list[str], list[Requirement]]:
    """A requirements file's options (``--extra-index-url URL``) and requirements, comments left out."""
    options, requirements = [], []
    for line in (REPO / name).read_text(encoding="utf-8").splitlines():
        line = re.sub(r"(^|\s)#.*$", "", line).strip()
        if line.startswith("-"):
            options.append(line)
        elif line:
            requirements.append(Requirement(line))
    return options, requirements


def torch_of(requirements: list[Requirement]) -> Requirement:
    [torch] = [r for r in requirements if r.name == "torch"]
    return torch


def test_the_space_installs_the_cpu_torch_first_and_requirements_keep_it():
    front_matter = (REPO / "README.md").read_text(encoding="utf-8").split("---\n")[1]
    assert "sdk: gradio" in front_matter.splitlines()  # the build that reads pre-requirements.txt first
    options, first = read_requirements("pre-requirements.txt")  # the order the Space's build installs them
    assert options == [f"--extra-index-url {CPU_INDEX}"]
    [pin] = torch_of(first).specifier
    assert pin.operator == "==" and Version(pin.version).local == "cpu"  # only PyTorch's CPU index has +cpu
    then_options, then = read_requirements("requirements.txt")
    assert torch_of(then).specifier.contains(Version(pin.version))  # satisfied: pip keeps the CPU build installed
    assert not [r.name for r in first + then if CUDA_PACKAGE.match(r.name)]
    # The README's and Dockerfile's commands install requirements.txt beside a plain torch==X from PyPI (or the CPU
    # index): a +cpu pin or an index in requirements.txt would break the first
    assert then_options == [] and "+" not in str(torch_of(then).specifier)
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    public = Version(pin.version).public
    assert f"pip install torch=={public} -r requirements.txt" in readme
    assert f"pip install torch=={public} --index-url" in (REPO / "Dockerfile").read_text(encoding="utf-8")


def test_with_torch_in_place_requirements_add_no_cuda_package():
    """pip's resolver, offline (--no-index), in this environment where torch is installed as the pre-requirements
    leave it on a Space: requirements.txt installs nothing more of torch's, and no CUDA package."""
    result = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--no-index", "--quiet",
                             "--report", "-", "-r", str(REPO / "requirements.txt")],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads(result.stdout[result.stdout.index("{"):])
    installed = [item["metadata"]["name"] for item in report["install"]]
    assert "torch" not in installed and not [name for name in installed if CUDA_PACKAGE.match(name)], installed


def test_the_package_asks_for_what_requirements_txt_does():
    """pyproject.toml keeps requirements.txt's ranges (its comment says so); tokenizers, which reads every BPE and
    writes every export's tokenizer.json, was missing from it, so `pip install .` left exports failing."""
    import tomllib

    declared = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    _, listed = read_requirements("requirements.txt")
    assert sorted(map(str, map(Requirement, declared))) == sorted(map(str, listed))
