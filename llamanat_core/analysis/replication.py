"""The earlier published study this book replicates, and what the study here says of it.

llama-anatomy (2026), the public repository Lesereingrape/llama-anatomy, trained the same
kind of tiny LLaMA on the same two tasks with 3 seeds for 1,200 steps and published five
findings, lettered (a) to (e) here. The numbers below are transcribed from it, nothing
else: each is a named constant that says which finding it belongs to, so the closing
chapter can cite it (and glue it: a published number is still a number in the prose).

Each finding is tested by comparisons the study already decides (`comparisons.decide`, whole
study, Holm within each family); `replication_table` reads those decisions, it never
re-tests. The published study compared rows at its last checkpoint, 1,200 steps, so a
finding about in-domain accuracy is tested on the study's accuracy at 1,200 steps (a
secondary endpoint, first ten seeds) beside its speed of learning; a finding about longer
recall items on the length endpoints.

What "replicates" means is fixed here on each row's interval and margin (`score`), the
same for the puzzles and for text. The rule is stricter than the one fixed before the
runs (a verdict's direction alone), and it was written after them, so it can only take
claims away:

- ``replicates``: the verdict agrees with the published direction and the whole interval
  lies beyond the margin on that side (for a published "matches", inside the margin);
- ``is consistent``: the interval lies inside the margin (no difference worth the name,
  which a published direction does not forbid);
- ``does not replicate``: the interval excludes the published direction by more than the
  margin (it lies wholly beyond the margin on the other side; for "matches", outside it);
- ``undecided``: anything else (an interval that reaches past the margin, a row at chance);
  ``not yet`` while its seeds are still running.

A puzzle finding tested by several rows in two regimes reads them together (`replicates`).
A comparison whose arms differ in size says so (`size_note`): a control with more
parameters than the reference is not a test of the mechanism alone.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from ..data.text import VOCAB_SIZE
from ..model.config import EXPECTED_PARAMETERS, REGIMES, VARIANTS, variant_config
from ..model.model import TinyLlama
from .comparisons import ENDPOINTS, variant_rows
from .decision_tables import METRIC_TITLES
from .report import signed_number
from .text_comparisons import TEXT_PUBLISHED, WINDOWS, text_row, window_decision

STUDY = "llama-anatomy"
YEAR = 2026
REPOSITORY = "Lesereingrape/llama-anatomy"
CITATION = "lesereingrape2026llamaanatomy"
"""The key of its entry in book/references.bib."""
SEEDS = 3
STEPS = 1_200
LETTERS = ("a", "b", "c", "d", "e")


@dataclass(frozen=True)
class Published:
    """One number of the published study, as published.

    `value` is an accuracy (a fraction of the test items), an accuracy difference, or a
    count of seeds; `spread` the ± it was published with (over its seeds), if any;
    `seeds` how many seeds the number rests on."""

    finding: str
    quantity: str
    value: float
    spread: float | None = None
    seeds: int = SEEDS

    def __post_init__(self):
        if self.finding not in LETTERS:
            raise ValueError(f"finding must be one of {LETTERS}, got {self.finding!r}")

    def text(self) -> str:
        """As published: '0.662 ± 0.411', '1.000', '−0.045', '3 of 3 seeds'."""
        if self.quantity.startswith("seeds"):
            return f"{int(self.value)} of {self.seeds} seeds"
        s = f"{self.value:.3f}".replace("-", "−")  # a true minus sign
        return s if self.spread is None else f"{s} ± {self.spread:.3f}"


# (a) in domain, the learned position table fits addition fastest
A_ABS_POS_ADDITION = Published("a", "abs_pos, addition, test accuracy at 1,200 steps", 1.000)
A_LLAMA_ADDITION = Published("a", "llama, addition, test accuracy at 1,200 steps", 0.662, 0.411)
# (b) trained at 4 pairs, scored at 8 and 12: RoPE holds, the learned table falls
B_LLAMA_12 = Published("b", "llama, recall trained at 4 pairs, accuracy at 12 pairs", 0.715, 0.100)
B_ABS_POS_12 = Published("b", "abs_pos, recall trained at 4 pairs, accuracy at 12 pairs", 0.180, 0.060)
B_LLAMA_8 = Published("b", "llama, recall trained at 4 pairs, accuracy at 8 pairs", 0.870)
B_ABS_POS_8 = Published("b", "abs_pos, recall trained at 4 pairs, accuracy at 8 pairs", 0.260)
# (c) the GELU MLP never leaves the floor on recall
C_GELU_300 = Published("c", "gelu_mlp, recall, test accuracy at 300 steps", 0.253)
C_GELU_1200 = Published("c", "gelu_mlp, recall, test accuracy at 1,200 steps", 0.255)
# (d) rotation base 10 lands below 10,000 in domain on every seed; 1,000,000 is no lead
D_BASE_10_BELOW = Published("d", "seeds on which base 10 lands below base 10,000 in domain", 3)
# (e) one seed: copying the value against naming it, and untying the embeddings
E_COPY = Published("e", "llama, recall, copy answer, test accuracy", 0.345, seeds=1)
E_NAME = Published("e", "llama, recall, name answer, test accuracy", 1.000, seeds=1)
E_UNTIED_COPY = Published("e", "untied minus tied, recall, copy answer, test accuracy", -0.045, seeds=1)

PUBLISHED = {name: value for name, value in globals().items() if isinstance(value, Published)}
"""Every transcribed number by its constant's name, in the order above."""


# ---------------------------------------------------------------- the findings and their tests

@dataclass(frozen=True)
class VerdictRef:
    """One comparison the study decides: a row of `comparisons.decide` (all regimes of it)."""

    measurement: str
    control: str
    task: str
    metric: str  # an endpoint of comparisons.ENDPOINTS: speed, length_8, length_12, test_acc@1200


@dataclass(frozen=True)
class Finding:
    """A published finding, the study's comparisons that test it, and which of their
    verdicts agree with it (`agree`) or go against it (`against`)."""

    key: str  # the finding's letter, with a part where a finding has two: 'd base 10'
    letter: str
    claim: str
    tests: tuple[VerdictRef, ...]
    agree: frozenset
    against: frozenset
    no_test: str = ""  # why the study has no test, when `tests` is empty

    @property
    def published(self) -> str:
        """The published direction `score` reads: better, worse, or `not better` (no lead)."""
        if self.agree == {"better"}:
            return "better"
        return "worse" if self.agree == {"worse"} else "not better"


def speed_and_accuracy(measurement: str, control: str, task: str = "recall") -> tuple[VerdictRef, ...]:
    """A control's two comparisons that test a finding: time to solve and accuracy at 1,200 steps."""
    return tuple(VerdictRef(measurement, control, task, metric) for metric in ("speed", "test_acc@1200"))


# (agree, against) for the three published directions
BETTER = frozenset({"better"}), frozenset({"worse", "equivalent"})
WORSE = frozenset({"worse"}), frozenset({"better", "equivalent"})
NOT_BETTER = frozenset({"worse", "equivalent"}), frozenset({"better"})

FINDINGS = (
    Finding("a", "a", "in domain, abs_pos fits addition fastest",
            speed_and_accuracy("matrix", "abs_pos", "addition"), *BETTER),
    Finding("b", "b", "trained at 4 pairs, llama holds at 8 and 12 pairs while abs_pos falls",
            (VerdictRef("length", "abs_pos", "recall", "length_8"),
             VerdictRef("length", "abs_pos", "recall", "length_12")), *WORSE),
    Finding("c", "c", "the GELU MLP never leaves the floor on recall",
            speed_and_accuracy("matrix", "gelu_mlp"), *WORSE),
    Finding("d base 10", "d", "rotation base 10 lands below 10,000 in domain",
            speed_and_accuracy("sweep", "rope_theta=10"), *WORSE),
    Finding("d base 1,000,000", "d", "rotation base 1,000,000 is no lead over 10,000",
            speed_and_accuracy("sweep", "rope_theta=1,000,000"), *NOT_BETTER),
    Finding("e copy", "e", "copying the value falls short of naming it",
            speed_and_accuracy("alphabet", "llama copy"), *WORSE),
    Finding("e untied", "e", "untying the embeddings moves copy the wrong way",
            (), frozenset(), frozenset(),
            no_test="the study compares each variant's copy answers with its own name "
                    "answers; untied copy against llama copy is not one of its comparisons"),
)
FINDING = {f.key: f for f in FINDINGS}


def published_numbers(letter: str) -> dict[str, Published]:
    """The transcribed numbers of one finding, by constant name."""
    if letter not in LETTERS:
        raise ValueError(f"unknown finding {letter!r}; the findings are {', '.join(LETTERS)}")
    return {k: p for k, p in PUBLISHED.items() if p.finding == letter}


def finding_rows(v: pd.DataFrame, finding: Finding) -> pd.DataFrame:
    """The verdict rows (every regime) of a finding's comparisons; empty if it has none."""
    if not finding.tests:
        return v.iloc[0:0]
    keep = pd.Series(False, index=v.index)
    for t in finding.tests:
        keep |= ((v.measurement == t.measurement) & (v.control == t.control) & (v.task == t.task)
                 & (v.metric == t.metric))
    return v[keep]


DIRECTIONS = ("better", "worse", "equivalent", "not better")
WORDS = ("replicates", "is consistent", "does not replicate", "undecided", "not yet")
WAITING = ("pending", "absent")
NO_READING = ("rarely solved", "both at chance", "mostly at chance")  # no verdict read off the interval


def score(published: str, verdict: str, low: float, high: float, margin_low: float,
          margin_high: float) -> str:
    """One row against a published direction, by the rule of the module's docstring.

    `low`, `high` and the margins are on a scale where larger is better for the control
    (`toward_better` turns a row into it); `verdict` is the row's own."""
    if published not in DIRECTIONS:
        raise ValueError(f"published must be one of {DIRECTIONS}, got {published!r}")
    if verdict in WAITING:
        return "not yet"
    if verdict in NO_READING or any(math.isnan(x) for x in (low, high, margin_low, margin_high)):
        return "undecided"
    inside = margin_low <= low and high <= margin_high
    above, below = low > margin_high, high < margin_low  # wholly beyond the margin
    if published == "equivalent":
        return "replicates" if inside else "does not replicate" if above or below else "undecided"
    if published == "not better":  # "no lead": refuted only by a lead beyond the margin
        agrees = verdict in ("worse", "equivalent") and high <= margin_high
        return "does not replicate" if above else "replicates" if agrees else "undecided"
    agrees, against = (above, below) if published == "better" else (below, above)
    if agrees and verdict == published:
        return "replicates"
    return "is consistent" if inside else "does not replicate" if against else "undecided"


def toward_better(row, higher_is_better: bool, log: bool = False) -> tuple[float, float, float, float]:
    """A row's interval and margins (`ci_low`, `ci_high`, `margin_low`, `margin_high`) as
    differences where larger is better for the control: logs of a ratio, signs flipped for
    a lower-is-better endpoint (a speed, a loss)."""
    values = [float(getattr(row, c)) for c in ("ci_low", "ci_high", "margin_low", "margin_high")]
    if log:
        values = [math.log(v) if v > 0 else math.nan for v in values]
    lo, hi, m_lo, m_hi = values
    return (lo, hi, m_lo, m_hi) if higher_is_better else (-hi, -lo, -m_hi, -m_lo)


def row_word(row, published: str) -> str:
    """`score` of one puzzle row of `comparisons.decide` (its endpoint says its scale)."""
    ep = ENDPOINTS[row.metric]
    return score(published, row.verdict, *toward_better(row, ep.higher_is_better, ep.log))


def replicates(rows: pd.DataFrame, finding: Finding) -> str:
    """A puzzle finding from the rows of its comparisons in every regime: `does not
    replicate` if a row does not; `replicates` if in every regime a row replicates (`in
    one regime` if in some); `is consistent` if every regime has a row consistent with it
    or replicating it; `undecided` otherwise."""
    if rows.empty:
        return "undecided"
    words = rows.assign(word=[row_word(r, finding.published) for r in rows.itertuples()])
    by_regime = words.groupby("regime", sort=True).word.agg(set)
    if any("does not replicate" in ws for ws in by_regime):
        return "does not replicate"
    replicating = [("replicates" in ws) for ws in by_regime]
    if all(replicating):
        return "replicates"
    if any(replicating):
        return "replicates in one regime"
    if all(ws & {"is consistent"} for ws in by_regime):
        return "is consistent"
    return "undecided"


# ---------------------------------------------------------------- sizes

def text_parameters(variant: str) -> int:
    """The variant's parameter count as the text study builds it (the 81-character
    vocabulary), counted on the model."""
    if variant not in VARIANTS:
        raise ValueError(f"variant must be a registered variant, got {variant!r}")
    model = TinyLlama(variant_config(variant, vocab_size=VOCAB_SIZE))
    return sum(p.numel() for p in model.parameters())


def size_note(control: str, reference: str = "llama", text: bool = True) -> str:
    """'' when the two arms have the same parameter count (within 0.5 %), else a sentence:
    'mha has 7.9 % more parameters than llama: size and mechanism are confounded'."""
    if control not in EXPECTED_PARAMETERS:  # a base, not a variant: the same model
        return ""
    count = text_parameters if text else EXPECTED_PARAMETERS.__getitem__
    change = count(control) / count(reference) - 1
    if abs(change) < 0.005:
        return ""
    more = "more" if change > 0 else "fewer"
    return (f"{control} has {abs(change) * 100:.1f} % {more} parameters than {reference}: "
            f"size and mechanism are confounded")


# ---------------------------------------------------------------- text

def text_replication(decisions: pd.DataFrame, results: pd.DataFrame,
                     findings=TEXT_PUBLISHED) -> pd.DataFrame:
    """Each published finding beside the study's verdict on text: the paper, the finding,
    its direction, the study's row (verdict, median difference, interval, margin, seeds,
    seeds lower) from `decisions` (`decide_text` on `results`) or `window_decision`,
    `replicates` (`score`; a loss: lower is better) and `size_note`."""
    rows = []
    for f in findings:
        r = window_decision(results, f.metric) if f.comparison == WINDOWS else text_row(
            decisions, f.comparison, f.metric)
        margin = float(r.margin)
        interval = pd.Series({"ci_low": r.ci_low, "ci_high": r.ci_high, "margin_low": -margin,
                              "margin_high": margin})
        word = score(f.published, r.verdict, *toward_better(interval, higher_is_better=False))
        rows.append({"paper": f.paper, "key": f.key, "finding": f.finding, "comparison": f.comparison,
                     "metric": f.metric, "published": f.published, "verdict": r.verdict,
                     "effect": r.effect, "ci_low": r.ci_low, "ci_high": r.ci_high, "margin": margin,
                     "n": r.n, "control_lower": r.control_lower, "replicates": word,
                     "size_note": "" if f.comparison == WINDOWS else size_note(f.comparison)})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------- our numbers

def seed_values(results: pd.DataFrame, variant: str, task: str, regime: str, column: str = "test_acc",
                step: int | None = None, answer: str = "name", theta: float = 10_000.0) -> pd.Series:
    """One value per seed (indexed by seed) of a row of the study: at the fixed checkpoint
    (the row flagged `final`, 1,200 steps in the study) or at `step`; empty if the
    results lack that row or that step."""
    d = variant_rows(results.drop_duplicates(subset=["run", "step"]), variant, task, regime,
                     answer=answer, rope_theta=theta)
    d = d[d["final"].astype(bool)] if step is None else d[d.step == step]
    return d.set_index("seed")[column].sort_index()


def mean_sd(values: pd.Series) -> str:
    """'0.744 ± 0.312' (mean ± population standard deviation over seeds), '–' if empty."""
    if len(values) == 0:
        return "–"
    return f"{values.mean():.3f} ± {values.std(ddof=0):.3f}"


def _vs(results, a: dict, b: dict, regime: str, column: str = "test_acc", labels=("", "")) -> str:
    """'A 0.550 ± 0.281 vs B 0.744 ± 0.322' for rows a and b of one regime."""
    la, lb = (f"{x} " if x else "" for x in labels)
    return (f"{la}{mean_sd(seed_values(results, regime=regime, column=column, **a))} vs "
            f"{lb}{mean_sd(seed_values(results, regime=regime, column=column, **b))}")


def paired_below(results: pd.DataFrame, a: dict, b: dict, regime: str,
                 column: str = "test_acc") -> tuple[int, int]:
    """On how many of the shared seeds row `a` lands strictly below row `b` (k, n)."""
    x = seed_values(results, regime=regime, column=column, **a)
    y = seed_values(results, regime=regime, column=column, **b)
    shared = x.index.intersection(y.index)
    return int((x[shared] < y[shared]).sum()), len(shared)


def paired_mean_difference(results: pd.DataFrame, a: dict, b: dict, regime: str,
                           column: str = "test_acc") -> float:
    """Mean over shared seeds of a − b (NaN without shared seeds): a description, not a test."""
    x = seed_values(results, regime=regime, column=column, **a)
    y = seed_values(results, regime=regime, column=column, **b)
    shared = x.index.intersection(y.index)
    return float((x[shared] - y[shared]).mean()) if len(shared) else math.nan


def _signed(x: float) -> str:
    """+0.012 / −0.045 (a true minus sign), '–' for NaN."""
    return "–" if math.isnan(x) else signed_number(x, 3, plus=True)


def _regimes(results: pd.DataFrame, task: str, variant: str = "llama") -> list[str]:
    d = results[(results.task == task) & (results.variant == variant)]
    return [r for r in REGIMES if r in set(d.regime)]


def our_numbers(results: pd.DataFrame, key: str) -> str:
    """The study's numbers beside a finding's published ones, per regime, same format."""
    llama, abs_pos = {"variant": "llama", "task": "recall"}, {"variant": "abs_pos", "task": "recall"}
    parts = []
    if key == "a":
        for r in _regimes(results, "addition"):
            parts.append(f"{r}: " + _vs(results, {"variant": "abs_pos", "task": "addition"},
                                        {"variant": "llama", "task": "addition"}, r,
                                        labels=("abs_pos", "llama")))
    elif key == "b":
        for r in _regimes(results, "recall"):
            twelve = _vs(results, llama, abs_pos, r, "test_acc_12", ("llama", "abs_pos"))
            parts.append(f"{r}: 12 pairs: {twelve}; 8 pairs: {_vs(results, llama, abs_pos, r, 'test_acc_8')}")
    elif key == "c":
        gelu = {"variant": "gelu_mlp", "task": "recall"}
        for r in _regimes(results, "recall", "gelu_mlp"):
            at300 = seed_values(results, regime=r, step=300, **gelu)
            first = f"{mean_sd(at300)} at 300 steps, " if len(at300) else ""
            parts.append(f"{r}: {first}{mean_sd(seed_values(results, regime=r, **gelu))} at the checkpoint")
    elif key.startswith("d"):
        theta = 10.0 if key == "d base 10" else 1_000_000.0
        ctl = {**llama, "theta": theta}
        for r in sorted(set(results[results.measurement == "sweep"].regime)):
            k, n = paired_below(results, ctl, llama, r)
            parts.append(f"{r}: {_vs(results, ctl, llama, r, labels=(f'base {theta:,.0f}', 'base 10,000'))}; "
                         f"below on {k} of {n} seeds")
    elif key == "e copy":
        for r in sorted(set(results[results.measurement == "alphabet"].regime)):
            copy = {**llama, "answer": "copy"}
            parts.append(f"{r}: {_vs(results, copy, llama, r, labels=('copy', 'name'))}")
    elif key == "e untied":
        for r in sorted(set(results[results.measurement == "alphabet"].regime)):
            d = paired_mean_difference(results, {"variant": "untied", "task": "recall", "answer": "copy"},
                                       {**llama, "answer": "copy"}, r)
            parts.append(f"{r}: untied − llama, copy answers {_signed(d)} (mean over seeds)")
    else:
        raise ValueError(f"unknown finding {key!r}; the findings are {[f.key for f in FINDINGS]}")
    return "; ".join(parts) if parts else "–"


def published_text(key: str) -> str:
    """A finding's published numbers in one cell of the table."""
    if key == "a":
        return f"abs_pos {A_ABS_POS_ADDITION.text()} vs llama {A_LLAMA_ADDITION.text()}"
    if key == "b":
        return (f"12 pairs: llama {B_LLAMA_12.text()} vs abs_pos {B_ABS_POS_12.text()}; "
                f"8 pairs: {B_LLAMA_8.text()} vs {B_ABS_POS_8.text()}")
    if key == "c":
        return f"{C_GELU_300.text()} at 300 steps, {C_GELU_1200.text()} at 1,200"
    if key == "d base 10":
        return f"below on {D_BASE_10_BELOW.text()}"
    if key == "d base 1,000,000":
        return "no lead (no number published)"
    if key == "e copy":
        return f"copy {E_COPY.text()} vs name {E_NAME.text()} (1 seed)"
    if key == "e untied":
        return f"untied − tied, copy answers {E_UNTIED_COPY.text()} (1 seed)"
    raise ValueError(f"unknown finding {key!r}; the findings are {[f.key for f in FINDINGS]}")


def _verdict_text(rows: pd.DataFrame, finding: Finding) -> tuple[str, str]:
    """The finding's tests ('abs_pos vs llama: speed, accuracy at 1,200 steps') and their
    verdicts per regime, in the order of the tests."""
    if rows.empty:
        return finding.no_test or "no comparison of the study tests it", "–"
    by_comparison: dict[str, list[str]] = {}
    for t in finding.tests:
        own = rows[(rows.control == t.control) & (rows.metric == t.metric)]
        if len(own):
            by_comparison.setdefault(f"{t.control} vs {own.reference.iloc[0]}", []).append(
                METRIC_TITLES.get(t.metric, t.metric))
    tests = [f"{c}: {', '.join(metrics)}" for c, metrics in by_comparison.items()]
    verdicts = [f"{regime}: " + ", ".join(g.verdict) for regime, g in rows.groupby("regime", sort=True)]
    return "; ".join(tests), "; ".join(verdicts)


def replication_table(results: pd.DataFrame, v: pd.DataFrame) -> pd.DataFrame:
    """One row per published finding: the published number, ours (per regime), the study's
    test(s), their verdicts per regime (in the order of the tests), and whether it
    replicates. `v` is `comparisons.decide(results)` of the whole study."""
    out = []
    for f in FINDINGS:
        rows = finding_rows(v, f)
        test, verdicts = _verdict_text(rows, f)
        out.append({"finding": f"({f.key})", "published claim": f.claim,
                    f"published ({SEEDS} seeds, {STEPS:,} steps)": published_text(f.key),
                    "this study (mean ± sd over seeds)": our_numbers(results, f.key),
                    "test": test, "verdicts": verdicts, "replicates?": replicates(rows, f)})
    return pd.DataFrame(out).set_index("finding")


__all__ = ["STUDY", "YEAR", "REPOSITORY", "CITATION", "SEEDS", "STEPS", "LETTERS", "Published",
           "PUBLISHED", "VerdictRef", "Finding", "FINDINGS", "FINDING", "published_numbers", "finding_rows",
           "replicates", "score", "toward_better", "row_word", "size_note", "text_parameters",
           "text_replication", "DIRECTIONS", "WORDS", "seed_values", "mean_sd", "paired_below",
           "paired_mean_difference", "our_numbers", "published_text", "replication_table"]
