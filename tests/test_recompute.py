"""Three of the book's rows recomputed from the run files with numpy and scipy alone: no
`llamanat_core` decision code, only the run files, the rules as the methods chapter states
them (the sign test on the median seed; ten seeds, then thirty more, combined by the
inverse-normal method after every early stop) and the book's rows to compare with.

A puzzle accuracy row (accuracy at 8 pairs, post-norm on finite recall), a puzzle speed row
(post-norm on fresh addition) and a text row (LayerNorm's held-out loss): each continued to
forty seeds, so the combination is checked too.
"""
import json
import math

import numpy as np
import pytest
import scipy.integrate
import scipy.stats

from llamanat_core.paths import STUDY_DIR

FIRST, MAX = 10, 40
ALPHA_FIRST = 0.005


@pytest.fixture(scope="module")
def run_files() -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((STUDY_DIR / "runs").glob("*.json"))]


def puzzle_runs(files, task, variant, regime):
    """seed -> run file of one puzzle arm at the study's own settings (name answers, base 10,000)."""
    out = {}
    for f in files:
        r = f["record"]
        if r["task"] != task:
            continue
        arm = (r["variant"], r["budget"].get("regime", "finite"), r["answer"], r["overrides"])
        if arm == (variant, regime, "name", []):
            assert r["seed"] not in out
            out[r["seed"]] = f
    return out


def text_runs(files, variant):
    out = {}
    for f in files:
        r = f["record"]
        if r["task"] == "text" and (r["variant"], r["overrides"], r["lr_scale"]) == (variant, [], 1.0):
            assert r["seed"] not in out
            out[r["seed"]] = f
    return out


def sign_tails(d):
    """(P(above), P(below)) of the sign test for a median of 0; zeros count in n only."""
    n = len(d)
    return scipy.stats.binom.sf(np.sum(d > 0) - 1, n, 0.5), scipy.stats.binom.sf(np.sum(d < 0) - 1, n, 0.5)


def combined(p1, p2):
    """Two stages' one-sided p-values combined, every early stop (two-sided 0.005) ranked first."""
    w1, c1 = math.sqrt(FIRST / MAX), scipy.stats.norm.isf(ALPHA_FIRST / 2)
    w2 = math.sqrt(1 - w1 * w1)
    z = w1 * scipy.stats.norm.isf(p1) + w2 * scipy.stats.norm.isf(p2)
    def density(x):
        return scipy.stats.norm.pdf(x) * scipy.stats.norm.sf((z - w1 * x) / w2)
    inside, _ = scipy.integrate.quad(density, -c1, c1, epsabs=1e-13)
    return min(1.0, scipy.stats.norm.sf(c1) + inside)


def design_p(d):
    (u1, l1), (u2, l2) = sign_tails(d[:FIRST]), sign_tails(d[FIRST:])
    return min(1.0, 2 * min(combined(u1, u2), combined(l1, l2)))


def book_row(decisions, **where):
    hit = decisions
    for column, value in where.items():
        hit = hit[hit[column] == value]
    assert len(hit) == 1
    return hit.iloc[0]


def paired(ref, ctl, value):
    seeds = sorted(set(ref) & set(ctl))
    assert seeds == list(range(MAX))
    return np.array([value(ctl[s]) - value(ref[s]) for s in seeds])


def test_a_puzzle_accuracy_row(run_files, committed_decisions):
    ref = puzzle_runs(run_files, "recall", "llama", "finite")
    ctl = puzzle_runs(run_files, "recall", "postnorm", "finite")
    d = np.round(paired(ref, ctl, lambda f: f["curve"][-1]["test_acc_8"]) * 200)  # items of 200
    book = book_row(committed_decisions, measurement="length", control="postnorm", task="recall",
                    regime="finite", metric="length_8")
    assert book.n == MAX and book.p == pytest.approx(design_p(d), rel=1e-6)
    assert book.effect == pytest.approx(np.median(d) / 200)
    # one sign test on all forty seeds (forgetting the stages) is a different number
    assert not math.isclose(book.p, 2 * min(sign_tails(d)), rel_tol=1e-3)


def test_a_puzzle_speed_row(run_files, committed_decisions):
    ref = puzzle_runs(run_files, "addition", "llama", "fresh")
    ctl = puzzle_runs(run_files, "addition", "postnorm", "fresh")

    def capped(f):  # min(solve step, cap); a run that never solved stops at the cap
        return math.log(f["solve_step"] if f["solve_step"] is not None else f["record"]["budget"]["steps"])
    d = np.round(paired(ref, ctl, capped) / 0.01)  # hundredths of a log ratio
    book = book_row(committed_decisions, measurement="matrix", control="postnorm", task="addition",
                    regime="fresh", metric="speed")
    assert book.n == MAX and book.p == pytest.approx(design_p(d), rel=1e-6)
    assert book.effect == pytest.approx(math.exp(np.median(d) * 0.01))
    assert book.verdict == "worse" and np.median(d) > 0


def test_a_text_row(run_files):
    from llamanat_core.analysis.text_comparisons import decide_text
    from llamanat_core.study import load_text_results

    ref, ctl = text_runs(run_files, "llama"), text_runs(run_files, "layernorm")
    d = np.round(paired(ref, ctl, lambda f: f["endpoints"]["loss_end"]) / 1e-4)  # 1e-4 nats per character
    text = decide_text(load_text_results())
    book = text[(text.comparison == "layernorm") & (text.metric == "loss_end")].iloc[0]
    assert book.n == MAX and book.p == pytest.approx(design_p(d), rel=1e-6)
    assert book.effect == pytest.approx(np.median(d) * 1e-4)
    # the mean (a plausible slip for the median) is another number
    assert not math.isclose(book.effect, np.mean(d) * 1e-4, rel_tol=1e-3)
