"""The app makes no outgoing connection: every socket call it makes goes to loopback.

A child process installs an audit hook before anything else is imported. The hook sees every
``socket.connect`` (connect and connect_ex), ``socket.getaddrinfo``, ``socket.gethostbyname*`` and
``socket.sendto``/``sendmsg`` the process makes, from Python or from the C socket module, in any thread;
it records each non-loopback attempt and blocks it by raising (Unix sockets are not the network). Then
the child imports ``app``, builds the app, launches it on 127.0.0.1, and drives the main actions through
gradio_client: tokenize, an attention step, an export, compare, sample, checkpoint info and a 5-step
training run on Tiny Shakespeare (from ../shared). Last, it checks that the guard works: a name lookup, a
connect and a connect_ex to TEST-NET addresses are all refused and recorded.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

from conftest import REPO, SHARED_CORPUS

CHILD = textwrap.dedent('''
    import ipaddress, json, os, socket, sys, threading
    ATTEMPTS, ALLOWED = [], []
    _LOCAL_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"}

    def _is_loopback(host):
        if host is None:  # getaddrinfo(None, port): a local, passive address
            return True
        if isinstance(host, bytes):
            host = host.decode("ascii", "replace")
        host = str(host).strip("[]").split("%")[0].lower()
        if host in _LOCAL_NAMES or host.endswith(".localhost"):
            return True
        try:
            return ipaddress.ip_address(host).is_loopback
        except ValueError:
            return False

    def _guard(event, args):
        if event == "socket.connect":
            sock, address = args
            if sock.family not in (socket.AF_INET, socket.AF_INET6):
                return  # a Unix socket or a socketpair: not the network
            host = address[0]
        elif event in ("socket.sendto", "socket.sendmsg"):
            sock, address = args[0], args[-1]
            if sock.family not in (socket.AF_INET, socket.AF_INET6) or not isinstance(address, tuple):
                return
            host = address[0]
        elif event in ("socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyname_ex",
                       "socket.gethostbyaddr", "socket.getnameinfo"):
            host = args[0][0] if event == "socket.getnameinfo" else args[0]
        else:
            return
        record = {"event": event, "host": repr(host), "thread": threading.current_thread().name}
        if _is_loopback(host):
            ALLOWED.append(record)
            return
        ATTEMPTS.append(record)
        raise ConnectionRefusedError(f"blocked by test_no_network: {event} to {host!r}")

    sys.addaudithook(_guard)

    import app  # noqa: F401  the entry module: it must not reach out on import
    from gradio_client import Client
    from playground.ui import build_app, launch_options

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    weights = sys.argv[1]
    demo = build_app(weights=weights)
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True, **launch_options())
    client = Client(demo.local_url, verbose=False, download_files=False)
    results = {}
    _, ids, decoded, _, _ = client.predict("Hello world", "loaded checkpoint", "shakespeare-char",
                                           api_name="/tokenize")
    results["tokenize"] = decoded
    step = client.predict("trained checkpoint", "shakespeare-char", 1, 1, 0, 16, 8, "journey", "To be, or not",
                          True, True, 1.0, False, "6. Softmax weights", 3, api_name="/attention_step")
    results["attention_step"] = step[0].splitlines()[0]
    files = client.predict("trained checkpoint", "shakespeare-char", 0, 0, 0, 16, 8, "journey", "To be", True, True,
                           1.0, False, "2. Q, K, V", api_name="/attention_export")
    results["attention_export"] = len(files)
    summary = client.predict(32, 4, 8, 2, 0, False, "fp32", "cpu", api_name="/compare")[0]
    results["compare"] = summary.split(" compared")[0]
    results["compare_source"] = "class" in client.predict("sdpa", api_name="/compare_source")
    text = client.predict("shakespeare-char", "ROMEO:", 20, 0.8, 0, 1.0, 7, False, True, False,
                          api_name="/sample")[0]
    results["sample"] = len(text)
    results["checkpoint_info"] = "parameters" in client.predict("shakespeare-char", api_name="/checkpoint_info")
    client.predict(1, 2, 16, 16, 4, 5, 3e-3, 1, 0.0, 0, "cpu", "Tiny Shakespeare", None, "", "net-check",
                   api_name="/train_start")
    demo.playground_context.jobs.wait(180)
    results["train"] = client.predict(0, 0, 0, api_name="/train_status")[0].split(" · ")[0]
    demo.close()

    app_attempts = list(ATTEMPTS)
    probes = []
    for target in (("203.0.113.7", 80), ("example.com", 443)):
        try:
            socket.create_connection(target, timeout=2).close()
            probes.append(f"create_connection {target[0]} reached")
        except OSError as exc:
            probes.append(f"create_connection {target[0]} blocked: {exc}")
    for how in ("connect", "connect_ex"):  # straight to the socket, no name lookup first
        raw = socket.socket()
        raw.settimeout(2)
        try:
            getattr(raw, how)(("203.0.113.9", 80))
            probes.append(f"{how} reached")
        except OSError as exc:
            probes.append(f"{how} blocked: {exc}")
        finally:
            raw.close()
    print("RESULT " + json.dumps({"attempts": app_attempts, "guard": ATTEMPTS[len(app_attempts):],
                                  "probes": probes, "loopback_calls": len(ALLOWED), "results": results}))
''')


def test_the_app_makes_no_outgoing_connection(tiny_weights, tmp_path):
    weights = tmp_path / "weights"
    shutil.copytree(tiny_weights, weights, ignore=shutil.ignore_patterns(".*"))
    script = tmp_path / "child.py"
    script.write_text(CHILD, encoding="utf-8")
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path / "home"), "LANG": "C.UTF-8",
        "PYTHONPATH": str(REPO), "GRADIO_ANALYTICS_ENABLED": "False", "HF_HUB_DISABLE_TELEMETRY": "1",
        "PLAYGROUND_OFFLINE": "1", "PLAYGROUND_TINY_SHAKESPEARE": str(SHARED_CORPUS),
        "PLAYGROUND_CACHE_DIR": str(tmp_path / "cache"), "GRADIO_TEMP_DIR": str(tmp_path / "gradio"),
        "HF_HOME": str(tmp_path / "hf"), "PLAYGROUND_DEVICE": "cpu",
    }
    done = subprocess.run([sys.executable, str(script), str(weights)], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=420)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, f"child failed ({done.returncode}):\n{done.stderr[-4000:]}"
    report = json.loads(lines[-1][len("RESULT "):])
    print(json.dumps(report, indent=1))

    assert report["attempts"] == [], f"the app tried to reach the network: {report['attempts']}"
    results = report["results"]
    assert results["tokenize"] == "Hello world"
    assert "6. Softmax weights" in results["attention_step"] and results["attention_export"] == 6
    assert results["compare"].endswith("6 of 6") and results["compare_source"]
    assert results["sample"] == len("ROMEO:") + 20 and results["checkpoint_info"]
    assert "FINISHED" in results["train"], results["train"]
    assert (weights / "net-check" / "model.safetensors").is_file()
    assert report["loopback_calls"] > 0, "the client's loopback traffic was not seen: is the guard installed?"
    # the guard itself works: both probes were refused and recorded
    assert all("blocked" in probe for probe in report["probes"]), report["probes"]
    assert {entry["host"] for entry in report["guard"]} >= {"'203.0.113.7'", "'example.com'", "'203.0.113.9'"}
    assert len(report["probes"]) == 4
