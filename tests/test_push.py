"""Publishing a run to the Hub: ``python -m playground.push`` against the stub Hub on 127.0.0.1, which accepts
huggingface_hub's upload protocol (create repo, preupload, commit) and then serves what it received, so the pushed
repo is loaded back by its id through the same path every tab uses."""

from __future__ import annotations

import base64
import functools
import io
import json
import threading
from urllib.parse import unquote, urlsplit

import pytest
import torch
from test_hub import StubHub, make_tiny_checkpoint

from playground.checkpoints import hub
from playground.checkpoints import store as checkpoints
from playground.checkpoints.store import load_checkpoint, save_checkpoint
from playground.cli import push
from playground.config import ModelConfig
from playground.model.gpt import GPT

REPO_ID = "learner/pushed"


class UploadingStub(StubHub):
    """StubHub plus the three POSTs an upload makes; a commit's files become the repo's files."""

    def __init__(self, repos, *, refuse_with: int | None = None):
        super().__init__(repos)
        self.refuse_with = refuse_with
        self.commits: list[dict] = []
        self.lock = threading.Lock()
        stub = self
        self.server.RequestHandlerClass.do_POST = lambda handler: stub.handle_post(handler)

    def handle_post(self, handler) -> None:
        path = unquote(urlsplit(handler.path).path)
        self.requests.append(("POST", path))
        self.headers.append({key.lower(): value for key, value in handler.headers.items()})
        body = handler.rfile.read(int(handler.headers.get("Content-Length") or 0))
        json_reply = {"Content-Type": "application/json"}
        if self.refuse_with is not None:
            return self.reply(handler, self.refuse_with, b'{"error": "refused"}', json_reply)
        if path == "/api/repos/create":
            request = json.loads(body)
            repo = f"{request.get('organization') or 'learner'}/{request['name']}"
            with self.lock:
                self.repos.setdefault(repo, {})
            return self.reply(handler, 200, json.dumps({"url": f"{self.url}/{repo}"}).encode(), json_reply)
        if path == "/api/validate-yaml":
            return self.reply(handler, 200, b"{}", json_reply)
        parts = path.strip("/").split("/")
        if parts[:2] == ["api", "models"] and len(parts) >= 6 and parts[4] == "preupload":
            files = [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False}
                     for f in json.loads(body)["files"]]
            return self.reply(handler, 200, json.dumps({"files": files}).encode(), json_reply)
        if parts[:2] == ["api", "models"] and len(parts) >= 6 and parts[4] == "commit":
            repo = "/".join(parts[2:4])
            received, header = {}, None
            for line in io.BytesIO(body).read().decode().splitlines():
                item = json.loads(line)
                if item["key"] == "header":
                    header = item["value"]
                elif item["key"] == "file":
                    received[item["value"]["path"]] = base64.b64decode(item["value"]["content"])
            with self.lock:
                self.repos[repo] = {**self.repos.get(repo, {}), **received}
                self.commits.append({"repo": repo, "header": header, "files": sorted(received)})
            reply = {"commitUrl": f"{self.url}/{repo}/commit/{'1' * 40}", "commitOid": "1" * 40}
            return self.reply(handler, 200, json.dumps(reply).encode(), json_reply)
        return self.reply(handler, 404, b"not found")


@pytest.fixture
def uploading_hub(tmp_path, monkeypatch):
    stub = UploadingStub({})
    stub.thread.start()
    monkeypatch.setenv("HF_ENDPOINT", stub.url)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.setenv("HF_TOKEN", "hf_test_write_token")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("PLAYGROUND_OFFLINE", raising=False)
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)
    yield stub
    stub.server.shutdown()
    stub.server.server_close()


@pytest.fixture
def saved_run(tmp_path):
    model, _, _ = make_tiny_checkpoint(tmp_path / "weights")
    folder = tmp_path / "weights" / "tiny"
    (folder / checkpoints.OPTIMIZER_FILE).write_bytes(b"moments that stay local")
    (folder / "notes.txt").write_text("not a checkpoint file")
    return model, folder


def test_a_pushed_run_opens_by_repo_id_with_the_same_logits(uploading_hub, saved_run, tmp_path, capsys):
    model, folder = saved_run
    code = push.main(["tiny", REPO_ID, "--weights-dir", str(folder.parent)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert captured.out.strip().endswith(REPO_ID)
    assert "published" in captured.err and REPO_ID in captured.err
    [commit] = uploading_hub.commits
    assert commit["repo"] == REPO_ID
    assert commit["files"] == sorted(["config.json", "model.safetensors", "generation_config.json", "tokenizer.json",
                                      "tokenizer_config.json", "README.md", "training.json"])  # GPT-2's layout
    card = uploading_hub.repos[REPO_ID]["README.md"].decode()
    assert f'from_pretrained("{REPO_ID}")' in card and "playground-publish-" not in card  # not the temporary folder
    assert "| trained | 7 steps |" in card  # the run's own numbers
    assert checkpoints.OPTIMIZER_FILE not in commit["files"] and "notes.txt" not in commit["files"]
    assert "in GPT-2's layout" in captured.err and "AutoModelForCausalLM.from_pretrained" in captured.err
    assert "playground.push" in commit["header"]["summary"]
    assert any(h.get("authorization") == "Bearer hf_test_write_token" for h in uploading_hub.headers)

    loaded = hub.load_from_hub(REPO_ID, cache_dir=tmp_path / "fresh-cache")
    ids = torch.tensor([[1, 2, 3, 4]])
    torch.testing.assert_close(loaded.model(ids).logits, model(ids).logits, rtol=0, atol=0)
    assert loaded.name == REPO_ID


def test_a_pushed_run_opens_in_transformers(uploading_hub, saved_run, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model, folder = saved_run
    assert push.main(["tiny", REPO_ID, "--weights-dir", str(folder.parent)]) == 0
    received = tmp_path / "received"
    received.mkdir()
    for name, data in uploading_hub.repos[REPO_ID].items():
        (received / name).write_bytes(data)
    loaded = load_checkpoint(folder)
    hf_tokenizer = AutoTokenizer.from_pretrained(received)
    ids = hf_tokenizer("to be or not")["input_ids"]
    assert ids == loaded.tokenizer.encode("to be or not").tolist()
    with torch.no_grad():
        torch.testing.assert_close(AutoModelForCausalLM.from_pretrained(received).eval()(torch.tensor([ids])).logits,
                                   model(torch.tensor([ids])).logits, atol=1e-4, rtol=0)


def test_a_run_gpt2_cannot_hold_goes_in_the_playgrounds_layout_and_says_why(uploading_hub, saved_run, capsys):
    model, folder = saved_run
    config = ModelConfig(**{**model.config.to_dict(), "use_bias": True, "head_bias": True})  # an older --use-bias run
    biased = GPT(config)
    with torch.no_grad():
        biased.lm_head.bias.fill_(0.25)
    save_checkpoint(biased, load_checkpoint(folder).tokenizer, "biased", directory=folder.parent)
    assert push.main(["biased", REPO_ID, "--weights-dir", str(folder.parent)]) == 0
    err = capsys.readouterr().err
    assert "in the playground's own layout" in err
    assert "note: biased cannot be written in GPT-2's layout: the LM head has a bias (largest 0.25), and GPT-2's " \
           "head has none" in err and "not in transformers" in err
    assert "vocabulary.json" in uploading_hub.commits[0]["files"]


def test_a_folder_path_can_be_pushed_private(uploading_hub, saved_run, capsys):
    _, folder = saved_run
    assert push.main([str(folder), REPO_ID, "--private", "--message", "first upload"]) == 0
    create = [h for (method, path), h in zip(uploading_hub.requests, uploading_hub.headers, strict=True)
              if path == "/api/repos/create"]
    assert create, uploading_hub.requests
    assert uploading_hub.commits[0]["header"]["summary"] == "first upload"


@pytest.mark.parametrize("status, words", [(401, "hf auth login"), (403, "write token")])
def test_a_refused_upload_says_what_to_do(tmp_path, saved_run, monkeypatch, capsys, status, words):
    stub = UploadingStub({}, refuse_with=status)
    stub.thread.start()
    try:
        monkeypatch.setenv("HF_ENDPOINT", stub.url)
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        monkeypatch.delenv("PLAYGROUND_OFFLINE", raising=False)
        monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)
        _, folder = saved_run
        assert push.main([str(folder), REPO_ID]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and words in err and "Traceback" not in err, err
    finally:
        stub.server.shutdown()
        stub.server.server_close()


@pytest.mark.parametrize("argv, words", [
    (["no-such-run", REPO_ID], "no checkpoint named"),
    (["tiny", "not a repo id"], "not a Hub repo id"),
    (["tiny"], "required"),
])
def test_bad_input_is_one_error_line_before_any_request(uploading_hub, saved_run, capsys, argv, words):
    _, folder = saved_run
    assert push.main([*argv, "--weights-dir", str(folder.parent)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and words in err and err.count("\n") == 1, err
    assert not uploading_hub.requests


def test_a_folder_that_does_not_load_is_not_published(uploading_hub, saved_run, capsys):
    _, folder = saved_run
    (folder / checkpoints.WEIGHTS_FILE).write_bytes(b"not safetensors")
    assert push.main([str(folder), REPO_ID]) == 2
    assert "error: " in capsys.readouterr().err
    assert not uploading_hub.requests


def test_offline_refuses_to_publish(saved_run, monkeypatch, capsys):
    monkeypatch.setenv("PLAYGROUND_OFFLINE", "1")
    _, folder = saved_run
    assert push.main([str(folder), REPO_ID]) == 2
    assert "offline" in capsys.readouterr().err


def test_the_space_owner_publishes_from_the_app_and_nobody_else_can(uploading_hub, saved_run):
    from types import SimpleNamespace

    import gradio as gr

    from playground.config import Limits
    from playground.ui import publish
    from playground.ui.common import AppContext, friendly

    _, folder = saved_run
    ctx = AppContext(limits=Limits(), weights=folder.parent, admin_token="the-owner")
    request = SimpleNamespace(session_hash="a-visitor")
    handler = functools.partial(friendly(publish.publish), ctx)
    with pytest.raises(gr.Error, match="(?i)only the Space owner may publish"):
        handler("tiny", REPO_ID, False, "a guess", request=request)
    with pytest.raises(gr.Error, match="(?i)only the Space owner may publish"):
        handler("tiny", REPO_ID, False, "", request=request)
    assert not uploading_hub.requests
    note = handler("tiny", REPO_ID, True, "the-owner", request=request)
    assert REPO_ID in note and "Published **tiny**" in note
    assert uploading_hub.commits[0]["repo"] == REPO_ID
    nobody = AppContext(limits=Limits(), weights=folder.parent, admin_token="")
    with pytest.raises(gr.Error, match="(?i)only the Space owner may publish"):
        functools.partial(friendly(publish.publish), nobody)("tiny", REPO_ID, False, "", request=request)
