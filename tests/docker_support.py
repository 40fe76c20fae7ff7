"""The Docker smoke test's build, run in the background while the rest of the suite goes on.

``../shared/tools/docker-smoke`` installs podman, makes a stand-in base image, builds the project's Dockerfile and
smoke-tests the container: minutes on a fresh machine, most of them spent waiting on apt, debootstrap and pip rather
than on the CPU. When the collected tests include tests/test_docker.py, those tests move to the end of the run and
the smoke test starts in the background (on a free port, its output in a log file) as soon as the last browser test
has finished, or right after collection when no browser test is selected. Not sooner: podman's container networks
come and go while it builds, and Chromium aborts its requests in flight (net::ERR_NETWORK_CHANGED) when the host's
network changes. test_docker.py's ``image`` fixture then waits for the result (``smoke_result``). Nothing starts
when test_docker.py is not selected or no engine can run here.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from browser_support import free_port

REPO = Path(__file__).resolve().parents[1]
SMOKE = REPO.parent / "shared" / "tools" / "docker-smoke"
SMOKE_TIMEOUT_SECONDS = 1500
_RUNNING: dict = {}  # "smoke": the Smoke once started; "after": the browser test it waits for


def engine_reason() -> str | None:
    """Why the image cannot be built here, or None when it can."""
    if not SMOKE.is_file():
        return f"no {SMOKE} beside the project"
    if shutil.which("podman"):
        return None
    if os.geteuid() == 0 and shutil.which("apt-get"):
        return None  # the smoke script installs podman itself
    return "neither podman nor docker can run here (no engine installed and not root to install one)"


@dataclass
class Smoke:
    process: subprocess.Popen
    log: Path

    def result(self) -> tuple[int, str]:
        """Wait for the build and smoke test to end: (exit code, the last of its output)."""
        try:
            code = self.process.wait(SMOKE_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
            return code, f"docker-smoke ran past {SMOKE_TIMEOUT_SECONDS} s and was killed\n" + self.output()
        return code, self.output()

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-6000:]


def start_smoke() -> Smoke:
    """Start docker-smoke from the project's root (once per session); its output goes to a log file."""
    if "smoke" not in _RUNNING:
        log = Path(tempfile.mkdtemp(prefix="docker-smoke-")) / "smoke.log"
        with open(log, "wb") as out:
            process = subprocess.Popen(["bash", str(SMOKE)], cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, env={**os.environ, "PORT": str(free_port())})
        _RUNNING["smoke"] = Smoke(process, log)
    return _RUNNING["smoke"]


def smoke_result() -> tuple[int, str]:
    """The smoke test's exit code and output, starting it now if collection did not."""
    return start_smoke().result()


def _is_docker_test(item) -> bool:
    return Path(str(item.path)).name == "test_docker.py"


def pytest_collection_modifyitems(config, items) -> None:
    """The Docker tests last, so the smoke test has the rest of the suite's time to run."""
    items[:] = [item for item in items if not _is_docker_test(item)] + [item for item in items if _is_docker_test(item)]


def pytest_collection_finish(session) -> None:
    if not any(_is_docker_test(item) for item in session.items) or engine_reason() is not None:
        return
    browser_tests = [item.nodeid for item in session.items if item.get_closest_marker("browser")]
    if browser_tests:
        _RUNNING["after"] = browser_tests[-1]  # pytest_runtest_logfinish starts it then
    else:
        start_smoke()


def pytest_runtest_logfinish(nodeid, location) -> None:
    if _RUNNING.get("after") == nodeid:
        start_smoke()


def pytest_sessionfinish(session, exitstatus) -> None:
    smoke = _RUNNING.get("smoke")
    if smoke is not None and smoke.process.poll() is None:  # the run ended (or was interrupted) before it was read
        smoke.process.terminate()
        try:
            smoke.process.wait(30)
        except subprocess.TimeoutExpired:
            smoke.process.kill()
