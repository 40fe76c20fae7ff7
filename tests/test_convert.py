"""nanoGPT checkpoints -> playground checkpoints (playground/convert.py, cli/convert.py).

The nanoGPT side is a minimal copy of nanoGPT's model.py forward (LayerNorm with optional bias, fused c_attn,
scaled_dot_product_attention, exact GELU, tied lm_head), saved with torch.save in train.py's dict layout.
"""

from __future__ import annotations

import io
import json
import pickle
import random
import re
import subprocess
import sys
import zipfile

import pytest
import torch
import torch.nn.functional as F
from conftest import REPO
from torch import nn

from playground.checkpoints import nanogpt as convert
from playground.checkpoints import store as checkpoints
from playground.checkpoints.nanogpt import ConversionError, convert_nanogpt, read_meta
from playground.checkpoints.store import load_checkpoint
from playground.cli.convert import main
from playground.model.sampling import generate

TEXT = "to be or not to be, that is the question\n"
CHARS = sorted(set(TEXT))


# ----------------------------------------------------------------------------- nanoGPT's model, in brief


class LayerNorm(nn.Module):
    def __init__(self, ndim, bias):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))
        self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

    def forward(self, x):
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, bias, block_size, mask_buffer):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd, bias=bias)
        self.c_proj = nn.Linear(n_embd, n_embd, bias=bias)
        self.n_head, self.n_embd = n_head, n_embd
        if mask_buffer:  # older nanoGPT (no flash attention) registered this and saved it in the state_dict
            self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size,
                                                                                             block_size))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class MLP(nn.Module):
    def __init__(self, n_embd, bias):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd, bias=bias)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * n_embd, n_embd, bias=bias)

    def forward(self, x):
        return self.c_proj(self.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, n_embd, n_head, bias, block_size, mask_buffer):
        super().__init__()
        self.ln_1 = LayerNorm(n_embd, bias)
        self.attn = CausalSelfAttention(n_embd, n_head, bias, block_size, mask_buffer)
        self.ln_2 = LayerNorm(n_embd, bias)
        self.mlp = MLP(n_embd, bias)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class NanoGPT(nn.Module):
    def __init__(self, n_layer, n_head, n_embd, block_size, bias, vocab_size, dropout=0.0, mask_buffer=False):
        super().__init__()
        self.block_size = block_size
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab_size, n_embd),
            wpe=nn.Embedding(block_size, n_embd),
            drop=nn.Dropout(dropout),
            h=nn.ModuleList([Block(n_embd, n_head, bias, block_size, mask_buffer) for _ in range(n_layer)]),
            ln_f=LayerNorm(n_embd, bias),
        ))
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # weight tying, as nanoGPT does

    def forward(self, idx):
        pos = torch.arange(idx.size(1))
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
        for block in self.transformer.h:
            x = block(x)
        return self.lm_head(self.transformer.ln_f(x))  # (B, T, V): every position, for the comparison


def model_args(bias: bool, vocab_size: int = len(CHARS)) -> dict:
    return dict(n_layer=2, n_head=2, n_embd=16, block_size=8, bias=bias, vocab_size=vocab_size, dropout=0.1)


def reference_model(bias: bool, mask_buffer: bool = False, seed: int = 0) -> NanoGPT:
    """Seeded, with every parameter (LayerNorm gains and biases too) random and large enough that greedy choices
    are never near ties."""
    torch.manual_seed(seed)
    model = NanoGPT(**model_args(bias), mask_buffer=mask_buffer).eval()
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            parameter.normal_(1.0 if name.endswith(("ln_1.weight", "ln_2.weight", "ln_f.weight")) else 0.0, 0.5)
    return model


def save_nanogpt(path, model: NanoGPT, bias: bool, *, compiled: bool = False, **extra) -> None:
    """torch.save in nanoGPT train.py's layout (model, optimizer, model_args, iter_num, best_val_loss, config)."""
    state = model.state_dict()
    if compiled:
        state = {f"_orig_mod.{key}": value for key, value in state.items()}
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    checkpoint = {
        "model": state,
        "optimizer": optimizer.state_dict(),
        "model_args": model_args(bias),
        "iter_num": 5000,
        "best_val_loss": torch.tensor(1.4697),
        "config": {"dataset": "shakespeare_char", "batch_size": 64, "learning_rate": 1e-3, "compile": compiled},
        **extra,
    }
    torch.save(checkpoint, path)


def write_meta(path, characters=CHARS) -> None:
    """data/<dataset>/meta.pkl as nanoGPT's prepare.py writes it."""
    itos = dict(enumerate(characters))
    with open(path, "wb") as f:
        pickle.dump({"vocab_size": len(characters), "itos": itos, "stoi": {c: i for i, c in itos.items()}}, f)


@pytest.fixture
def files(tmp_path):
    """A bias=True nanoGPT checkpoint and its meta.pkl, plus an empty weights folder."""
    model = reference_model(bias=True)
    save_nanogpt(tmp_path / "ckpt.pt", model, bias=True)
    write_meta(tmp_path / "meta.pkl")
    return tmp_path, model


def ids_of(text: str, characters=CHARS) -> torch.Tensor:
    return torch.tensor([[characters.index(c) for c in text]])


# ----------------------------------------------------------------------------- the same model after conversion


@pytest.mark.parametrize("bias, compiled, mask_buffer", [
    (True, False, False), (False, False, False), (True, True, False), (False, False, True), (True, True, True),
])
def test_converted_logits_match_nanogpt(tmp_path, bias, compiled, mask_buffer):
    reference = reference_model(bias, mask_buffer)
    save_nanogpt(tmp_path / "ckpt.pt", reference, bias, compiled=compiled)
    write_meta(tmp_path / "meta.pkl")
    target = convert_nanogpt(tmp_path / "ckpt.pt", "my-nanogpt", meta_path=tmp_path / "meta.pkl",
                             directory=tmp_path / "weights")
    loaded = load_checkpoint("my-nanogpt", directory=tmp_path / "weights")
    assert target == tmp_path / "weights" / "my-nanogpt" and loaded.config.use_bias is bias
    assert loaded.config.context_size == 8 and loaded.config.layers_num == 2 and loaded.config.dropout_rate == 0.1
    ids = loaded.tokenizer.encode("to be or").unsqueeze(0)
    with torch.no_grad():
        expected = reference(ids)
        torch.testing.assert_close(loaded.model(ids).logits, expected, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(loaded.model(ids[:, :3]).logits, expected[:, :3], atol=1e-5, rtol=1e-5)
    assert loaded.model.lm_head.bias is None  # nanoGPT's head has no bias, with bias=True too, and neither has this


def test_provenance_and_card(files):
    folder, _ = files
    convert_nanogpt(folder / "ckpt.pt", "my-nanogpt", meta_path=folder / "meta.pkl", directory=folder / "weights",
                    command="python -m playground.convert ckpt.pt --meta meta.pkl --name my-nanogpt")
    loaded = load_checkpoint("my-nanogpt", directory=folder / "weights")
    training = loaded.training
    assert training["source"] == "nanoGPT" and training["iter_num"] == 5000
    assert training["best_val_loss"] == pytest.approx(1.4697) and isinstance(training["best_val_loss"], float)
    assert training["model_args"] == model_args(True)
    assert training["nanogpt_config"]["dataset"] == "shakespeare_char"
    assert loaded.steps == 5000 and loaded.val_loss == pytest.approx(1.4697)
    card = (folder / "weights" / "my-nanogpt" / "README.md").read_text(encoding="utf-8")
    assert "converted" in card and "nanoGPT" in card
    assert "python -m playground.convert ckpt.pt --meta meta.pkl --name my-nanogpt" in card
    assert not (folder / "weights" / "my-nanogpt" / "optimizer.safetensors").exists()


def _reference_greedy(model: NanoGPT, ids: list[int], new_tokens: int) -> list[int]:
    """nanoGPT's generate with top-1: crop to block_size, take the last position's argmax."""
    ids = list(ids)
    with torch.no_grad():
        for _ in range(new_tokens):
            logits = model(torch.tensor([ids[-model.block_size:]]))[0, -1]
            ids.append(int(torch.argmax(logits)))
    return ids


@pytest.mark.parametrize("use_cache, new_tokens", [(False, 20), (True, 5)])
def test_greedy_generation_matches_nanogpt(files, use_cache, new_tokens):
    """Without the cache the window slides as nanoGPT's does (past the context of 8); with it, within the context."""
    folder, reference = files
    convert_nanogpt(folder / "ckpt.pt", "my-nanogpt", meta_path=folder / "meta.pkl", directory=folder / "weights")
    loaded = load_checkpoint("my-nanogpt", directory=folder / "weights")
    prompt = "to "
    text = generate(loaded.model, loaded.tokenizer, prompt, max_new_tokens=new_tokens, greedy=True,
                    use_cache=use_cache)
    expected = _reference_greedy(reference, ids_of(prompt)[0].tolist(), new_tokens)[len(prompt):]
    assert text == "".join(CHARS[i] for i in expected)


def test_the_vocabulary_keeps_nanogpts_id_order(tmp_path):
    """IDs are meta.pkl's, whatever their order: a shuffled itos still gives nanoGPT's IDs and logits."""
    shuffled = CHARS[:]
    random.Random(3).shuffle(shuffled)
    reference = reference_model(bias=False)
    save_nanogpt(tmp_path / "ckpt.pt", reference, bias=False)
    write_meta(tmp_path / "meta.pkl", shuffled)
    convert_nanogpt(tmp_path / "ckpt.pt", "shuffled", meta_path=tmp_path / "meta.pkl", directory=tmp_path / "w")
    loaded = load_checkpoint("shuffled", directory=tmp_path / "w")
    assert loaded.tokenizer.characters == tuple(shuffled)
    ids = loaded.tokenizer.encode(TEXT)
    assert ids.tolist() == [shuffled.index(c) for c in TEXT]
    assert loaded.tokenizer.decode(ids) == TEXT
    with torch.no_grad():
        torch.testing.assert_close(loaded.model(ids[None, :8]).logits, reference(ids[None, :8]), atol=1e-5, rtol=1e-5)


def test_a_characters_file_replaces_meta(files):
    folder, _ = files
    (folder / "chars.txt").write_bytes("".join(CHARS).encode("utf-8"))
    convert_nanogpt(folder / "ckpt.pt", "from-chars", characters_path=folder / "chars.txt", directory=folder / "w")
    convert_nanogpt(folder / "ckpt.pt", "from-meta", meta_path=folder / "meta.pkl", directory=folder / "w")
    assert (folder / "w" / "from-chars" / "vocabulary.json").read_text() == \
        (folder / "w" / "from-meta" / "vocabulary.json").read_text()
    assert load_checkpoint("from-chars", directory=folder / "w").tokenizer.decode(ids_of(TEXT)) == TEXT


# ----------------------------------------------------------------------------- refusals


class _Opens:
    """Unpickling this would call open(path, "w") and so create the file."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


class Thing:
    pass


@pytest.mark.parametrize("payload", ["reduce", "object", "nested"])
def test_a_hostile_meta_pkl_is_refused_and_nothing_runs(files, payload):
    folder, _ = files
    witness = folder / "pwned.txt"
    body = {"reduce": _Opens(witness), "object": Thing(),
            "nested": {"vocab_size": len(CHARS), "itos": dict(enumerate(CHARS)), "hook": _Opens(witness)}}[payload]
    (folder / "meta.pkl").write_bytes(pickle.dumps(body))
    with pytest.raises(ConversionError, match="meta.pkl was refused.*only plain data"):
        convert_nanogpt(folder / "ckpt.pt", "x", meta_path=folder / "meta.pkl", directory=folder / "w")
    assert not witness.exists()
    assert not (folder / "w" / "x").exists()


@pytest.mark.parametrize("meta, message", [
    ({"vocab_size": 3, "itos": {0: "a", 2: "b"}}, "IDs 0..1"),
    ({"itos": {0: "ab", 1: "c"}}, "not a single character"),
    ({"vocab_size": 5, "itos": {0: "a", 1: "b"}}, "vocab_size is 5"),
    ({"itos": {0: "a", 1: "b"}, "stoi": {"a": 1, "b": 0}}, "stoi is not the inverse"),
    (["a", "b"], "expected a dict with 'itos'"),
])
def test_a_malformed_meta_pkl_is_refused(tmp_path, meta, message):
    (tmp_path / "meta.pkl").write_bytes(pickle.dumps(meta))
    with pytest.raises(ConversionError, match=message):
        convert.read_meta(tmp_path / "meta.pkl")


def test_no_vocabulary_is_refused_with_what_to_pass(files):
    folder, _ = files
    with pytest.raises(ConversionError) as caught:
        convert_nanogpt(folder / "ckpt.pt", "x", directory=folder / "w")
    assert str(caught.value) == convert.NO_VOCABULARY
    assert "pass --meta or --characters-file" in str(caught.value) and "GPT-2 BPE" in str(caught.value)


def test_a_vocabulary_of_the_wrong_size_is_refused(files):
    folder, _ = files
    write_meta(folder / "meta.pkl", CHARS[:-1])
    with pytest.raises(ConversionError, match=f"{len(CHARS) - 1} characters but .* vocab_size {len(CHARS)}"):
        convert_nanogpt(folder / "ckpt.pt", "x", meta_path=folder / "meta.pkl", directory=folder / "w")
    assert not (folder / "w" / "x").exists()


def _edited(folder, model, edit) -> None:
    checkpoint = torch.load(folder / "ckpt.pt", weights_only=True)
    edit(checkpoint["model"])
    torch.save(checkpoint, folder / "ckpt.pt")


@pytest.mark.parametrize("edit, message", [
    (lambda state: state.pop("transformer.h.1.mlp.c_fc.bias"), "missing weights for blocks.1.mlp.fc.bias"),
    (lambda state: state.pop("lm_head.weight"), "missing weights for lm_head.weight"),
    (lambda state: state.__setitem__("transformer.h.0.attn.c_attn.lora", torch.zeros(2)),
     r"unexpected keys transformer\.h\.0\.attn\.c_attn\.lora"),
    (lambda state: state.__setitem__("transformer.h.2.ln_1.weight", torch.ones(16)),
     r"unexpected keys transformer\.h\.2\.ln_1\.weight"),
    (lambda state: state.__setitem__("transformer.wpe.weight", torch.zeros(9, 16)),
     r"transformer\.wpe\.weight has shape \(9, 16\); model_args need \(8, 16\)"),
])
def test_weights_that_do_not_match_model_args_are_refused(files, edit, message):
    folder, model = files
    _edited(folder, model, edit)
    with pytest.raises(ConversionError, match=message):
        convert_nanogpt(folder / "ckpt.pt", "x", meta_path=folder / "meta.pkl", directory=folder / "w")
    assert not (folder / "w" / "x").exists()


def test_bias_weights_in_a_bias_free_model_are_unexpected(tmp_path):
    """With bias=False, a c_attn.bias is a stray parameter, not old nanoGPT's mask buffer (attn.bias)."""
    model = reference_model(bias=False)
    save_nanogpt(tmp_path / "ckpt.pt", model, bias=False)
    write_meta(tmp_path / "meta.pkl")
    _edited(tmp_path, model, lambda state: state.__setitem__("transformer.h.0.attn.c_attn.bias", torch.zeros(48)))
    with pytest.raises(ConversionError, match=r"unexpected keys transformer\.h\.0\.attn\.c_attn\.bias"):
        convert_nanogpt(tmp_path / "ckpt.pt", "x", meta_path=tmp_path / "meta.pkl", directory=tmp_path / "w")


def test_a_checkpoint_that_needs_more_than_weights_only_is_refused(files):
    folder, model = files
    save_nanogpt(folder / "ckpt.pt", model, bias=True, extra_object=Thing())
    with pytest.raises(ConversionError, match=r"weights_only=True.*custom class"):
        convert_nanogpt(folder / "ckpt.pt", "x", meta_path=folder / "meta.pkl", directory=folder / "w")
    (folder / "junk.pt").write_bytes(b"not a checkpoint at all")
    with pytest.raises(ConversionError, match="not a torch checkpoint in torch's zip format"):
        convert_nanogpt(folder / "junk.pt", "x", meta_path=folder / "meta.pkl", directory=folder / "w")
    buffer = io.BytesIO()
    torch.save({"weights": torch.zeros(2)}, buffer)
    (folder / "other.pt").write_bytes(buffer.getvalue())
    with pytest.raises(ConversionError, match="not a nanoGPT checkpoint"):
        convert_nanogpt(folder / "other.pt", "x", meta_path=folder / "meta.pkl", directory=folder / "w")


def test_a_compressed_archive_is_refused_before_torch_reads_it(files):
    """torch.save stores its records uncompressed; a deflated one could expand a small upload into gigabytes."""
    folder, _ = files
    with zipfile.ZipFile(folder / "ckpt.pt") as source, \
            zipfile.ZipFile(folder / "bomb.pt", "w", compression=zipfile.ZIP_DEFLATED) as packed:
        for record in source.infolist():
            packed.writestr(record.filename, source.read(record.filename))
    with pytest.raises(ConversionError, match="compressed records"):
        convert_nanogpt(folder / "bomb.pt", "x", meta_path=folder / "meta.pkl", directory=folder / "w")
    assert not (folder / "w").exists()


def test_pasted_characters_and_extra_record_fields_are_recorded(files):
    folder, model = files
    characters = "".join(read_meta(folder / "meta.pkl"))
    target = convert_nanogpt(folder / "ckpt.pt", "pasted", characters=characters, directory=folder / "w",
                             record={"owner": "f" * 64})
    record = json.loads((target / "training.json").read_text())
    assert record["owner"] == "f" * 64 and record["vocabulary_file"] == "pasted characters"
    assert checkpoints.load_checkpoint(target).tokenizer.vocabulary_size == len(characters)
    with pytest.raises(ConversionError, match="pass one vocabulary"):
        convert_nanogpt(folder / "ckpt.pt", "y", meta_path=folder / "meta.pkl", characters=characters,
                        directory=folder / "w")


def test_a_model_over_max_parameters_is_refused(files):
    folder, _ = files
    with pytest.raises(ConversionError, match="parameters; the limit is 1,000"):
        convert_nanogpt(folder / "ckpt.pt", "x", meta_path=folder / "meta.pkl", directory=folder / "w",
                        max_parameters=1000)


# ----------------------------------------------------------------------------- the command line


def test_cli_converts_and_prints_where(files, capsys):
    folder, reference = files
    code = main([str(folder / "ckpt.pt"), "--meta", str(folder / "meta.pkl"), "--name", "my-nanogpt",
                 "--weights-dir", str(folder / "weights")])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert captured.out.strip() == str(folder / "weights" / "my-nanogpt")
    assert "saved" in captured.err and f"vocabulary {len(CHARS)}" in captured.err
    training = json.loads((folder / "weights" / "my-nanogpt" / "training.json").read_text(encoding="utf-8"))
    assert training["converted_with"].startswith("python -m playground.convert ")
    assert "--name my-nanogpt" in training["converted_with"]
    # the same name again is refused, nothing written over, until --replace says so
    (folder / "weights" / "my-nanogpt" / "mine.txt").write_text("kept")
    again = [str(folder / "ckpt.pt"), "--meta", str(folder / "meta.pkl"), "--name", "my-nanogpt",
             "--weights-dir", str(folder / "weights")]
    assert main(again) == 2
    assert capsys.readouterr().err.strip() == (
        f"error: {folder / 'weights' / 'my-nanogpt'} already exists: pass --replace to start it over (what it holds "
        "is lost), or another --name such as my-nanogpt-1")
    assert (folder / "weights" / "my-nanogpt" / "mine.txt").read_text() == "kept"
    assert main([*again, "--replace"]) == 0


def test_cli_refuses_in_one_line(files, capsys):
    folder, _ = files
    code = main([str(folder / "ckpt.pt"), "--name", "x", "--weights-dir", str(folder / "w")])
    captured = capsys.readouterr()
    assert code == 2 and captured.err.strip() == f"error: {convert.NO_VOCABULARY}"
    code = main([str(folder / "ckpt.pt"), "--meta", "m", "--characters-file", "c", "--name", "x"])
    assert code == 2 and "not allowed with argument" in capsys.readouterr().err
    code = main([str(folder / "ckpt.pt"), "--meta", str(folder / "meta.pkl"), "--name", "../x"])
    assert code == 2 and "not allowed" in capsys.readouterr().err


def test_python_m_playground_convert_runs_end_to_end(files):
    folder, _ = files
    (folder / "chars.txt").write_bytes("".join(CHARS).encode("utf-8"))
    result = subprocess.run(
        [sys.executable, "-m", "playground.convert", str(folder / "ckpt.pt"), "--characters-file",
         str(folder / "chars.txt"), "--name", "cli-run", "--weights-dir", str(folder / "weights")],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(folder / "weights" / "cli-run")
    assert load_checkpoint("cli-run", directory=folder / "weights").tokenizer.characters == tuple(CHARS)


# ----------------------------------------------------------------------------- shared structures in a small upload
PLACEHOLDER = "NESTED-PAYLOAD"


def _nested_ops(depth: int, container: str, slot: int) -> bytes:
    """Pickle opcodes that push a ``depth``-deep structure whose every level holds the one below twice: for tuples
    ``(a, a)`` itself (5 bytes a level), for lists a tuple of all the levels ``([], [[], []], ...)`` (9 bytes a level;
    torch's unpickler has no POP to drop them). 2**depth leaves when written out; one memo slot, ``slot``."""
    put, get = (b"q" + bytes([slot]), b"h" + bytes([slot])) if slot < 256 else \
        (b"r" + slot.to_bytes(4, "little"), b"j" + slot.to_bytes(4, "little"))
    if container == "tuple":
        return b")" + (put + get + b"\x86") * depth
    return b"(]" + put + (b"](" + get + get + b"e" + put) * depth + b"t"


def _with_payload(pickled: bytes, depth: int, container: str, slot: int = 255) -> bytes:
    """``pickled`` with the text PLACEHOLDER replaced by the nested structure (where the text sat: a value or a
    key)."""
    text = PLACEHOLDER.encode()
    for opcode in (b"\x8c" + bytes([len(text)]) + text, b"X" + len(text).to_bytes(4, "little") + text):
        if opcode in pickled:
            return pickled.replace(opcode, _nested_ops(depth, container, slot), 1)
    raise AssertionError("the placeholder is not in the pickle")


def _hostile_ckpt(source, target, depth: int, container: str, edit) -> None:
    """A real nanoGPT ckpt.pt whose data.pkl carries the nested structure where ``edit`` put PLACEHOLDER."""
    checkpoint = torch.load(source, weights_only=True)
    edit(checkpoint)
    buffer = io.BytesIO()
    torch.save(checkpoint, buffer)
    with zipfile.ZipFile(buffer) as packed, zipfile.ZipFile(target, "w", zipfile.ZIP_STORED) as out:
        for record in packed.infolist():
            data = packed.read(record)
            out.writestr(record, _with_payload(data, depth, container, 10**6) if record.filename.endswith("data.pkl")
                         else data)


_CONVERT_IN_A_CHILD = """
import resource, sys
from playground.checkpoints.nanogpt import ConversionError, convert_nanogpt
with open("/proc/self/statm") as f:
    size = int(f.read().split()[0]) * resource.getpagesize()
resource.setrlimit(resource.RLIMIT_AS, (size + 2**30, size + 2**30))  # a runaway repr fails here, not the machine
try:
    convert_nanogpt(sys.argv[1], "x", meta_path=sys.argv[2], directory=sys.argv[3])
except ConversionError as exc:
    print("REFUSED", exc)
"""


def _edit_model_args(field):
    return lambda checkpoint: checkpoint["model_args"].__setitem__(field, PLACEHOLDER)


def _edit_weight_name(checkpoint):
    checkpoint["model"][PLACEHOLDER] = checkpoint["model"].pop("transformer.wte.weight")


@pytest.mark.parametrize("where, container, message", [
    ("meta itos", "list", "itos\\[0\\] is \\(\\[\\].*not a single character"),
    ("meta vocab_size", "list", "vocab_size is \\(\\[\\].* but itos has"),
    ("meta itos key", "tuple", "meta.pkl was refused: .*shares"),
    ("model_args bias", "list", "bias must be true or false, got \\(\\[\\]"),
    ("model_args vocab_size", "list", "vocabulary_size must be a whole number, got \\(\\[\\]"),
    ("weight name", "tuple", "hostile.pt was refused: .*shares"),
])
def test_a_small_upload_sharing_a_nested_structure_is_refused_at_once(files, where, container, message):
    """A few hundred bytes can hold a structure with 2**60 leaves (each level is [a, a]): a message that writes it
    out (repr) or a dict that hashes it (a tuple key) would run until memory or patience ran out. The refusal
    quotes a bounded prefix, or names the sharing, in a child with 1 GiB of address space to spare."""
    folder, _ = files
    ckpt, meta = folder / "ckpt.pt", folder / "meta.pkl"
    if where.startswith("meta"):
        body = {"itos": {0: PLACEHOLDER}} if where == "meta itos" else \
            {"vocab_size": PLACEHOLDER, "itos": {0: "a"}} if where == "meta vocab_size" else \
            {"itos": {PLACEHOLDER: "a"}}
        meta.write_bytes(_with_payload(pickle.dumps(body), 60, container))
        assert meta.stat().st_size < 1000
    else:
        edit = _edit_model_args(where.split()[-1]) if where.startswith("model_args") else _edit_weight_name
        _hostile_ckpt(folder / "ckpt.pt", folder / "hostile.pt", 60, container, edit)
        ckpt = folder / "hostile.pt"
    result = subprocess.run([sys.executable, "-c", _CONVERT_IN_A_CHILD, str(ckpt), str(meta), str(folder / "w")],
                            cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith("REFUSED "), result.stdout
    assert re.search(message, result.stdout), result.stdout
    assert len(result.stdout) < 1000
    assert not (folder / "w" / "x").exists()


def test_a_characters_file_with_an_editors_trailing_newline_names_it_and_says_what_to_do(files):
    folder, _ = files
    assert CHARS[0] == "\n"  # the vocabulary has a newline already, as nanoGPT's shakespeare_char does
    (folder / "chars.txt").write_bytes(("".join(CHARS) + "\n").encode("utf-8"))
    with pytest.raises(ConversionError, match=rf"the vocabulary repeats '\\n' \(IDs 0, {len(CHARS)}\): each "
                                              r"character must have one ID\. chars\.txt ends with a newline that is "
                                              r"also character 0: an editor adds one on save\. Remove the last one "
                                              r"\(truncate -s -1 chars\.txt\)"):
        convert_nanogpt(folder / "ckpt.pt", "x", characters_path=folder / "chars.txt", directory=folder / "w")


def test_a_final_newline_the_model_lacks_is_named_in_the_size_refusal(files):
    folder, _ = files
    (folder / "chars.txt").write_bytes(("".join(CHARS[1:]) + "Z\n").encode("utf-8"))  # "Z" stands for the "\n"
    size = len(CHARS)
    with pytest.raises(ConversionError, match=rf"the vocabulary has {size + 1} characters but the model was trained "
                                              rf"with vocab_size {size}.*; chars\.txt ends with a newline \('\\n', "
                                              rf"ID {size}\), one more than the model's {size}: an editor adds one on "
                                              r"save\. Remove it \(truncate -s -1 chars\.txt\)"):
        convert_nanogpt(folder / "ckpt.pt", "x", characters_path=folder / "chars.txt", directory=folder / "w")
