"""The earlier study's published numbers (transcribed once, each naming its finding), the
rule that says whether a finding replicates, and the table the closing chapter shows."""
import math

import pandas as pd
import pytest

from llamanat_core.analysis import replication
from llamanat_core.paths import ROOT


def _problems(name: str, p: replication.Published) -> list[str]:
    """Why a published number is malformed: its name does not name its finding, or its
    number is not what its quantity says (an accuracy in [0, 1], a difference in [-1, 1], a
    count of at most its seeds), its spread is negative, or it rests on more seeds than the
    study had."""
    out = []
    if not name.startswith(p.finding.upper() + "_"):
        out.append(f"{name} does not name its finding {p.finding!r}")
    if not 1 <= p.seeds <= replication.SEEDS:
        out.append(f"{name} rests on {p.seeds} seeds; the study had {replication.SEEDS}")
    if p.spread is not None and p.spread < 0:
        out.append(f"{name} has a negative spread")
    if p.quantity.startswith("seeds"):
        ok = p.value == int(p.value) and 0 <= p.value <= p.seeds
    elif " minus " in p.quantity or "difference" in p.quantity:
        ok = -1 <= p.value <= 1
    else:
        ok = 0 <= p.value <= 1
    return out + ([] if ok else [f"{name}: {p.value} is not a {p.quantity}"])


def test_the_published_numbers_are_well_formed():
    assert replication.PUBLISHED
    assert not [x for name, p in replication.PUBLISHED.items() for x in _problems(name, p)]


@pytest.mark.parametrize("name, number", [
    ("A_ACC", replication.Published("a", "test accuracy", 0.5, seeds=replication.SEEDS + 1)),
    ("A_ACC", replication.Published("a", "test accuracy", 1.2)),
    ("B_ACC", replication.Published("a", "test accuracy", 0.5)),
    ("A_SOLVED", replication.Published("a", "seeds solved", replication.SEEDS + 1)),
    ("A_GAP", replication.Published("a", "accuracy difference", 0.1, spread=-0.1)),
])
def test_a_malformed_number_is_caught(name, number):
    """More seeds than the study had, an accuracy above 1, a name of another finding, a
    count above the seeds, a negative spread: each is reported."""
    assert _problems(name, number)


def test_every_finding_has_numbers_and_the_citation_exists():
    assert {p.finding for p in replication.PUBLISHED.values()} == set(replication.LETTERS)
    assert {f.letter for f in replication.FINDINGS} == set(replication.LETTERS)
    for letter in replication.LETTERS:
        assert replication.published_numbers(letter)
    with pytest.raises(ValueError, match="unknown finding"):
        replication.published_numbers("f")
    with pytest.raises(ValueError, match="finding must be one of"):
        replication.Published("f", "x", 0.5)
    assert f"{{{replication.CITATION}," in (ROOT / "book" / "references.bib").read_text()


def test_published_text_is_the_published_format():
    assert replication.A_LLAMA_ADDITION.text() == "0.662 ± 0.411"
    assert replication.A_ABS_POS_ADDITION.text() == "1.000"
    assert replication.E_UNTIED_COPY.text() == "−0.045"
    assert replication.D_BASE_10_BELOW.text() == "3 of 3 seeds"


M = 0.15  # an accuracy margin: the rows below are accuracy gaps (control − reference)


def _rows(*rows):
    """Rows of one finding on accuracy at 1,200 steps: (regime, verdict, ci_low, ci_high)."""
    return pd.DataFrame([{"regime": r, "verdict": v, "metric": "test_acc@1200", "ci_low": lo, "ci_high": hi,
                          "margin_low": -M, "margin_high": M} for r, v, lo, hi in rows])


@pytest.mark.parametrize("published, verdict, low, high, word", [
    ("worse", "worse", -0.30, -0.20, "replicates"),  # beyond the margin on the published side
    ("worse", "worse", -0.20, -0.05, "undecided"),  # decided, but the interval reaches inside the margin
    ("worse", "equivalent", -0.10, 0.10, "is consistent"),  # inside the margin
    ("worse", "better", 0.20, 0.30, "does not replicate"),  # beyond the margin the other way
    ("worse", "better", 0.05, 0.30, "undecided"),  # the other way, but not by more than the margin
    ("equivalent", "equivalent", -0.10, 0.10, "replicates"),
    ("equivalent", "better", -0.009, 0.20, "undecided"),  # a gap inside, its interval reaching past
    ("equivalent", "better", 0.16, 0.20, "does not replicate"),
    ("not better", "equivalent", -0.10, 0.10, "replicates"),
    ("not better", "undecided", -0.30, 0.10, "undecided"),  # no lead beyond the margin, but no verdict
    ("not better", "better", 0.20, 0.30, "does not replicate"),
    ("better", "pending", 0.20, 0.30, "not yet"),
    ("better", "rarely solved", 0.20, 0.30, "undecided"),  # no verdict is read off its interval
    ("better", "better", math.nan, math.nan, "undecided"),
])
def test_score_reads_the_interval_against_the_margin(published, verdict, low, high, word):
    assert replication.score(published, verdict, low, high, -M, M) == word


def test_score_rejects_an_unknown_direction():
    with pytest.raises(ValueError, match="published"):
        replication.score("faster", "better", 0.2, 0.3, -M, M)


def test_toward_better_turns_a_speed_ratio_and_a_loss_so_larger_is_better():
    speed = pd.Series({"ci_low": 1.5, "ci_high": 2.0, "margin_low": 0.8, "margin_high": 1.25})
    lo, hi, m_lo, m_hi = replication.toward_better(speed, higher_is_better=False, log=True)
    assert lo == pytest.approx(-math.log(2.0)) and hi == pytest.approx(-math.log(1.5))
    assert m_lo == pytest.approx(-math.log(1.25)) and hi < m_lo  # slower beyond the margin
    assert replication.score("worse", "worse", lo, hi, m_lo, m_hi) == "replicates"
    wrong = replication.toward_better(speed, higher_is_better=True, log=True)  # the mistake: unflipped
    assert replication.score("worse", "worse", *wrong) != "replicates"


@pytest.mark.parametrize("rows, expected", [
    ([("finite", "better", 0.2, 0.4), ("finite", "undecided", -0.1, 0.3), ("fresh", "better", 0.2, 0.3)],
     "replicates"),
    ([("finite", "better", 0.2, 0.4), ("fresh", "both at chance", -0.1, 0.1)], "replicates in one regime"),
    ([("finite", "undecided", -0.1, 0.3), ("fresh", "both at chance", -0.1, 0.1)], "undecided"),
    ([("finite", "better", 0.2, 0.4), ("fresh", "worse", -0.4, -0.2)], "does not replicate"),
    ([("finite", "equivalent", -0.1, 0.1)], "is consistent"),  # no gap worth the name: not against it
    ([("finite", "better", 0.1, 0.4)], "undecided"),  # better, but not beyond the margin
])
def test_replicates_reads_every_regime_by_the_fixed_rule(rows, expected):
    finding = replication.FINDING["a"]  # published: better
    assert finding.published == "better"
    assert replication.replicates(_rows(*rows), finding) == expected


def test_no_lead_is_refuted_only_by_a_lead_beyond_the_margin():
    finding = replication.FINDING["d base 1,000,000"]
    assert finding.published == "not better"
    assert replication.replicates(_rows(("finite", "equivalent", -0.1, 0.1)), finding) == "replicates"
    assert replication.replicates(_rows(("finite", "worse", -0.4, -0.2)), finding) == "replicates"
    assert replication.replicates(_rows(("finite", "better", 0.2, 0.3)), finding) == "does not replicate"
    assert replication.replicates(_rows(), finding) == "undecided"


def test_a_size_confound_is_named_and_a_matched_control_has_none():
    assert replication.size_note("mha") == (
        "mha has 7.9 % more parameters than llama: size and mechanism are confounded")
    assert replication.size_note("mha_matched") == "" and replication.size_note("layernorm") == ""
    assert "fewer" in replication.size_note("mqa")
    with pytest.raises(ValueError, match="variant"):
        replication.text_parameters("nosuch")


def test_each_finding_is_tested_by_comparisons_the_study_decides(committed_decisions):
    for f in replication.FINDINGS:
        rows = replication.finding_rows(committed_decisions, f)
        if not f.tests:
            assert rows.empty and f.no_test  # the untied head: no comparison, and it says why
            continue
        for t in f.tests:  # every named comparison exists in the study, in some regime
            own = rows[(rows.control == t.control) & (rows.metric == t.metric)]
            assert len(own) >= 1, (f.key, t)
            assert set(own.measurement) == {t.measurement}


def test_the_committed_study_replicates_what_the_chapter_says(committed_results, committed_decisions):
    table = replication.replication_table(committed_results, committed_decisions)
    assert list(table.index) == [f"({f.key})" for f in replication.FINDINGS]
    got = dict(zip(table.index, table["replicates?"]))
    # (c) and (e copy): the GELU MLP's finite recall speed is rarely solved (it never
    # solves) and the ten-seed decisions at 1,200 steps were withdrawn by the correction
    assert got == {"(a)": "replicates", "(b)": "replicates in one regime", "(c)": "undecided",
                   "(d base 10)": "undecided", "(d base 1,000,000)": "undecided",
                   "(e copy)": "undecided", "(e untied)": "undecided"}
    assert "0.662 ± 0.411" in table.loc["(a)"].iloc[1]  # the published column
    assert "finite: abs_pos 1.000" in table.loc["(a)"].iloc[2]  # ours
    assert table.loc["(a)", "verdicts"] == "finite: better, undecided; fresh: better, better"


def test_our_numbers_are_the_study_rows(first_ten_results):
    vals = replication.seed_values(first_ten_results, "abs_pos", "addition", "finite")
    assert len(vals) == 10 and list(vals.index) == list(range(10))
    # the fixed checkpoint is the row flagged `final`; an explicit step picks that row
    assert vals.equals(replication.seed_values(first_ten_results, "abs_pos", "addition", "finite", step=1200))
    assert replication.seed_values(first_ten_results, "abs_pos", "addition", "finite", step=7).empty
    assert replication.mean_sd(pd.Series([0.5, 1.0])) == "0.750 ± 0.250"
    assert replication.mean_sd(pd.Series([], dtype=float)) == "–"
    llama = {"variant": "llama", "task": "recall"}
    k, n = replication.paired_below(first_ten_results, {**llama, "theta": 10.0}, llama, "finite")
    a = replication.seed_values(first_ten_results, "llama", "recall", "finite", theta=10.0)
    b = replication.seed_values(first_ten_results, "llama", "recall", "finite")
    assert (k, n) == (int((a < b).sum()), 10)
    d = replication.paired_mean_difference(first_ten_results, {**llama, "theta": 10.0}, llama, "finite")
    assert math.isclose(d, float((a - b).mean()))
    with pytest.raises(ValueError, match="unknown finding"):
        replication.our_numbers(first_ten_results, "z")
