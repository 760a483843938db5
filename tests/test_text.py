"""The text task: R's data files read without R, the corpus checked by hash, the tokenizer,
the windows, the trainer's schedule and determinism, and the text runs in the cache."""
from __future__ import annotations

import gzip
import hashlib
import math
import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
import torch
from debian import build_deb, machine

from llamanat_core import TinyLlama
from llamanat_core.data import corpus, rdata, text
from llamanat_core.model.config import variant_config
from llamanat_core.paths import ROOT
from llamanat_core.study import Run, check_entry
from llamanat_core.study.text_plan import TEXT_THETAS, text_arms, text_plan
from llamanat_core.train.text import TEXT_ENDPOINTS, TextBudget, fit_text, held_out_loss, text_budget_dict

ENSURE_CORPUS = ROOT / "tools" / "ensure_corpus.sh"


# ------------------------------------------------------------------ R's serialization, by hand

def _i(n: int) -> bytes:
    return struct.pack(">i", n)


def _chars(s: str) -> bytes:
    return _i(9 | (1 << 15)) + _i(len(s.encode())) + s.encode()  # CHARSXP, UTF-8 flag


def _strings(items, names=None) -> bytes:
    return _vector(16, [_chars(s) for s in items], names)


def _vector(kind: int, items: list[bytes], names=None) -> bytes:
    """An R vector of `kind` (items already serialized), with a names attribute if given."""
    head = _i(kind | ((1 << 9) if names else 0)) + _i(len(items)) + b"".join(items)
    if not names:
        return head
    # the attribute pairlist: one tagged cell, tag the symbol `names`, then R's NULL
    return head + _i(2 | (1 << 10)) + _i(1) + _chars("names") + _strings(names) + _i(254)


def _ints(values) -> bytes:
    return _i(13) + _i(len(values)) + b"".join(_i(v) for v in values)


def _serialize(body: bytes) -> bytes:
    return b"X\n" + _i(3) + _i(0x040201) + _i(0x030500) + _i(5) + b"UTF-8" + body


def _lazyload(tmp_path: Path, objects: dict[str, bytes]) -> Path:
    """A .rdx/.rdb pair holding `objects` (name -> serialized body), as R writes them."""
    blob, where = b"", {}
    for name, body in objects.items():
        data = _serialize(body)
        entry = struct.pack(">I", len(data)) + zlib.compress(data)
        where[name] = (len(blob), len(entry))
        blob += entry
    index = _vector(19, [_vector(19, [_ints(list(v)) for v in where.values()], list(where)),
                         _vector(19, []), _ints([1])], ["variables", "references", "compressed"])
    stem = tmp_path / "Rdata"
    stem.with_suffix(".rdb").write_bytes(blob)
    stem.with_suffix(".rdx").write_bytes(gzip.compress(_serialize(index)))
    return stem


def test_a_named_character_vector_comes_back_as_a_dict():
    got = rdata.unserialize(_serialize(_strings(["x", "£y"], names=["a", "b"])))
    assert got == {"a": "x", "b": "£y"}


def test_the_lazyload_database_gives_every_variable(tmp_path):
    stem = _lazyload(tmp_path, {"one": _strings(["First line", "", "third"]), "two": _strings(["z"])})
    assert rdata.read_lazyload(stem) == {"one": ["First line", "", "third"], "two": ["z"]}


def test_an_unknown_r_type_is_named_not_guessed():
    with pytest.raises(rdata.RDataError, match="R type 3 "):
        rdata.unserialize(_serialize(_i(3)))  # a closure


def test_a_truncated_database_is_refused_by_name(tmp_path):
    stem = _lazyload(tmp_path, {"one": _strings(["a" * 50])})
    rdb = stem.with_suffix(".rdb")
    rdb.write_bytes(rdb.read_bytes()[:-5])
    with pytest.raises(rdata.RDataError, match="Rdata.rdb is truncated: 'one'"):
        rdata.read_lazyload(stem)


@pytest.mark.pool  # starts a Python (or dpkg) subprocess: not the inner loop
def test_the_real_packages_database_reads_as_the_recorded_novels(tmp_path):
    """Debian's own r-cran-janeaustenr, as `make corpus` keeps it beside the novels (not
    this file's serializer): its database holds the six novels, each the recorded text;
    the same bytes with one novel's entry pointed at another's are caught by the hash."""
    deb = corpus.package_deb()
    if deb is None or shutil.which("dpkg-deb") is None:
        pytest.skip("needs Debian's package in the corpus folder (make corpus keeps it) and dpkg-deb")
    subprocess.run(["dpkg-deb", "-x", str(deb), str(tmp_path / "deb")], check=True)
    stem = tmp_path / "deb" / corpus.RDATA
    novels = rdata.read_lazyload(stem)
    assert set(corpus.NOVELS) <= set(novels)
    written = corpus.write_corpus(stem, tmp_path / "novels")  # refuses a novel not as recorded
    assert [p.read_bytes() for p in written] == [corpus.novel_path(n).read_bytes() for n in corpus.NOVELS]
    index = rdata.unserialize(gzip.decompress(stem.with_suffix(".rdx").read_bytes()))
    assert index["variables"]["emma"] != index["variables"]["persuasion"]
    swapped = tmp_path / "swapped"
    swapped.mkdir()
    shutil.copy(stem.with_suffix(".rdb"), swapped / "Rdata.rdb")
    rdx = stem.with_suffix(".rdx").read_bytes()
    (swapped / "Rdata.rdx").write_bytes(_swap_entries(rdx, index, "emma", "persuasion"))
    with pytest.raises(corpus.CorpusError, match="'emma' is not the recorded text"):
        corpus.write_corpus(swapped / "Rdata", tmp_path / "wrong")


def _swap_entries(rdx: bytes, index: dict, a: str, b: str) -> bytes:
    """The index with the (offset, length) of variables `a` and `b` exchanged, found as
    the two integers they are in the serialized bytes."""
    raw = gzip.decompress(rdx)
    pa, pb = (struct.pack(">2i", *index["variables"][n]) for n in (a, b))
    assert raw.count(pa) == 1 and raw.count(pb) == 1
    return gzip.compress(raw.replace(pa, b"\0" * 8).replace(pb, pa).replace(b"\0" * 8, pb))


# ------------------------------------------------------------------ the corpus, checked

def _fake_corpus(tmp_path: Path, monkeypatch, texts: dict[str, str]) -> Path:
    """Novels written to a folder, with their hashes recorded as if they were the corpus."""
    folder = tmp_path / "corpus"
    folder.mkdir()
    for name, body in texts.items():
        (folder / f"{name}.txt").write_text(body)
    hashes = {n: hashlib.sha256(b.encode()).hexdigest() for n, b in texts.items()}
    monkeypatch.setattr(corpus, "SHA256", hashes)
    text.load_corpus.cache_clear()
    return folder


SMALL = {n: (f"{corpus.TITLES[n]}\n\nIt is a truth universally acknowledged, said {i}.\n" * 40)
         for i, n in enumerate(corpus.NOVELS)}


def test_a_corrupted_novel_is_refused_naming_its_file(tmp_path, monkeypatch):
    folder = _fake_corpus(tmp_path, monkeypatch, SMALL)
    (folder / "emma.txt").write_text(SMALL["emma"].replace("truth", "lie"))
    with pytest.raises(corpus.CorpusError, match=r"emma\.txt is not the recorded text.*make corpus"):
        text.load_corpus(folder)
    assert "emma.txt" in corpus.check_corpus(folder)


def test_a_missing_novel_names_the_command_that_fetches_it(tmp_path, monkeypatch):
    folder = _fake_corpus(tmp_path, monkeypatch, SMALL)
    (folder / "persuasion.txt").unlink()
    with pytest.raises(corpus.CorpusError, match=r"persuasion\.txt is missing: run `make corpus`"):
        corpus.read_novel("persuasion", folder)


def test_the_split_is_by_document(tmp_path, monkeypatch):
    folder = _fake_corpus(tmp_path, monkeypatch, SMALL)
    c = text.load_corpus(folder)
    held = SMALL["persuasion"]
    assert text.decode(c.val) + text.decode(c.test) == held
    assert text.decode(c.val).endswith("\n") and abs(len(c.val) - len(c.test)) < 60
    train = text.decode(c.train)
    assert all(SMALL[n] in train for n in text.TRAIN_NOVELS) and "Persuasion" not in train


def test_write_corpus_refuses_another_text(tmp_path, monkeypatch):
    _fake_corpus(tmp_path, monkeypatch, SMALL)
    other = {n: _strings(body.split("\n")) for n, body in SMALL.items()}
    other["emma"] = _strings(["a different Emma"])
    stem = _lazyload(tmp_path, other)
    with pytest.raises(corpus.CorpusError, match="'emma' is not the recorded text"):
        corpus.write_corpus(stem, tmp_path / "out")
    good = _lazyload(tmp_path, {n: _strings(b.split("\n")) for n, b in SMALL.items()})
    written = corpus.write_corpus(good, tmp_path / "out")
    assert [p.read_text() for p in written] == [SMALL[n] for n in corpus.NOVELS]


def test_characters_round_trip_and_a_stranger_is_named():
    s = "Miss Bennet's £5: \"Oh!\"\n"
    assert text.decode(text.encode(s)) == s and text.VOCAB_SIZE == 81
    with pytest.raises(ValueError, match="'é' is not in the text alphabet"):
        text.encode("café")


def test_training_windows_are_one_fixed_order_per_seed():
    t = torch.arange(1000)
    a = text.training_windows(t, 16, 4, 10, seed=3)
    assert torch.equal(a, text.training_windows(t, 16, 4, 10, seed=3))
    assert torch.equal(a[:6], text.training_windows(t, 16, 4, 6, seed=3))  # a prefix of longer runs
    assert not torch.equal(a, text.training_windows(t, 16, 4, 10, seed=4))
    assert int(a.max()) + 17 <= 1000  # every window, inputs and targets, inside the text


def test_held_out_windows_cover_the_text_once():
    t = torch.arange(101)
    w = text.windows(t, 10)  # (10, 11)
    assert w.shape == (10, 11) and torch.equal(w[:, 1:].flatten(), torch.arange(1, 101))


# ------------------------------------------------------------------ the budget and the trainer

def test_the_schedule_warms_up_then_decays_to_its_floor():
    b = TextBudget()
    assert b.lr_at(1) == pytest.approx(b.lr / b.warmup) and b.lr_at(b.warmup) == pytest.approx(b.lr)
    assert b.lr_at(b.steps) == pytest.approx(b.lr * b.final_lr)
    rates = [b.lr_at(s) for s in range(b.warmup, b.steps + 1)]
    assert all(x >= y for x, y in zip(rates, rates[1:]))


@pytest.mark.parametrize("field,value", [("steps", 0), ("context", -1), ("warmup", 800), ("lr", 0.0)])
def test_a_bad_budget_names_its_field(field, value):
    with pytest.raises(ValueError, match=field):
        TextBudget(**{field: value})


def _slice_corpus() -> text.Corpus:
    words = "the quick brown fox jumps over the lazy dog and Emma smiled. " * 60
    ids = text.encode(words)
    return text.Corpus(ids[:2400], ids[2400:3000], ids[3000:3600])


def test_same_seed_same_bits_and_the_loss_falls():
    budget = TextBudget.for_steps(30)
    cfg = variant_config("llama", vocab_size=text.VOCAB_SIZE)
    a, b = (fit_text(cfg, 1, budget, _slice_corpus()) for _ in range(2))
    assert a.losses == b.losses and a.endpoints == b.endpoints
    assert set(a.endpoints) == set(TEXT_ENDPOINTS)
    assert a.losses[-1] < a.losses[0] - 1.0 and a.endpoints["loss_end"] < a.endpoints["loss_half"]
    assert a.val_curve[-1]["step"] == 30


def test_a_learned_table_cannot_read_a_longer_window():
    cfg = variant_config("abs_pos", vocab_size=text.VOCAB_SIZE)
    res = fit_text(cfg, 0, TextBudget.for_steps(4), _slice_corpus())
    assert math.isnan(res.endpoints["loss_2x"]) and math.isnan(res.endpoints["loss_4x"])
    assert not math.isnan(res.endpoints["loss_end"])
    assert not math.isnan(held_out_loss(res.model, _slice_corpus().test, 48))


def test_a_quick_look_reads_its_endpoints_on_the_first_test_windows_only():
    from dataclasses import replace

    full, cut = TextBudget(), TextBudget.for_steps(4)
    assert full.test_windows is None and cut.test_windows == full.eval_windows
    # the full budget's record has no such field, so the committed runs keep their keys
    assert "test_windows" not in text_budget_dict(full)
    assert text_budget_dict(cut)["test_windows"] == full.eval_windows
    corpus = _slice_corpus()  # a test half of 12 windows of 48 characters
    cfg = variant_config("llama", vocab_size=text.VOCAB_SIZE)
    res = fit_text(cfg, 0, replace(cut, test_windows=2), corpus)
    assert res.endpoints["loss_end"] == held_out_loss(res.model, corpus.test, 48, 2)
    assert res.endpoints["loss_end"] != held_out_loss(res.model, corpus.test, 48)
    assert res.endpoints["loss_2x"] == held_out_loss(res.model, corpus.test, 96, 2)
    with pytest.raises(ValueError, match="TextBudget.test_windows"):
        TextBudget(test_windows=0)


# ------------------------------------------------------------------ text runs in the study

def test_the_text_plan_pairs_every_arm_by_seed():
    p = text_plan(seeds=(0, 1), lr_seeds=(0, 1))
    arms = text_arms()
    assert len(p["text"]) == 2 * len(arms) and arms[0] == ("llama", ())
    assert [o for v, o in arms if o] == [(("rope_theta", th),) for th in TEXT_THETAS]
    # the learning-rate check shares its 1x runs with the study
    shared = {r.key for r in p["text"]} & {r.key for r in p["text_lr"]}
    assert len(shared) == len(arms) * 2
    assert len({r.key for r in p["text_lr"]}) == len(arms) * 3 * 2


def test_a_run_key_changes_with_what_changes_its_numbers():
    base = Run("text", "llama", 0)
    assert base.key != Run("text", "llama", 0, lr_scale=2.0, budget=TextBudget.for_steps(None, 2.0)).key
    assert base.key != Run("text", "llama", 1).key and base.key == Run("text", "llama", 0).key
    with pytest.raises(ValueError, match="TextBudget.for_steps"):
        Run("text", "llama", 0, lr_scale=2.0)  # a rate scale whose budget disagrees


def test_an_incomplete_text_run_file_is_not_used(tmp_path):
    import json

    run = Run("text", "llama", 0, budget=TextBudget.for_steps(4))
    entry = {"record": run.record(), "dense": [{"step": 4}], "losses": [1.0] * 4, "params": 1,
             "endpoints": dict.fromkeys(TEXT_ENDPOINTS, 1.0)}
    path = tmp_path / f"{run.key}.json"
    path.write_text(json.dumps(entry))
    assert check_entry(path)[1] is None
    entry["dense"] = [{"step": 2}]
    path.write_text(json.dumps(entry))
    assert check_entry(path) == (None, "incomplete curve")


# ------------------------------------------------------------------ make corpus
# tools/ensure_corpus.sh on a temporary machine (tests/debian.py): real tools and dpkg-deb,
# an apt whose package lists start empty, and in its archive Debian's r-cran-janeaustenr
# as a real .deb whose R data hold the six novels.

PACKAGE, VERSION, RDATA = corpus.PACKAGE, corpus.VERSION, corpus.RDATA


@pytest.fixture(scope="session")
def janeaustenr_deb(tmp_path_factory) -> Path:
    """The package as Debian ships it, rebuilt from the checked novels (skipped without them)."""
    if corpus.check_corpus() is not None or shutil.which("dpkg-deb") is None:
        pytest.skip("needs the unpacked corpus (make corpus) and dpkg-deb")
    d = tmp_path_factory.mktemp("janeaustenr")
    stem = _lazyload(d, {n: _strings(corpus.read_novel(n).split("\n")) for n in corpus.NOVELS})
    files = {f"{RDATA}{suffix}": stem.with_suffix(suffix).read_bytes() for suffix in (".rdb", ".rdx")}
    return build_deb(d, PACKAGE, VERSION, files, d)


def _ensure_corpus(m, folder: Path):
    return m.run(ENSURE_CORPUS, sys.executable,
                 env={"LLAMANAT_CORPUS_DIR": str(folder), "PYTHONPATH": str(ROOT)})


def test_without_apt_the_corpus_step_says_what_to_do(tmp_path):
    result = _ensure_corpus(machine(tmp_path, uid=1000), tmp_path / "corpus")
    assert result.returncode == 1
    assert "no apt-get/dpkg-deb" in result.stderr.splitlines()[-1]
    assert not (tmp_path / "corpus").exists()


def test_a_user_whose_apt_cannot_fetch_is_told_the_command(tmp_path):
    """The package lists are empty and only root may fill them."""
    m = machine(tmp_path, uid=1000).real("dpkg-deb").with_apt()
    result = _ensure_corpus(m, tmp_path / "corpus")
    assert result.returncode == 1
    assert "run `sudo apt-get update`, then make corpus again" in result.stderr.splitlines()[-1]
    assert not (tmp_path / "corpus").exists()


def test_root_fetches_the_package_and_writes_the_checked_novels(tmp_path, janeaustenr_deb):
    m = machine(tmp_path, uid=0).real("dpkg-deb").with_apt().deb(janeaustenr_deb)
    result = _ensure_corpus(m, tmp_path / "corpus")
    assert result.returncode == 0, result.stderr
    assert corpus.check_corpus(tmp_path / "corpus") is None  # six novels, each its SHA-256
    kept = corpus.package_deb(tmp_path / "corpus")  # the package they came from, beside them
    assert kept is not None and kept.read_bytes() == janeaustenr_deb.read_bytes()
    assert m.lists.exists() and not list(m.root.glob("*.deb"))  # updated, nothing left behind


def test_a_ready_corpus_is_left_alone(tmp_path):
    if corpus.check_corpus() is not None:
        pytest.skip("the corpus is not unpacked here (make corpus)")
    m = machine(tmp_path, uid=0).real("dpkg-deb").with_apt()
    before = {p: p.stat().st_mtime_ns for p in corpus.corpus_dir().iterdir()}
    result = _ensure_corpus(m, corpus.corpus_dir())
    assert (result.returncode, result.stderr) == (0, "")
    assert not m.lists.exists()  # apt was never asked
    assert {p: p.stat().st_mtime_ns for p in corpus.corpus_dir().iterdir()} == before


def test_the_replay_verify_uses_is_the_start_of_the_run():
    from llamanat_core.train.text import text_training_losses

    cfg = variant_config("mqa", vocab_size=text.VOCAB_SIZE)
    budget = TextBudget.for_steps(12)
    full = fit_text(cfg, 2, budget, _slice_corpus())
    assert text_training_losses(cfg, 2, budget, 7, _slice_corpus()) == full.losses[:7]


# ------------------------------------------------------------------ generating text

def _trained_tiny():
    cfg = variant_config("llama", vocab_size=text.VOCAB_SIZE, max_seq_len=12)
    return fit_text(cfg, 0, TextBudget.for_steps(20, 4.0), _slice_corpus()).model.double()


def _recomputed(model, prompt: list[int], n_new: int, window: int) -> list[int]:
    """The rule `sample_text` follows, recomputing every prediction from scratch."""
    seq, start = list(prompt), 0
    for _ in range(n_new):
        logits = model(torch.tensor([seq[start:]]))[0, -1]
        seq.append(int(logits.argmax()))
        if len(seq) - start > window:
            start = len(seq) - window // 2
    return seq[len(prompt):]


def test_greedy_sampling_is_the_recomputed_rule_past_the_window():
    from llamanat_core.train.sampling import sample_text

    model = _trained_tiny()
    prompt = text.encode("the quick")
    got = sample_text(model, prompt, 40, window=12).tolist()
    assert got == _recomputed(model, prompt.tolist(), 40, window=12)
    assert sample_text(model, prompt, 40, window=12, use_cache=False).tolist() == got  # no cache, same text
    assert got[:3] == model.generate(prompt[None], 3)[0].tolist()  # inside the window: the cache


def test_a_temperature_draws_the_same_text_for_the_same_seed():
    from llamanat_core.train.sampling import sample_text

    model = _trained_tiny()
    prompt = text.encode("Emma")
    a, b = (sample_text(model, prompt, 30, temperature=1.0, seed=5) for _ in range(2))
    assert torch.equal(a, b)
    assert torch.equal(a, sample_text(model, prompt, 30, temperature=1.0, seed=5, use_cache=False))
    assert not torch.equal(a, sample_text(model, prompt, 30, temperature=1.0, seed=6))
    with pytest.raises(ValueError, match="temperature"):
        sample_text(model, prompt, 3, temperature=-1.0)


# ------------------------------------------------------------------ the compiled text step

@pytest.mark.compile
@pytest.mark.parametrize("decay", ["all", "matrices"])
def test_the_compiled_text_step_computes_the_plain_loop(decay):
    """The step every text run takes, compiled, against the plain loop it optimises: the
    first training losses agree within `llamanat verify`'s tolerance (the two round
    differently), with the schedule and either weight-decay rule. A plausible mistake, a
    step that skips the schedule, is caught by the same comparison."""
    from dataclasses import replace

    from llamanat_core.study.verify import TOLERANCE
    from llamanat_core.train.text import text_training_losses

    cfg = variant_config("llama", vocab_size=text.VOCAB_SIZE)
    budget = replace(TextBudget.for_steps(400, 4.0), decay=decay)
    plain = text_training_losses(cfg, 0, budget, 12, _slice_corpus())
    compiled = text_training_losses(cfg, 0, budget, 12, _slice_corpus(), compile=True)
    assert max(abs(a - b) for a, b in zip(plain, compiled)) <= TOLERANCE
    flat_rate = replace(budget, warmup=0)  # no warm-up: the schedule's first steps differ
    skipped = text_training_losses(cfg, 0, flat_rate, 12, _slice_corpus(), compile=True)
    assert max(abs(a - b) for a, b in zip(plain, skipped)) > 100 * TOLERANCE


def test_the_recipe_decays_matrices_only_in_both_steps():
    """With no gradient, AdamW's only move is the decay: `matrices` shrinks the 2-D
    weights by (1 - lr * weight_decay) and leaves norm gains and biases exactly as they
    were; `all` shrinks every parameter. Checked on the plain optimiser and on the flat
    update of the compiled step (run eagerly)."""
    from llamanat_core.train.compiled import FlatParameters, adamw_
    from llamanat_core.train.optim import WEIGHT_DECAY, adamw

    lr = 0.5
    for decay in ("all", "matrices"):
        model = TinyLlama(variant_config("bias"), seed=0)
        before = {n: p.detach().clone() for n, p in model.named_parameters()}
        opt = adamw(model.parameters(), lr, decay)
        for p in model.parameters():
            p.grad = torch.zeros_like(p)
        opt.step()
        flat_model = TinyLlama(variant_config("bias"), seed=0)
        flat = FlatParameters(flat_model)
        zeros = torch.zeros_like(flat.flat)
        mask = None if decay == "all" else flat.decay_mask(decay)
        adamw_(flat.flat, zeros, zeros.clone(), zeros.clone(), torch.zeros(()), lr, mask)
        for (name, p), (_, q) in zip(model.named_parameters(), flat_model.named_parameters()):
            shrunk = before[name] * (1 - lr * WEIGHT_DECAY)
            want = shrunk if decay == "all" or p.dim() >= 2 else before[name]
            assert torch.allclose(p.detach(), want, rtol=0, atol=1e-7), (decay, name)
            assert torch.allclose(q.detach(), want, rtol=0, atol=1e-7), (decay, name)
            if p.dim() == 1 and decay == "matrices":  # untouched, bit for bit
                assert torch.equal(p.detach(), before[name]) and torch.equal(q.detach(), before[name])
    with pytest.raises(ValueError, match="decay must be one of"):
        TextBudget(decay="norms")


def test_the_recipe_field_keeps_the_first_studys_keys():
    from dataclasses import replace

    assert "decay" not in text_budget_dict(TextBudget())
    assert text_budget_dict(replace(TextBudget(), decay="matrices"))["decay"] == "matrices"
