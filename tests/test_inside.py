"""Inside the text models: the loss along a window and the arms' samples, on the first text
study's kept reference (one small batch of the test half each)."""
import math

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

from llamanat_core import TinyLlama, variant_config
from llamanat_core.book.helpers.text import reference_text_model
from llamanat_core.book.inside import arm_samples, loss_by_position, samples_text, tuned_model
from llamanat_core.book.plotting import tuned
from llamanat_core.data.text import VOCAB_SIZE, decode, load_corpus, windows
from llamanat_core.model.model import answer_loss
from llamanat_core.study.text_recipe import tuned_run
from llamanat_core.study.weights import weights_bytes, weights_path

T = 48  # the study's context


@pytest.fixture(scope="module")
def reference():
    return reference_text_model("llama")


@pytest.fixture(scope="module")
def test_half():
    return load_corpus().test


def without_attention(model: TinyLlama) -> TinyLlama:
    """A copy whose attention adds nothing to the residual stream (every o_proj zero):
    each position then sees its own character only."""
    out = TinyLlama(model.cfg, seed=None)
    out.load_state_dict(model.state_dict())
    with torch.no_grad():
        for layer in out.layers:
            layer.self_attn.o_proj.weight.zero_()
    return out.eval()


def cyclic_windows(text: torch.Tensor) -> torch.Tensor:
    """Every rotation of `text` (n,) -> (n, n): each position of the windows holds the same
    n (character, next character) pairs, so a model that reads no context scores every
    position alike."""
    n = len(text)
    return text[(torch.arange(n)[:, None] + torch.arange(n)[None, :]) % n]  # (n, n)


def test_loss_by_position_averages_to_the_training_loss(reference, test_half):
    w = windows(test_half, T, 32)  # (32, 49)
    curve = loss_by_position(reference, w)
    assert curve.shape == (T,)
    assert curve.mean() == pytest.approx(answer_loss(reference, w, None).item(), abs=1e-6)


def test_without_attention_the_curve_is_flat_and_with_it_it_is_not(reference, test_half):
    w = cyclic_windows(test_half[1000:1000 + T + 1])  # (49, 49)
    flat = loss_by_position(without_attention(reference), w)
    assert np.ptp(flat) < 1e-5  # every position scores the same pairs from one character
    read = loss_by_position(reference, w)  # the same windows, the context read
    assert np.ptp(read) > 0.5  # reading the context is what makes the positions differ


def test_the_trained_reference_loss_falls_along_the_window(reference, test_half):
    curve = loss_by_position(reference, windows(test_half, T, 256))  # (48,) nats
    first, early, late = curve[0], curve[1:4].mean(), curve[24:].mean()
    assert first - late > 0.5  # one character of context against 25-48
    assert early > late


def test_loss_by_position_rejects_a_flat_batch(reference):
    with pytest.raises(ValueError, match="windows"):
        loss_by_position(reference, torch.zeros(T, dtype=torch.long))


def test_position_figure_draws_bits_per_character():
    curves = {"base 10": np.array([2.0, 1.5, 1.4]), "base 10,000": np.array([2.0, 1.2, 1.0])}
    fig = tuned.position_figure(curves, {"base 10": "#D55E00", "base 10,000": "llama"})
    lines = {ln.get_label(): ln for ln in fig.axes[0].get_lines()}
    for label, nats in curves.items():
        np.testing.assert_allclose(lines[label].get_ydata(), nats / math.log(2))
        np.testing.assert_array_equal(lines[label].get_xdata(), np.arange(3))
    assert lines["base 10,000"].get_color() == "#0072B2"  # llama's colour
    plt.close(fig)
    with pytest.raises(ValueError, match="base 100"):
        tuned.position_figure({"base 100": np.ones(3)}, {"base 10": "llama"})


# ---------------------------------------------------------------- samples

@pytest.fixture(scope="module")
def prompt(test_half):
    return decode(test_half[2000:2008])


def by_hand(model: TinyLlama, prompt_ids: torch.Tensor, n: int) -> str:
    """Greedy decoding without the cache: the whole text so far, the argmax of its last row."""
    ids = prompt_ids.clone()
    with torch.no_grad():
        for _ in range(n):
            ids = torch.cat([ids, model(ids[None])[0, -1].argmax().view(1)])
    return decode(ids[len(prompt_ids):])


def test_arm_samples_are_deterministic_and_greedy_is_the_argmax(reference, prompt):
    from llamanat_core.data.text import encode

    other = TinyLlama(variant_config("llama", vocab_size=VOCAB_SIZE), seed=3).eval()
    models = {"reference": reference, "untrained": other}
    a = arm_samples(models, prompt, 12, seed=5)
    b = arm_samples(models, prompt, 12, seed=5)
    assert a.equals(b) and list(a.label) == ["reference", "untrained"]
    assert a.set_index("label").greedy["reference"] == by_hand(reference, encode(prompt), 12)
    assert a.set_index("label").greedy["untrained"] == by_hand(other, encode(prompt), 12)
    assert a.set_index("label").greedy["reference"] != a.set_index("label").greedy["untrained"]
    c = arm_samples(models, prompt, 12, seed=6)
    assert (c.sampled != a.sampled).all() and (c.greedy == a.greedy).all()


def test_every_arm_draws_with_the_same_seed(reference, prompt):
    same = arm_samples({"one": reference, "two": reference}, prompt, 20, seed=1)
    assert same.sampled[0] == same.sampled[1] and len(same.sampled[0]) == 20


def test_arm_samples_names_what_is_wrong():
    with pytest.raises(ValueError, match="n_chars"):
        arm_samples({"x": None}, "The", 0)
    with pytest.raises(ValueError, match="models"):
        arm_samples({}, "The", 5)
    with pytest.raises(ValueError, match="prompt"):
        arm_samples({"x": None}, "", 5)


# ---------------------------------------------------------------- the tuned study's weights

def test_tuned_model_reads_the_kept_weights_of_the_arm_it_names(tmp_path):
    run = tuned_run("llama", (("rope_theta", 10.0),), "M", 4.0, 1, steps=8, keep=True, compile=False)
    kept = TinyLlama(run.config, seed=11).eval()
    weights_path(run, tmp_path).write_bytes(weights_bytes(run, kept, 8))
    back = tuned_model("base 10", "M", 4.0, 1, steps=8, compile=False, weights_dir=tmp_path)
    assert back.cfg == kept.cfg and back.cfg.rope_theta == 10.0 and back.cfg.d_model == 128
    for key, value in kept.state_dict().items():
        assert torch.equal(back.state_dict()[key], value), key
    with pytest.raises(FileNotFoundError, match="base 100 at M"):  # another base: another file
        tuned_model("base 100", "M", 4.0, 1, steps=8, compile=False, weights_dir=tmp_path)
    with pytest.raises(ValueError, match="size"):
        tuned_model("base 10", "L", 4.0, 1, weights_dir=tmp_path)


def test_settled_models_are_the_settled_arms_whose_weights_are_kept(tmp_path):
    """llama and mqa both settle at ×1 (between ×0.5 and ×2) and post-norm's best sits at
    an edge; only llama's seed-0 weights are kept: one model, at its selected rate."""
    import pandas as pd

    from llamanat_core.book.inside import settled_models

    rows = []
    for variant, best in (("llama", 1.0), ("mqa", 1.0), ("postnorm", 2.0)):
        for lr in (0.5, 1.0, 2.0):
            for seed in range(3):
                loss = 1.5 + abs(math.log2(lr / best)) / 10
                rows.append({"size": "S", "variant": variant, "rope_theta": 10_000.0, "lr_scale": lr,
                             "seed": seed, "loss_val": loss, "loss_end": loss, "loss_half": loss + 0.1,
                             "loss_2x": loss + 0.1, "loss_4x": loss + 0.2})
    run = tuned_run("llama", (), "S", 1.0, 0, keep=True)
    kept = TinyLlama(run.config, seed=3).eval()
    weights_path(run, tmp_path).write_bytes(weights_bytes(run, kept, run.budget.steps))
    models = settled_models(pd.DataFrame(rows), weights_dir=tmp_path)
    assert list(models) == ["llama"]
    assert torch.equal(models["llama"].lm_head.weight, kept.lm_head.weight)
    assert settled_models(pd.DataFrame(rows), size="M", weights_dir=tmp_path) == {}


def test_distinct_share_is_small_for_a_loop_and_one_for_new_words():
    from llamanat_core.book.inside import distinct_share

    assert distinct_share("the same " * 10) == pytest.approx(2 / 20)
    assert distinct_share("Anne had been walking alone") == 1.0
    with pytest.raises(ValueError, match="no word"):
        distinct_share("  \n")


def test_samples_print_one_arm_a_block_each_text_on_one_line():
    import pandas as pd

    samples = pd.DataFrame({"label": ["llama", "gelu_mlp"], "greedy": ["a b\nc", "d"],
                            "sampled": ["e", "f\ng"]})
    text = samples_text(samples, {"gelu_mlp": "GELU MLP"})
    assert text == ("reference\n  greedy:  a b c\n  sampled: e\n\n"
                    "GELU MLP\n  greedy:  d\n  sampled: f g\n")
