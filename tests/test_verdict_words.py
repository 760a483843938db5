"""The verdict sentence a chapter glues says what its row decided, and nothing more."""
import pandas as pd
import pytest

from llamanat_core import comparisons
from llamanat_core.verdict_words import row_name, verdict_sentence, verdict_word


@pytest.fixture(scope="module")
def decisions(committed_results):
    return comparisons.decide(committed_results)


def _row(**fields):
    base = dict(measurement="matrix", comparison="postnorm vs llama", task="addition", regime="finite",
                metric="speed", reference="llama", control="postnorm", n=10, effect=2.0, ci_low=1.25,
                ci_high=4.0, margin_low=0.8, margin_high=1.25, verdict="worse",
                stopped="decided on the first 10 seeds")
    return pd.Series(base | fields)


def test_a_decided_speed_row_reads_as_more_steps_with_its_interval():
    assert verdict_sentence(_row()) == ("post-norm takes more steps than llama to solve addition on the "
                                        "finite set: ×2.00 the steps [1.25, 4.00], decided on 10 seeds")


def test_a_plural_name_takes_a_plural_verb():
    row = _row(control="bias", effect=0.5, ci_low=0.3, ci_high=0.7, verdict="better")
    text = verdict_sentence(row)
    assert text.startswith("biases take fewer steps than llama")


def test_an_accuracy_row_is_in_points_with_a_real_minus_sign():
    row = _row(metric="length_8", task="recall", effect=-0.5, ci_low=-0.7, ci_high=-0.3, margin_low=-0.15,
               margin_high=0.15, stopped="undecided on the first 10 seeds: 30 seeds added", n=40)
    assert verdict_sentence(row) == (
        "post-norm scores lower than llama on recall with 8 pairs on the finite set at the end of "
        "training: −50.0 [−70.0, −30.0] points, decided on 40 seeds")


def test_undecided_never_reads_as_no_difference():
    row = _row(effect=1.1, ci_low=0.7, ci_high=1.6, verdict="undecided",
               stopped="undecided on the first 10 seeds: 3 of 30 added seeds so far")
    text = verdict_sentence(row)
    assert text.startswith("the study cannot tell whether post-norm takes fewer or more steps")
    assert "holds both no difference and differences beyond the margin 0.8–1.25" in text
    assert text.endswith("(10 seeds so far, more being added)")


def test_an_unknown_verdict_is_an_error_that_names_it():
    with pytest.raises(ValueError, match="'maybe'"):
        verdict_sentence(_row(verdict="maybe"))


def test_names_in_prose():
    assert [row_name(x) for x in ("postnorm", "rope_theta=10,000", "abs_pos copy", "mystery")] == \
        ["post-norm", "base 10,000", "copy answers", "mystery"]
    assert verdict_word(_row()) == "decided worse" and verdict_word(_row(verdict="undecided")) == "undecided"


def test_every_committed_row_gets_words_that_match_its_verdict(decisions):
    openings = {"better": ("fewer", "higher"), "worse": ("more", "lower")}
    for _, row in decisions.iterrows():
        text = verdict_sentence(row)
        if row.verdict in openings:
            assert "decided on" in text and any(f" {w} " in text for w in openings[row.verdict]), text
        elif row.verdict == "undecided":
            assert text.startswith("the study cannot tell"), text
        elif row.verdict == "equivalent":
            assert "equivalent" in text and "inside the margin" in text, text
        elif row.verdict == "rarely solved":
            assert "too few seeds to compare" in text and "equivalent" not in text, text
        elif row.verdict == "mostly at chance":
            assert "shows no equivalence" in text, text
        else:
            assert row.verdict in ("both at chance", "not learned") and "decided" not in text, text
        if row.metric == "speed" and row.verdict != "not learned":
            k_r, k_c, n = int(row.reference_solved), int(row.control_solved), int(row.n)
            assert text.endswith(f" {k_r} of {n} seeds, {row_name(row.control)} {k_c} of {n}"), text
        assert "nan" not in text and "inf" not in text


def test_a_rarely_solved_row_says_so_and_names_the_bound():
    row = _row(task="recall", control="gelu_mlp", effect=3.53, ci_low=2.31, ci_high=5.31, n=40,
               verdict="rarely solved", bound="lower", reference_solved=32, control_solved=0)
    assert verdict_sentence(row) == (
        "the GELU MLP and llama solve recall on the finite set on too few seeds to compare their speed: "
        "the capped ratio ≥×3.53 [2.31, 5.31], a bound as the GELU MLP never solves (40 seeds); "
        "llama solves 32 of 40 seeds, the GELU MLP 0 of 40")


def test_a_post_hoc_decision_says_so():
    row = _row(post_hoc=True, registered_verdict="undecided")
    assert verdict_sentence(row).endswith("(post hoc: the registered analysis read it undecided)")
    assert "post hoc" not in verdict_sentence(_row(post_hoc=False, registered_verdict="worse"))
