"""Load test: many learners at once while a training run uses the same CPU.

    python benchmarks/load_test.py                          # 16 clients for 60 s on the repo's weights/
    python benchmarks/load_test.py --seconds 20 --clients 16 --weights-dir /tmp/tiny-weights

Starts ``python app.py`` as a subprocess on a free port of 127.0.0.1 (offline, analytics off), serving a
temporary copy of ``--weights-dir`` (so the training run's checkpoint never lands in the repo), starts a
training run through ``/train_start``, then runs ``--clients`` gradio_client clients in threads for
``--seconds``, each looping over a random mix of /tokenize (40%), /attention_step (35%) and short /sample
generations (25%, ``--new-tokens`` characters). At the end it stops the run through ``/train_stop``, stops the
server and prints, per endpoint: requests, failures, p50, p95 and max latency, and requests per second; then
the training run's progress. All traffic goes to 127.0.0.1; the script stops by itself (a hard deadline of
--seconds plus two minutes) and always takes the server down with it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

import httpx

from playground.checkpoints.store import list_checkpoints
from playground.lens.walkthrough import STEP_TITLES

REPO = Path(__file__).resolve().parents[1]
HOST = "127.0.0.1"
TEXTS = ["To be, or not to be: that is the question.", "ROMEO:\nBut soft, what light through yonder window?",
         "Hello world", "All the world's a stage", "Now is the winter of our discontent",
         "First Citizen:\nBefore we proceed any further, hear me speak."]
STEPS = list(STEP_TITLES)
MIX = (("/tokenize", 0.40), ("/attention_step", 0.35), ("/sample", 0.25))


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def start_server(weights: Path, scratch: Path, port: int) -> subprocess.Popen:
    env = {**os.environ, "GRADIO_SERVER_NAME": HOST, "GRADIO_SERVER_PORT": str(port),
           "GRADIO_ANALYTICS_ENABLED": "False", "HF_HUB_DISABLE_TELEMETRY": "1", "PLAYGROUND_OFFLINE": "1",
           "PLAYGROUND_WEIGHTS_DIR": str(weights), "PLAYGROUND_CACHE_DIR": str(scratch / "cache"),
           "GRADIO_TEMP_DIR": str(scratch / "gradio"), "HF_HOME": str(scratch / "hf")}
    shared = REPO.parent / "shared" / "data" / "tinyshakespeare.txt"
    if "PLAYGROUND_TINY_SHAKESPEARE" not in env and shared.is_file():
        env["PLAYGROUND_TINY_SHAKESPEARE"] = str(shared)
    log = open(scratch / "server.log", "w")  # the child keeps it; closed when it exits
    return subprocess.Popen([sys.executable, "app.py"], cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)


def wait_until_up(url: str, process: subprocess.Popen, timeout: float = 180) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with {process.returncode} before answering")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"the server did not answer at {url} within {timeout:.0f} s")


class Recorder:
    def __init__(self):
        self.lock = threading.Lock()
        self.latencies: dict[str, list[float]] = defaultdict(list)
        self.failures: dict[str, list[str]] = defaultdict(list)

    def add(self, endpoint: str, seconds: float, error: str | None) -> None:
        with self.lock:
            if error is None:
                self.latencies[endpoint].append(seconds)
            else:
                self.failures[endpoint].append(error)


def client_loop(number: int, url: str, checkpoint: str, config: dict, deadline: float, new_tokens: int,
                recorder: Recorder) -> None:
    from gradio_client import Client

    rng = random.Random(number)
    client = Client(url, verbose=False, download_files=False)
    names, weights = zip(*MIX)
    while time.time() < deadline:
        endpoint = rng.choices(names, weights)[0]
        text = rng.choice(TEXTS)
        if endpoint == "/tokenize":
            args = [text, rng.choice(["loaded checkpoint", "this text"]), checkpoint]
        elif endpoint == "/attention_step":
            args = ["trained checkpoint", checkpoint, rng.randrange(config["layers_num"]),
                    rng.randrange(config["heads_num"]), 0, 16, 8, "journey", text, True, True, 1.0, False,
                    rng.choice(STEPS), None]
        else:
            args = [checkpoint, text.split("\n")[0][:20], new_tokens, 0.8, 0, 1.0, rng.randrange(10_000), False,
                    True, True]
        started = time.perf_counter()
        try:
            client.predict(*args, api_name=endpoint)
        except Exception as exc:  # a failure is a result here: counted and reported, never fatal
            recorder.add(endpoint, time.perf_counter() - started, f"{type(exc).__name__}: {str(exc)[:160]}")
        else:
            recorder.add(endpoint, time.perf_counter() - started, None)


def report(recorder: Recorder, seconds: float) -> None:
    print(f"\n{'endpoint':<16} {'requests':>8} {'failures':>8} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8} "
          f"{'req/s':>6}")
    total = failed = 0
    for endpoint, _ in MIX:
        ok = recorder.latencies[endpoint]
        bad = recorder.failures[endpoint]
        total += len(ok) + len(bad)
        failed += len(bad)
        if ok:
            p50, p95, worst = (1000 * percentile(ok, 0.5), 1000 * percentile(ok, 0.95), 1000 * max(ok))
            figures = f"{p50:>8.0f} {p95:>8.0f} {worst:>8.0f}"
        else:
            figures = f"{'-':>8} {'-':>8} {'-':>8}"
        print(f"{endpoint:<16} {len(ok) + len(bad):>8} {len(bad):>8} {figures} {(len(ok) + len(bad)) / seconds:>6.1f}")
    print(f"{'all':<16} {total:>8} {failed:>8} {'':>8} {'':>8} {'':>8} {total / seconds:>6.1f}")
    for endpoint, errors in recorder.failures.items():
        if errors:
            print(f"  {endpoint}: {len(errors)} failures, most often: {statistics.multimode(errors)[0]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="how long the clients run")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--weights-dir", type=Path, default=REPO / "weights",
                        help="a weights folder with at least one checkpoint (copied, never written)")
    parser.add_argument("--checkpoint", default=None, help="default: the first checkpoint listed")
    parser.add_argument("--new-tokens", type=int, default=20, help="characters per /sample request")
    parser.add_argument("--train-steps", type=int, default=5000, help="the background run's planned steps")
    args = parser.parse_args(argv)

    names = list_checkpoints(args.weights_dir)
    if not names:
        parser.error(f"no checkpoint in {args.weights_dir}")
    checkpoint = args.checkpoint or names[0]
    config = json.loads((args.weights_dir / checkpoint / "config.json").read_text(encoding="utf-8"))
    scratch = Path(tempfile.mkdtemp(prefix="load-test-"))
    weights = scratch / "weights"
    shutil.copytree(args.weights_dir, weights, ignore=shutil.ignore_patterns(".*"))
    port = free_port()
    url = f"http://{HOST}:{port}/"
    hard_deadline = time.time() + args.seconds + 120
    server = start_server(weights, scratch, port)
    timer = threading.Timer(args.seconds + 300, lambda: server.kill())  # the last resort: never outlive this
    timer.daemon = True
    timer.start()
    try:
        wait_until_up(url, server)
        from gradio_client import Client

        control = Client(url, verbose=False, download_files=False)
        status = control.predict(2, 2, 64, 64, 16, args.train_steps, 3e-3, 20, 0.0, 0, "cpu", "Tiny Shakespeare",
                                 None, "", "load-test-run", api_name="/train_start")[0]
        print(f"server on {url} (pid {server.pid}), checkpoint {checkpoint}, {args.clients} clients for "
              f"{args.seconds:.0f} s\ntraining: {status.splitlines()[0]}", flush=True)
        recorder = Recorder()
        deadline = min(time.time() + args.seconds, hard_deadline)
        started = time.time()
        threads = [threading.Thread(target=client_loop, daemon=True,
                                    args=(i, url, checkpoint, config, deadline, args.new_tokens, recorder))
                   for i in range(args.clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(max(1.0, hard_deadline - time.time()))
        elapsed = time.time() - started
        stopped = control.predict(api_name="/train_stop")[0]
        for _ in range(120):
            status = control.predict(0, 0, 0, api_name="/train_status")[0]
            if "RUNNING" not in status and "STOPPING" not in status:
                break
            time.sleep(1)
        report(recorder, elapsed)
        lines = [line for line in status.splitlines() if line.strip()]
        print(f"\ntraining at the end: {lines[0]}\n  {' '.join(lines[1:3])}")
        if "STOPPED" not in status and "FINISHED" not in status:
            print(f"  (after /train_stop: {stopped.splitlines()[0]})")
        return 0
    finally:
        timer.cancel()
        if server.poll() is None:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(15)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
