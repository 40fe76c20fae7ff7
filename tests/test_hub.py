"""playground.checkpoints.hub against a stub Hub on 127.0.0.1: just enough of the API for ``model_info`` and
``snapshot_download``.

huggingface_hub 2.x calls, for ``model_info(repo, files_metadata=True)`` and ``snapshot_download(repo, revision)``:
  GET  /api/models/{repo}/revision/{rev}[?blobs=true] -> JSON with "sha" and "siblings" (with "size" and "lfs"
                                                 when blobs=true, as the Hub answers)
  GET  /api/models/{repo}/tree/{sha}?recursive=  -> JSON list of {"type", "path", "size", "oid"}
  HEAD /{repo}/resolve/{sha}/{file}              -> X-Repo-Commit, ETag, Content-Length
  GET  /{repo}/resolve/{sha}/{file}              -> the bytes
Older versions skip the tree call and read "siblings"; the stub answers both. Errors carry
``X-Error-Code`` (RepoNotFound, RevisionNotFound, EntryNotFound) as the Hub's do.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
import torch
from conftest import REPO

from playground.checkpoints import hub
from playground.checkpoints.hub import HubError, download_checkpoint, is_hub_id, load_from_hub
from playground.checkpoints.store import CheckpointError, save_checkpoint
from playground.config import ModelConfig
from playground.model.gpt import GPT
from playground.text.tokenizer import CharTokenizer

SHA = "0123456789abcdef0123456789abcdef01234567"


class StubHub:
    """repos: {"owner/name": {filename: bytes}}; every request is recorded as (method, path) and its headers.

    ``claimed``: {"owner/name": {filename: size}} sizes the listing reports for files the stub does not hold
    in memory (a 1.5 GB model.safetensors); a GET of such a file streams that many zero bytes.
    ``history``: {"owner/name": {commit: {filename: bytes}}} a repo with several revisions, the last one main's;
    a file with the same bytes in two of them has the same ETag, so the cache keeps one blob for both.
    """

    def __init__(self, repos: dict[str, dict[str, bytes]], claimed: dict[str, dict[str, int]] | None = None,
                 history: dict[str, dict[str, dict[str, bytes]]] | None = None):
        self.repos = repos
        self.claimed = claimed or {}
        self.history = history or {}
        self.requests: list[tuple[str, str]] = []
        self.headers: list[dict[str, str]] = []
        self.bytes_sent = 0
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep pytest output clean
                pass

            def do_HEAD(self):
                stub.handle(self, body=False)

            def do_GET(self):
                stub.handle(self, body=True)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                                       daemon=True)

    def serve(self, monkeypatch, cache) -> StubHub:
        """Start serving and point huggingface_hub at this stub, online, with its cache in ``cache``."""
        self.thread.start()
        monkeypatch.setenv("HF_ENDPOINT", self.url)
        monkeypatch.setenv("HF_HUB_CACHE", str(cache))
        monkeypatch.delenv("PLAYGROUND_OFFLINE", raising=False)
        monkeypatch.delenv("PLAYGROUND_HUB_ALLOW", raising=False)
        monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)
        return self

    def requested_files(self) -> list[str]:
        return [path.rsplit("/", 1)[-1] for method, path in self.requests if "/resolve/" in path]

    @staticmethod
    def reply(handler, status: int, payload: bytes = b"", headers: dict | None = None, body: bool = True) -> None:
        handler.send_response(status)
        for key, value in {"Content-Length": str(len(payload)), "X-Repo-Commit": SHA, **(headers or {})}.items():
            handler.send_header(key, value)
        handler.end_headers()
        if body:
            handler.wfile.write(payload)

    def handle(self, handler, body: bool) -> None:
        path = unquote(urlsplit(handler.path).path)
        self.requests.append((handler.command, path))
        self.headers.append({key.lower(): value for key, value in handler.headers.items()})
        parts = path.strip("/").split("/")
        # owner/name, or a canonical id without an owner (gpt2): the word after the id says what is asked
        api = next((i for i in (3, 4) if parts[:2] == ["api", "models"] and len(parts) > i + 1
                    and parts[i] in ("revision", "tree")), None)
        resolve = next((i for i in (1, 2) if len(parts) > i + 2 and parts[i] == "resolve"), None)
        if api is not None:
            repo, kind, revision = "/".join(parts[2:api]), parts[api], parts[api + 1]
        elif resolve is not None:
            repo, kind, revision = "/".join(parts[:resolve]), "resolve", parts[resolve + 1]
        else:
            return self.reply(handler, 404, b"not found", body=body)
        if repo.startswith("gone/"):  # a plain 404, without the Hub's X-Error-Code
            return self.reply(handler, 404, b"Not Found", body=body)
        if repo.startswith("down/"):
            return self.reply(handler, 503, b"Service Unavailable", body=body)
        files, commit = self.repos.get(repo), SHA
        if repo in self.history:
            commit = list(self.history[repo])[-1] if revision == "main" else revision
            files = self.history[repo].get(commit, {})
            revision = SHA if commit in self.history[repo] else revision
        claimed = self.claimed.get(repo, {})
        if files is None:
            return self.reply(handler, 401, b'{"error": "Repository not found"}',
                              {"X-Error-Code": "RepoNotFound", "X-Error-Message": "Repository not found"}, body)
        if revision not in ("main", SHA):
            return self.reply(handler, 404, b'{"error": "Invalid rev id"}',
                              {"X-Error-Code": "RevisionNotFound", "X-Error-Message": "Invalid rev id"}, body)
        at = {"X-Repo-Commit": commit}
        sizes = {**{f: len(data) for f, data in files.items()}, **claimed}
        if kind == "revision":
            blobs = "blobs=true" in urlsplit(handler.path).query.lower()
            siblings = [{"rfilename": f, **({"size": size, "blobId": "0" * 40} if blobs else {}),
                         **({"lfs": {"size": size, "sha256": "0" * 64, "pointerSize": 134}}
                            if blobs and f.endswith(".safetensors") else {})} for f, size in sizes.items()]
            info = {"id": repo, "sha": commit, "private": False, "siblings": siblings}
            return self.reply(handler, 200, json.dumps(info).encode(), {"Content-Type": "application/json", **at},
                              body)
        if kind == "tree":
            tree = [{"type": "file", "path": f, "size": size, "oid": hashlib.sha1(files.get(f, b"")).hexdigest()}
                    for f, size in sizes.items()]
            return self.reply(handler, 200, json.dumps(tree).encode(), {"Content-Type": "application/json", **at},
                              body)
        filename = "/".join(parts[resolve + 2:])
        span = handler.headers.get("Range", "")
        if span.startswith("bytes=") and body and filename in sizes:  # a header read (get_safetensors_metadata)
            first, _, last = span[len("bytes="):].partition("-")
            first, last = int(first), min(int(last or sizes[filename] - 1), sizes[filename] - 1)
            data = files[filename][first:last + 1] if filename in files else b"\0" * max(0, last + 1 - first)
            self.bytes_sent += len(data)
            return self.reply(handler, 206, data, {"Content-Range": f"bytes {first}-{last}/{sizes[filename]}",
                                                   "Content-Type": "application/octet-stream", **at})
        if filename in claimed:  # a large file: its bytes are made up as they are sent
            size = claimed[filename]
            self.reply(handler, 200, b"", {"Content-Length": str(size), "ETag": f'"big-{size}"',
                                           "Content-Type": "application/octet-stream"}, body=False)
            if body:
                chunk = b"\0" * 2**20
                for start in range(0, size, len(chunk)):
                    handler.wfile.write(chunk[:min(len(chunk), size - start)])
                    self.bytes_sent += min(len(chunk), size - start)
            return None
        if filename not in files:
            return self.reply(handler, 404, b"Entry not found", {"X-Error-Code": "EntryNotFound"}, body)
        data = files[filename]
        if body:
            self.bytes_sent += len(data)
        self.reply(handler, 200, data, {"ETag": f'"{hashlib.sha256(data).hexdigest()}"',
                                        "Content-Type": "application/octet-stream", **at}, body)


def make_tiny_checkpoint(folder: Path):
    """A tiny saved checkpoint: (model, tokenizer, {filename: bytes}); the stub Hub serves the files."""
    tokenizer = CharTokenizer.train_from_text("to be or not to be\n")
    torch.manual_seed(3)
    model = GPT(ModelConfig(vocabulary_size=tokenizer.vocabulary_size, context_size=16, embedding_dim=16,
                            heads_num=2, layers_num=1)).eval()
    saved = save_checkpoint(model, tokenizer, "tiny", directory=folder, training={"steps_done": 7}, card="# tiny\n")
    return model, tokenizer, {p.name: p.read_bytes() for p in sorted(saved.iterdir())}


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory):
    return make_tiny_checkpoint(tmp_path_factory.mktemp("saved"))


OLD, NEW = "1" * 40, "2" * 40  # learner/evolving's two commits


@pytest.fixture(scope="module")
def evolving(tiny_checkpoint, tmp_path_factory):
    """learner/evolving's revisions in GPT-2's layout: OLD, the tiny run exported; NEW, main, the same config.json,
    tokenizer.json and card (the same blobs in a cache) beside weights that lack ln_f.bias, refused once loaded."""
    from safetensors.torch import load_file, save_file

    from playground.checkpoints import export
    from playground.checkpoints import store as checkpoints

    folder = tmp_path_factory.mktemp("evolving")
    (folder / "weights").mkdir()
    for name, data in tiny_checkpoint[2].items():
        (folder / "weights" / name).write_bytes(data)
    (folder / "old").mkdir()
    export.write_gpt2(checkpoints.load_checkpoint(folder / "weights"), folder / "old", card_target="learner/evolving")
    old = {p.name: p.read_bytes() for p in sorted((folder / "old").iterdir())}
    state = load_file(str(folder / "old" / "model.safetensors"))
    del state["transformer.ln_f.bias"]
    save_file(state, str(folder / "new.safetensors"), metadata={"format": "pt"})
    return {OLD: old, NEW: {**old, "model.safetensors": (folder / "new.safetensors").read_bytes()}}


@pytest.fixture
def stub_hub(tiny_checkpoint, evolving, tmp_path, monkeypatch):
    _, _, files = tiny_checkpoint
    no_weights = {k: v for k, v in files.items() if k != "model.safetensors"}
    stub = StubHub({
        "learner/tiny-char": files,
        "learner/with-pickle": {**files, "pytorch_model.bin": b"\x80\x04 a pickle", "extra.pt": b"\x80\x04"},
        "learner/no-weights": no_weights,
        "learner/pushed-run": {**files, "optimizer.safetensors": b"moments for resuming"},
        "learner/huge-weights": no_weights,  # a tiny config.json beside a 1.5 GB model.safetensors
        "learner/padded-weights": no_weights,  # weights 8 MiB: more than the tiny config implies
        "learner/huge-config": {k: v for k, v in no_weights.items() if k != "config.json"},
        "learner/broken-weights": {**files, "model.safetensors": b"not safetensors at all" * 10},
    }, claimed={
        "learner/huge-weights": {"model.safetensors": 1_500_000_000},
        "learner/padded-weights": {"model.safetensors": 8 * 2**20},
        "learner/huge-config": {"config.json": 200 * 2**20, "model.safetensors": len(files["model.safetensors"])},
    }, history={"learner/evolving": evolving})
    stub.thread.start()
    monkeypatch.setenv("HF_ENDPOINT", stub.url)
    monkeypatch.setenv("PLAYGROUND_CACHE_DIR", str(tmp_path / "playground-cache"))  # downloads go to its hub/
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "users-hf-cache"))  # the user's own: never touched
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("PLAYGROUND_HUB_ALLOW", raising=False)
    monkeypatch.delenv("PLAYGROUND_HUB_USE_TOKEN", raising=False)
    monkeypatch.delenv("PLAYGROUND_OFFLINE", raising=False)  # conftest sets it; these tests talk to the stub
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)
    yield stub
    stub.server.shutdown()
    stub.server.server_close()


def test_download_then_load_gives_identical_logits(stub_hub, tiny_checkpoint, tmp_path):
    model, tokenizer, _ = tiny_checkpoint
    checkpoint = load_from_hub("learner/tiny-char")
    assert checkpoint.name == "learner/tiny-char" and checkpoint.steps == 7
    assert checkpoint.path.is_relative_to(tmp_path / "playground-cache" / "hub")
    assert checkpoint.tokenizer == tokenizer and checkpoint.config == model.config
    idx = torch.randint(0, tokenizer.vocabulary_size, (2, 16))
    assert torch.equal(checkpoint.model(idx).logits, model(idx).logits)
    held = [f for f in hub.CHECKPOINT_FILES if f != "tokenizer.json"]  # a character checkpoint has no BPE file
    header_read = ["model.safetensors"] * 2  # get_safetensors_metadata: HEAD, then GET of its first bytes
    assert sorted(stub_hub.requested_files()) == sorted([f for f in held for _ in ("HEAD", "GET")] + header_read)


def test_second_call_offline_uses_the_cache_without_requests(stub_hub, monkeypatch):
    first = download_checkpoint("learner/tiny-char")
    seen = len(stub_hub.requests)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert download_checkpoint("learner/tiny-char") == first
    assert load_from_hub("learner/tiny-char").steps == 7
    assert len(stub_hub.requests) == seen


def test_explicit_cache_dir_and_revision(stub_hub, tmp_path):
    path = download_checkpoint("learner/tiny-char", revision=SHA, cache_dir=tmp_path / "mine")
    assert path.is_relative_to(tmp_path / "mine") and path.name == SHA


def test_unknown_repo(stub_hub):
    with pytest.raises(HubError, match="no Hub repo named learner/missing"):
        download_checkpoint("learner/missing")


def test_plain_404_is_an_unknown_repo_and_5xx_says_so(stub_hub):
    with pytest.raises(HubError, match="no Hub repo named gone/model"):
        download_checkpoint("gone/model")
    with pytest.raises(HubError, match="the Hub answered HTTP 503 and down/model is not in the local cache"):
        download_checkpoint("down/model")


def test_unknown_revision(stub_hub):
    with pytest.raises(HubError, match="has no revision 'v9'"):
        download_checkpoint("learner/tiny-char", revision="v9")


def test_repo_without_weights_is_not_a_checkpoint(stub_hub):
    with pytest.raises(HubError, match=r"learner/no-weights has no model.safetensors \(nor "
                                       r"model.safetensors.index.json with its shards\)"):
        load_from_hub("learner/no-weights")


def test_pickle_files_are_never_requested(stub_hub):
    path = download_checkpoint("learner/with-pickle")
    assert not (path / "pytorch_model.bin").exists() and not (path / "extra.pt").exists()
    assert "pytorch_model.bin" not in stub_hub.requested_files()
    assert "extra.pt" not in stub_hub.requested_files()
    assert load_from_hub("learner/with-pickle").steps == 7


def test_a_pushed_runs_optimizer_state_is_left_on_the_hub(stub_hub):
    """Only a resumed local run reads optimizer.safetensors; a Hub checkpoint is sampled, never resumed."""
    path = download_checkpoint("learner/pushed-run")
    assert not (path / "optimizer.safetensors").exists()
    assert "optimizer.safetensors" not in stub_hub.requested_files()


def test_a_model_above_the_cap_is_refused_before_its_weights_are_fetched(stub_hub):
    from playground.checkpoints.store import CheckpointError

    with pytest.raises(CheckpointError, match="this server's limit is 100"):
        load_from_hub("learner/tiny-char", max_parameters=100)
    assert "model.safetensors" not in stub_hub.requested_files()
    assert load_from_hub("learner/tiny-char", max_parameters=10**9).steps == 7


def test_offline_with_nothing_cached(stub_hub, monkeypatch):
    monkeypatch.setenv("PLAYGROUND_OFFLINE", "1")
    with pytest.raises(HubError, match="cannot reach the Hugging Face Hub \\(offline\\?\\) and learner/tiny-char "
                                       "is not in the local cache"):
        download_checkpoint("learner/tiny-char")
    assert stub_hub.requests == []


def test_connection_refused_with_nothing_cached(stub_hub, monkeypatch):
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    with pytest.raises(HubError, match="cannot reach the Hugging Face Hub .* is not in the local cache"):
        download_checkpoint("learner/tiny-char")


@pytest.mark.parametrize("bad", ["../x", "a/b/c", "", "  ", "owner/..", "owner/na..me", "/abs",
                                 "owner/name/", "o/" + "n" * 95, "owner/na me", "owner/-x", None])
def test_bad_ids_are_refused_before_any_request(stub_hub, bad):
    assert not is_hub_id(bad)
    with pytest.raises(HubError):
        download_checkpoint(bad)
    assert stub_hub.requests == []


def test_is_hub_id_accepts_owner_slash_name():
    assert is_hub_id("learner/tiny-char") and is_hub_id("Org_1/model.v2")
    assert not is_hub_id("shakespeare-char") and not is_hub_id(str(Path("/tmp/x")))


def test_canonical_ids_without_an_owner_are_hub_ids_but_read_as_local_names_first(monkeypatch):
    assert hub.validate_repo_id(" gpt2 ") == "gpt2" and hub.validate_repo_id("distilgpt2") == "distilgpt2"
    assert hub.is_canonical_id("gpt2-medium") and not is_hub_id("gpt2-medium")  # a local name is looked for first
    with pytest.raises(HubError, match="not a Hub repo id"):
        hub.validate_repo_id("gpt2-")  # the project's rules, then huggingface_hub's validate_repo_id
    monkeypatch.setenv("PLAYGROUND_HUB_ALLOW", "learner/*")
    assert not hub.is_canonical_id("gpt2")  # outside the allow-list it is only ever a local name



def test_hf_endpoint_is_read_when_called_not_at_import(stub_hub, monkeypatch):
    """huggingface_hub copies HF_ENDPOINT into constants at import; hub.py passes it explicitly instead."""
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setattr(huggingface_hub.constants, "HUGGINGFACE_CO_URL_TEMPLATE",
                        "http://127.0.0.1:9/{repo_id}/resolve/{revision}/{filename}")
    assert download_checkpoint("learner/tiny-char").name == SHA
    assert stub_hub.requests


def test_importing_hub_does_not_import_huggingface_hub():
    code = ("import sys, playground.checkpoints.hub\nassert 'huggingface_hub' not in sys.modules\n"
            "assert 'playground.text.data' not in sys.modules, 'hub.py reads its settings from settings.py'\n"
            "print('ok')\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


# ------------------------------------------------------------------------------ visitors' repo ids
def _cached_files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and not p.name.endswith(".lock"))


def test_no_request_carries_the_servers_token(stub_hub, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_the_owners_secret")
    assert load_from_hub("learner/tiny-char").steps == 7
    with pytest.raises(HubError):
        download_checkpoint("learner/missing")
    assert stub_hub.headers and not [h for h in stub_hub.headers if "authorization" in h]


def test_the_owner_may_opt_in_to_sending_the_token(stub_hub, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_the_owners_secret")
    monkeypatch.setenv("PLAYGROUND_HUB_USE_TOKEN", "1")
    download_checkpoint("learner/tiny-char")
    assert all(h.get("authorization") == "Bearer hf_the_owners_secret" for h in stub_hub.headers)


def test_the_allow_list_refuses_other_repos_before_any_request(stub_hub, monkeypatch):
    monkeypatch.setenv("PLAYGROUND_HUB_ALLOW", " learner/tiny-char , trusted/* ")
    with pytest.raises(HubError, match=r"learner/with-pickle is not one of the Hub repos this server loads "
                                       r"\(learner/tiny-char, trusted/\*\)"):
        load_from_hub("learner/with-pickle")
    assert stub_hub.requests == []
    assert load_from_hub("learner/tiny-char").steps == 7
    hub.check_allowed("Learner/Tiny-Char")  # the Hub ignores case in ids, and so does the list
    hub.check_allowed("trusted/anything")
    with pytest.raises(HubError):
        hub.check_allowed("trusted-not/x")


def test_huge_weights_beside_a_tiny_config_are_refused_before_a_byte_is_fetched(stub_hub, tmp_path):
    with pytest.raises(HubError, match=r"learner/huge-weights's model.safetensors is 1.4 GiB, more than 77.3 MiB, "
                                       r"the most a model of 20,000,000 parameters .* it is not downloaded"):
        load_from_hub("learner/huge-weights", max_parameters=20_000_000)
    assert stub_hub.requested_files() == [] and stub_hub.bytes_sent == 0
    assert _cached_files(tmp_path / "playground-cache" / "hub") == []


def test_weights_larger_than_the_config_implies_are_refused_and_nothing_stays_cached(stub_hub, tmp_path):
    with pytest.raises(HubError, match=r"model.safetensors is 8.0 MiB, but its config.json describes [\d,]+ "
                                       r"parameters, at most 1.0 MiB of fp32 weights"):
        load_from_hub("learner/padded-weights")  # no parameter cap: the config's own size is the bound
    assert "model.safetensors" not in stub_hub.requested_files()
    assert stub_hub.bytes_sent < 4096  # config.json alone
    assert _cached_files(tmp_path / "playground-cache" / "hub" / "models--learner--padded-weights" / "snapshots") == []


def test_a_huge_small_file_is_refused_from_the_listing(stub_hub):
    with pytest.raises(HubError, match="config.json is 200.0 MiB, more than 1.0 MiB"):
        download_checkpoint("learner/huge-config")
    assert stub_hub.requested_files() == []


def test_a_model_over_the_memory_budget_is_refused_before_its_weights(stub_hub):
    from playground.budget import MemoryBudget

    with pytest.raises(HubError, match=r"learner/tiny-char: this forward pass needs about .* over this server's "
                                       r"memory budget of 1.0 MiB .*pick a smaller checkpoint"):
        load_from_hub("learner/tiny-char", memory_budget=MemoryBudget(2**20, "test"))
    assert "model.safetensors" not in stub_hub.requested_files()


def test_a_download_that_does_not_load_is_removed_from_the_cache(stub_hub, tmp_path):
    with pytest.raises(HubError, match="learner/broken-weights's weights are not safetensors .* not downloaded"):
        load_from_hub("learner/broken-weights")  # their header, read on the Hub, is not safetensors
    repo = tmp_path / "playground-cache" / "hub" / "models--learner--broken-weights"
    assert not [f for f in _cached_files(repo) if f.startswith(("snapshots", "blobs"))]
    assert load_from_hub("learner/tiny-char").steps == 7  # other repos' files stay


def test_the_cache_serves_a_repo_when_the_hub_is_down(stub_hub, monkeypatch):
    first = download_checkpoint("learner/tiny-char")
    monkeypatch.setattr(hub, "_listing", lambda repo_id, revision: (None, 503))  # the Hub answers 503
    seen = len(stub_hub.requests)
    assert download_checkpoint("learner/tiny-char") == first
    assert len(stub_hub.requests) == seen


def test_a_refused_repo_never_touches_the_users_own_hugging_face_cache(stub_hub, tmp_path, monkeypatch):
    """The visitor's repo is refused after its config.json arrives; the files the machine's user already had in
    their shared Hugging Face cache (HF_HUB_CACHE), for that very repo and commit, stay where they were."""
    shared = tmp_path / "users-hf-cache"  # HF_HUB_CACHE, as the stub_hub fixture sets it
    repo = shared / "models--learner--padded-weights"
    (repo / "blobs").mkdir(parents=True)
    (repo / "snapshots" / SHA).mkdir(parents=True)
    (repo / "blobs" / "abc").write_text("my notes")
    (repo / "snapshots" / SHA / "notes.txt").symlink_to(repo / "blobs" / "abc")
    (shared / "models--someone--else" / "blobs").mkdir(parents=True)
    (shared / "models--someone--else" / "blobs" / "def").write_text("theirs")
    before = sorted(path.relative_to(shared) for path in shared.rglob("*"))
    with pytest.raises(HubError, match="padded-weights"):
        load_from_hub("learner/padded-weights")
    assert sorted(path.relative_to(shared) for path in shared.rglob("*")) == before
    assert (repo / "snapshots" / SHA / "notes.txt").read_text() == "my notes"


def test_the_playgrounds_hub_cache_is_pruned_by_size_the_least_used_first(stub_hub, tmp_path, monkeypatch):
    """The Hub download cache was never pruned: past PLAYGROUND_MAX_HUB_CACHE_BYTES the least recently used repos
    go, never the one just used, and nothing in the user's own Hugging Face cache."""
    own = tmp_path / "playground-cache" / "hub"
    shared = tmp_path / "users-hf-cache" / "models--someone--theirs"
    shared.mkdir(parents=True)
    (shared / "weights").write_bytes(b"w" * 50_000)
    stale = own / "models--learner--stale"
    stale.mkdir(parents=True)
    (stale / "blob").write_bytes(b"s" * 50_000)
    os.utime(stale, (1, 1))  # used long ago
    monkeypatch.setenv("PLAYGROUND_MAX_HUB_CACHE_BYTES", "20000")
    path = download_checkpoint("learner/tiny-char")
    assert not stale.exists() and path.is_dir()  # the stale repo went; the one just used stays, though over
    assert (shared / "weights").read_bytes() == b"w" * 50_000
    assert hub.prune_cache(own, 0, keep=path.parent.parent) == []  # the repo in use is never removed


def test_a_refused_new_revision_leaves_the_cached_older_one_whole(stub_hub, tiny_checkpoint, tmp_path, monkeypatch):
    """learner/evolving's new revision shares config.json and tokenizer.json (one blob each in the cache) with the
    older one cached before. Refusing it deleted every blob its snapshot linked to, which left the older
    revision's config.json and tokenizer.json dangling, and --revision <old> failed offline. It now goes through
    huggingface_hub's scan_cache_dir(...).delete_revisions(...), which frees only what no other revision uses."""
    model, _, _ = tiny_checkpoint
    assert load_from_hub("learner/evolving", revision=OLD).name == "learner/evolving"
    with pytest.raises(CheckpointError) as refused:
        load_from_hub("learner/evolving")  # main: NEW, whose weights lack ln_f.bias
    assert str(refused.value).startswith("learner/evolving") and NEW not in str(refused.value)  # the id, not a hash
    repo = tmp_path / "playground-cache" / "hub" / "models--learner--evolving"
    assert sorted(p.name for p in (repo / "snapshots").iterdir()) == [OLD]
    kept = list((repo / "snapshots" / OLD).iterdir())
    assert {p.name for p in kept} >= {"config.json", "tokenizer.json", "model.safetensors"}
    assert all(p.resolve().is_file() for p in kept)  # no link left dangling
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    seen = len(stub_hub.requests)
    again = load_from_hub("learner/evolving", revision=OLD)
    assert len(stub_hub.requests) == seen
    ids = torch.tensor([[1, 2, 3, 4]])
    with torch.no_grad():
        torch.testing.assert_close(again.model(ids).logits, model(ids).logits, atol=1e-5, rtol=0)


def test_pruning_goes_through_the_librarys_scan_and_names_repo_ids(stub_hub, tmp_path):
    own = tmp_path / "playground-cache" / "hub"
    download_checkpoint("learner/evolving", revision=OLD)
    kept = download_checkpoint("learner/tiny-char")
    os.utime(own / "models--learner--evolving", (1, 1))  # used long ago
    assert hub.prune_cache(own, 0, keep=kept.parent.parent) == ["learner/evolving"]
    assert not (own / "models--learner--evolving").exists() and kept.is_dir()


@pytest.mark.parametrize("vocab_size, refusal", [(791_900, "791,900 tokens, more than the 262,144"),
                                                 (50_257, "more than a vocabulary of 50,257 tokens needs")])
def test_a_tokenizer_too_large_to_build_is_refused_before_it_is_fetched(stub_hub, vocab_size, refusal):
    """Issue 54's tokenizer bomb: a GPT-2 layout repo with a 15 MB vocab.json (791,900 tokens, 12.7M parameters,
    under the cap) loaded, holding the GIL for 10 s at a time while its tokenizer was built, 57 s a load: every
    visitor's calls waited. Refused from its config and the listing's sizes, before a byte of it is fetched; and a
    config that claims GPT-2's vocabulary cannot bring the large vocab.json either."""
    config = {"model_type": "gpt2", "vocab_size": vocab_size, "n_positions": 64, "n_embd": 16, "n_layer": 1,
              "n_head": 2, "architectures": ["GPT2LMHeadModel"]}
    repo = f"stranger/vocab-bomb-{vocab_size}"
    stub_hub.repos[repo] = {"config.json": json.dumps(config).encode()}
    stub_hub.claimed[repo] = {"vocab.json": 14_824_034, "merges.txt": 14, "model.safetensors": 4 * 16 * vocab_size}
    with pytest.raises(HubError, match=refusal) as refused:
        load_from_hub(repo)
    assert "not downloaded" in str(refused.value)
    assert not {"vocab.json", "model.safetensors"} & set(stub_hub.requested_files())
