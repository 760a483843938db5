"""The study's decisions in words and tables: what a chapter reads and writes of
`comparisons.decide`.

- `chapter_decisions`: (results, runs, decisions) of a chapter, with every committed seed;
- `decision_table`: one formatted row per comparison, with n, why it stopped, the effect
  and its interval (speed as a ratio ×0.34 [0.18, 0.57], accuracy as a gap in points with
  a real minus sign), the margin, Holm p, P(better) with its interval and, for an
  undecided row, the seeds that would give it 80 % power; `decision_counts`;
- `text_decision_table`, `text_rate_table`, `text_replication_table`: the text study's
  decisions, its learning-rate check and the published findings it tests, as tables;
- `what_moved`: the registered analysis against the corrected one, row by row;
  `branch_table`: the resampling validation of both, per branch of the design;
- `decision_effect_text`, `solved_text`, `margin_text`, `row_label`: one row's words, as the prose and
  the figures (`plotting.decisions`) write them; `row_facts` and `verdict_text`: one row's
  numbers and verdict for a sentence a chapter writes and the claim beside it;
- `arm_values`, `paired_values`, `difference_sd`: one comparison's values seed by seed;
  `worked_row`: the row the methods appendix works through by hand; `seed_strip_rows`: the
  rows the results chapter draws seed by seed; `stays_open`, `interval_widths`: what an
  interval leaves open and how wide the intervals are;
- `chapter_ledger`, `chapter_ledgers`: each mechanism chapter's rows (`CHAPTER_CONTROLS`),
  listed whole for the results chapter.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..study import ALPHABET_VARIANTS, MEASUREMENTS, THETAS, chapter_results, every_seed
from . import comparisons, sequential, stats
from .comparisons import ENDPOINTS, variant_rows
from .decision_cache import decided
from .report import pct, signed_number
from .text_comparisons import WINDOWS

METRIC_TITLES = {"speed": "speed (time to solve, ratio)", "length_8": "accuracy at 8 pairs",
                 "length_12": "accuracy at 12 pairs", "test_acc@1200": "accuracy at 1,200 steps"}
MEASUREMENT_TITLES = {"matrix": "each control vs llama", "length": "each control vs llama",
                      "sweep": "RoPE base vs 10,000", "alphabet": "copy vs name answers"}
SHORT_TITLES = {"speed": "speed", "length_8": "8 pairs", "length_12": "12 pairs",
                "test_acc@1200": "1,200 steps"}
PENDING = "added seeds so far"


# ---------------------------------------------------------------- what a chapter reads

def chapter_decisions(seeds, steps=None, fresh: bool = False):
    """(results, runs, decisions) of a chapter that shows the study's decisions.

    The committed study is read with every seed it holds, the added ones included, when a
    chapter asks for the default seeds (the first ten): the rows waiting for added seeds say
    how many are in. Other seeds, or fresh=True (a reader's own runs, trained through the
    study runner), are read as asked. `runs` is `comparisons.runs_table`, one row per run."""
    seeds = every_seed(seeds, fresh)
    results = chapter_results(list(MEASUREMENTS), fresh=fresh, seeds=seeds, steps=steps, regime=None)
    # every chapter asks for the same frame: computed once per code and data (decision_cache)
    return results, comparisons.runs_table(results), decided(results, comparisons.decide, "decide()")


# ---------------------------------------------------------------- words and numbers

def signed(x: float, digits: int = 1) -> str:
    """A signed number with a real minus sign: −12.5, +3.0, 0.0; a dash when there is none."""
    if x is None or not np.isfinite(x):
        return "–"
    return signed_number(x, digits, plus=True)


def is_ratio(metric: str) -> bool:
    return metric == "speed"


TIED_END = "ties"
"""What an interval shows for an end that tied pairs alone put at no difference."""
BOUND_SIGNS = {"lower": "≥", "upper": "≤"}


def _end(row, which: str, text: str) -> str:
    return TIED_END if bool(getattr(row, f"ci_{which}_ties", False)) else text


def decision_effect_text(row) -> str:
    """The effect and its interval: ×0.34 [0.18, 0.57] for speed, −12.5 [−20.0, −3.0]
    points for accuracy; a dash when the row has none (a question nobody learns). A ratio
    where one arm never solves is a bound (≥×3.53: the arm at the cap would take longer
    still); an end that tied pairs alone put at no difference reads `ties`, not a number."""
    if not np.isfinite(row.effect):
        return "–"
    return f"{_effect(row)} {_interval(row)}"


def _effect(row) -> str:
    if is_ratio(row.metric):
        return f"{BOUND_SIGNS.get(str(getattr(row, 'bound', '') or ''), '')}×{row.effect:.2f}"
    return signed(100 * row.effect)


def _interval(row) -> str:
    if is_ratio(row.metric):
        lo, hi = _end(row, "low", f"{row.ci_low:.2f}"), _end(row, "high", f"{row.ci_high:.2f}")
    else:
        lo, hi = _end(row, "low", signed(100 * row.ci_low)), _end(row, "high", signed(100 * row.ci_high))
    return f"[{lo}, {hi}]"


def verdict_text(row) -> str:
    """A row's verdict as the tables print it and a claim cell checks it: `worse`, or
    `equivalent (post hoc)` for a decision only the corrected analysis makes."""
    return f"{row.verdict} (post hoc)" if bool(getattr(row, "post_hoc", False)) else str(row.verdict)


def row_facts(row, prefix: str) -> dict[str, str]:
    """One decision row's numbers as an author's sentence glues them, each under
    `prefix`: `_n` the seeds; `_effect` the median ratio of steps (×1.34, ≥×4.81 for a
    bound) or the gap in accuracy points (−7.5); `_interval` its interval ([0.95, 2.10],
    [−20.5, +5.0], `ties` for an end set by ties); on a speed row `_ref` and `_ctl`, how
    many of the `_n` seeds each arm solved, and on an accuracy row `_gap`, the gap's size
    without its sign (7.5), for "7.5 points below". The sentence's words are the author's;
    a claim cell beside it asserts the verdict and the sign they state."""
    if not np.isfinite(row.effect):  # no test: both arms at chance, or too few seeds
        facts = dict.fromkeys(("effect", "interval", "ref", "ctl") if is_ratio(row.metric)
                              else ("effect", "interval", "gap"), "–")
        return {f"{prefix}_{k}": v for k, v in ({"n": _count(row.n)} | facts).items()}
    facts = {"n": _count(row.n), "effect": _effect(row), "interval": _interval(row)}
    if is_ratio(row.metric):
        facts |= {"ref": _count(row.reference_solved), "ctl": _count(row.control_solved)}
    else:
        facts["gap"] = signed_number(abs(100 * row.effect), 1)
    return {f"{prefix}_{k}": v for k, v in facts.items()}


def _count(x) -> str:
    return f"{int(x)}" if np.isfinite(x) else "0"


def solved_text(row) -> str:
    """Solved k of n for both arms of a speed row (reference first): 32/40 vs 0/40; a dash
    for accuracy rows."""
    k_r, k_c = getattr(row, "reference_solved", math.nan), getattr(row, "control_solved", math.nan)
    if not (is_ratio(row.metric) and np.isfinite(k_r) and np.isfinite(k_c)):
        return "–"
    n = int(row.n)
    return f"{int(k_r)}/{n} vs {int(k_c)}/{n}"


def margin_text(row) -> str:
    if is_ratio(row.metric):
        return f"{row.margin_low:.2g}–{row.margin_high:.3g}"
    return f"±{100 * row.margin_high:.0f}"


def _value_text(x: float, metric: str) -> str:
    """A row's value: geometric-mean steps for speed (thousands separated), else a percentage."""
    if not np.isfinite(x):
        return "–"
    return f"{x:,.0f}" if is_ratio(metric) else pct(x)


def _p_text(p: float) -> str:
    if p is None or not np.isfinite(p):
        return "–"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def prob_text(row) -> str:
    if not np.isfinite(row.prob_better):
        return "–"
    return f"{row.prob_better:.2f} [{row.prob_better_low:.2f}, {row.prob_better_high:.2f}]"


def seeds_text(x: float) -> str:
    return f"{x:,.0f}" if x is not None and np.isfinite(x) else "–"


def row_label(row) -> str:
    """A comparison's short name: the control, and task and regime where they vary."""
    if row.measurement == "sweep":
        return "base " + row.control.removeprefix("rope_theta=")
    if row.measurement == "alphabet":
        return row.comparison
    control = "every control" if row.verdict == "not learned" else row.control
    if row.measurement == "matrix":
        return f"{control}, {row.task}, {row.regime}"
    return f"{control}, {row.regime}"


def is_pending(stopped: str) -> bool:
    return PENDING in str(stopped)


def decision_table(decisions: pd.DataFrame, metrics=None, measurements=None) -> pd.DataFrame:
    """One formatted row per comparison of `decisions` (the frame of `comparisons.decide`):
    rows of the given metrics (endpoint names) and measurements, in their order."""
    d = decisions
    if metrics is not None:
        d = d[d.metric.isin(metrics)]
    if measurements is not None:
        d = d[d.measurement.isin(measurements)]
    rows = []
    for r in d.itertuples():
        rows.append({
            "measurement": r.measurement, "endpoint": r.metric, "comparison": row_label(r),
            "n": int(r.n), "solved (ref vs control)": solved_text(r),
            "reference": _value_text(r.reference_value, r.metric),
            "control": _value_text(r.control_value, r.metric),
            "effect [interval]": decision_effect_text(r), "margin": margin_text(r),
            "Holm p": _p_text(r.p_holm),
            "P(better) [interval]": prob_text(r),
            "verdict": verdict_text(r),
            "why it stopped": r.stopped,
            "seeds needed": seeds_text(r.seeds_needed)})
    cols = ["measurement", "endpoint", "comparison", *OUTCOME, *TEST]
    out = pd.DataFrame(rows, columns=cols)
    return out.set_index(["measurement", "endpoint", "comparison"])


def chapter_ledger(decisions: pd.DataFrame, controls) -> pd.DataFrame:
    """The rows a mechanism chapter sums up in one paragraph, listed whole for the results
    chapter: each control's comparisons on every endpoint and regime (seeds, solves, the
    effect with its interval and the verdict), with the registered analysis's verdict
    where the corrected one differs (a decision withdrawn, or one made only post hoc);
    '' where they agree."""
    d = decisions[decisions.control.isin(list(controls))]
    if d.empty:
        raise ValueError(f"controls: no comparison of {list(controls)} in the decisions")
    # the endpoint and the label say the measurement; each arm's own value is in the tables above
    shown = [c for c in OUTCOME if c not in ("reference", "control")]
    table = decision_table(d)[shown].droplevel("measurement")
    table.index = table.index.set_levels(table.index.levels[0].map(lambda m: SHORT_TITLES.get(m, m)),
                                         level="endpoint")
    registered = d.get("registered_verdict", d.verdict).astype(str).to_numpy()
    return table.rename(columns={"solved (ref vs control)": "solved"}).assign(
        registered=[r if r != v else "" for r, v in zip(registered, d.verdict.astype(str))])


CHAPTER_CONTROLS = {
    "norm": ("layernorm", "postnorm", "bias"), "rope": ("abs_pos",), "swiglu": ("gelu_mlp",),
    "gqa": ("mha", "mqa"),
    "sweep": tuple(f"rope_theta={t:,.0f}" for t in THETAS if t != comparisons.SWEEP_REFERENCE_THETA),
    "alphabet": tuple(f"{v} copy" for v in ALPHABET_VARIANTS)}
"""The controls each mechanism chapter sums up in one paragraph, by chapter in book order:
the rows the results chapter lists for it (its ledger), named as `comparisons.decide` names them."""


def chapter_ledgers(decisions: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """`chapter_ledger` of every chapter of CHAPTER_CONTROLS, in its order; a chapter none
    of whose controls the decisions hold (a reader's own short run may lack some) is left out."""
    return {name: chapter_ledger(decisions, controls) for name, controls in CHAPTER_CONTROLS.items()
            if decisions.control.isin(controls).any()}


OUTCOME = ["n", "solved (ref vs control)", "reference", "control", "effect [interval]", "verdict"]
"""The columns of `decision_table` that say what the runs did and what was decided."""
TEST = ["margin", "Holm p", "P(better) [interval]", "why it stopped", "seeds needed"]
"""The columns that say how it was decided; with OUTCOME the two halves a page prints
one under the other, since the whole row is wider than the text column."""


def text_decision_table(decisions: pd.DataFrame, metric: str = "loss_end") -> pd.DataFrame:
    """`text_comparisons.decide_text` on one endpoint as a reader reads it: per comparison
    the seeds, both arms' mean loss in bits per character, the median paired difference
    in nats per character (Δ; negative: the control's loss is lower) and its interval, on
    how many seeds the control is lower, and the verdict."""
    rows = []
    for r in decisions[decisions.metric == metric].itertuples():
        interval = "–" if np.isnan(r.ci_low) else f"[{signed(r.ci_low, 3)}, {signed(r.ci_high, 3)}]"
        rows.append({"comparison": r.comparison, "seeds": r.n,
                     "ref. nats": f"{r.reference_value:.3f}",
                     "control nats": f"{r.control_value:.3f}",
                     "Δ nats": signed(r.effect, 3), "interval": interval,
                     "lower on": f"{r.control_lower} of {r.n}", "verdict": r.verdict})
    return pd.DataFrame(rows).set_index("comparison")


TEXT_METRICS = {"loss_end": "loss at the end", "loss_half": "loss at half the budget",
                "loss_2x": "loss at 2× the window", "loss_4x": "loss at 4× the window"}


def text_finding_words(row) -> str:
    """The study's side of one `replication.text_replication` row, as a reader reads it:
    'worse: Δ +0.102 [+0.090, +0.115] nats, lower on 0 of 10', 'pending: Δ −0.005 so far, ...'."""
    so_far = " so far" if row.verdict == "pending" else ""
    low, high = getattr(row, "ci_low", np.nan), getattr(row, "ci_high", np.nan)
    interval = "" if np.isnan(low) or np.isnan(high) else f" [{signed(low, 3)}, {signed(high, 3)}]"
    return (f"{row.verdict}: Δ {signed(row.effect, 3)}{interval} nats{so_far}, "
            f"lower on {row.control_lower:.0f} of {row.n:.0f}")


def text_replication_table(replication: pd.DataFrame) -> pd.DataFrame:
    """`replication.text_replication` as a table: per published finding, the paper, the
    finding, the study's row it is tested on, the study's verdict on text with its median
    difference and interval (control − reference, nats per character) and seeds, whether
    it replicates, and a size confound where the arms differ in size."""
    rows = [{"paper": r.paper, "published finding": r.finding,
             "tested on": (r.comparison if r.comparison == WINDOWS
                           else f"{r.comparison} against llama, {TEXT_METRICS[r.metric]}"),
             "on text (nats per character)": text_finding_words(r),
             "replicates": r.replicates + (f"; {r.size_note}" if getattr(r, "size_note", "") else "")}
            for r in replication.itertuples()]
    return pd.DataFrame(rows).set_index("paper")


def text_rate_table(rates: pd.DataFrame, decisions: pd.DataFrame) -> pd.DataFrame:
    """`text_comparisons.learning_rate_table` beside the verdicts at the common rate: per
    comparison the arm's best rate (× the common one), the difference from the reference
    (control − reference, nats per character, the mean over the check's seeds) at the
    common rate and with each arm at its own best rate, whether the sign holds, and the
    verdict of `decisions` at the common rate."""
    verdicts = decisions[decisions.metric == "loss_end"].set_index("comparison").verdict
    return pd.DataFrame({"best rate": [f"×{x:g}" for x in rates["best rate"]],
                         "Δ at ×1": [signed(x, 3) for x in rates["difference at ×1"]],
                         "Δ at best rates": [signed(x, 3) for x in rates["difference at best rates"]],
                         "same sign": ["yes" if s else "no" for s in rates.same_sign],
                         "verdict at ×1": [verdicts.get(c, "absent") for c in rates.index]},
                        index=rates.index)


def what_moved(registered: pd.DataFrame, corrected: pd.DataFrame) -> pd.DataFrame:
    """The registered-vs-corrected table: each row whose verdict the correction changes, by
    its label, with its endpoint's short title in a column (one index level, so the page
    draws no spanning cells and the table fits), both analyses' effect [interval] and
    verdict, and how it moved: `withdrawn` (a
    registered decision or equivalence the corrected analysis does not keep), `post hoc`
    (a decision only the corrected analysis makes; not in the headline counts), or
    `relabelled` (neither: an undecided row now saying why)."""
    key = ["measurement", "comparison", "task", "regime", "metric"]
    both = registered.merge(corrected, on=key, suffixes=("_r", "_c"))
    rows = []
    for r in both[both.verdict_r != both.verdict_c].itertuples():
        was, now = _side(r, "_r"), _side(r, "_c")
        rows.append({"endpoint": SHORT_TITLES[r.metric], "comparison": row_label(now),
                     "n": int(r.n_c), "registered": decision_effect_text(was),
                     "registered verdict": r.verdict_r,
                     "corrected": decision_effect_text(now), "corrected verdict": r.verdict_c,
                     "moved": _how_moved(r.verdict_r, r.verdict_c)})
    cols = ["comparison", "endpoint", "n", "registered", "registered verdict", "corrected",
            "corrected verdict", "moved"]
    return pd.DataFrame(rows, columns=cols).set_index("comparison")


CLAIMS = ("better", "worse", "equivalent")


def _how_moved(was: str, now: str) -> str:
    if now in CLAIMS:
        return "post hoc"
    return "withdrawn" if was in CLAIMS else "relabelled"


def _side(row, suffix: str) -> pd.Series:
    """One analysis's columns of a merged registered/corrected row, unsuffixed."""
    fields = {k[:-len(suffix)]: v for k, v in row._asdict().items() if k.endswith(suffix)}
    shared = {k: v for k, v in row._asdict().items() if not k.endswith(("_r", "_c"))}
    return pd.Series(shared | fields)


def branch_table(record: dict) -> pd.DataFrame:
    """The resampling validation (`benchmarks/sequential_design.py --resample`) as a reader
    prints it: per construction and branch of the two-stage rule, how many resampled
    comparisons took it, the share of their intervals covering the truth, and the false
    decisions it made as a share of all resamples."""
    rows = []
    for name, cells in record["constructions"].items():
        for branch, c in cells.items():
            rows.append({"construction": name.split(" (")[0], "branch": branch, "resamples": f"{c['n']:,}",
                         "coverage": pct(c["covered"] / c["n"]) if c["n"] else "–",
                         "false decisions": f"{100 * c['false'] / record['resamples']:.2f}%"})
    return pd.DataFrame(rows).set_index(["construction", "branch"])


def conditional_cells(record: dict, continued: str = "continued to forty") -> pd.DataFrame:
    """The early-stop cells of a resampling record, each truth apart: a branch's coverage
    pooled over truths can hide a truth it fails. Per construction, stage-one branch (not
    the continued one) and truth: the resamples in the cell, the share of them whose
    interval covers the truth, the false decisions as a share of all that truth's
    resamples (every branch: the rate the level bounds), and whether the truth is a null
    of the construction's estimand (no difference; a skewed mean or median of zero), where
    an early decision is wrong by definition and its interval cannot cover."""
    rows = []
    for name, cells in record["constructions"].items():
        estimand = "median" if "median" in name else "mean"
        totals: dict[str, int] = {}
        for c in cells.values():
            for truth, (n, _, _) in c["by_truth"].items():
                totals[truth] = totals.get(truth, 0) + n
        for branch, c in cells.items():
            if branch == continued:
                continue
            for truth, (n, covered, false) in c["by_truth"].items():
                rows.append({"construction": name.split(" (")[0], "branch": branch, "truth": truth,
                             "null": truth.startswith(("no difference", f"{estimand} zero")),
                             "resamples": n, "coverage": covered / n if n else float("nan"),
                             "false decisions": false / totals[truth]})
    return pd.DataFrame(rows)


def conditional_table(cells: pd.DataFrame) -> pd.DataFrame:
    """`conditional_cells` as a chapter shows it: percentages, a cell with no resample as –,
    a null truth marked."""
    out = cells.copy()
    out["coverage"] = [pct(v) if v == v else "–" for v in cells.coverage]
    out["false decisions"] = [f"{100 * v:.2f}%" for v in cells["false decisions"]]
    out["resamples"] = [f"{n:,}" for n in cells.resamples]
    out["truth"] = [t + (", a null" if null else "") for t, null in zip(cells.truth, cells.null)]
    return out.drop(columns="null").set_index(["construction", "branch", "truth"])


def resample_command(record: dict) -> str:
    """The command that wrote a resampling record, with its own draw count (a record
    written before the command was stored is read from its fields), for a chapter to glue
    rather than type."""
    if "command" in record:
        return record["command"]
    text = " --text" if record.get("text") else ""
    return f"python benchmarks/sequential_design.py --resample {record['draws_per_truth']}{text} --write"


def decision_counts(decisions: pd.DataFrame) -> dict:
    """How many comparisons ended how: decided (better + worse), better, worse,
    equivalent, undecided, at chance, not learned, rarely solved, mostly at chance, and
    undecided rows whose added seeds are still being trained (pending). A post hoc row (a
    decision only the corrected analysis makes) is left out of the headline counts and
    counted apart, as `post hoc`."""
    post_hoc = (decisions.post_hoc.astype(bool) if "post_hoc" in decisions
                else pd.Series(False, index=decisions.index))
    v = decisions.verdict.where(~post_hoc, "post hoc")
    counts = {"total": len(decisions), "better": int((v == "better").sum()),
              "worse": int((v == "worse").sum()), "decided": int(v.isin(["better", "worse"]).sum()),
              "equivalent": int((v == "equivalent").sum())}
    for word, verdict in (("undecided", "undecided"), ("at chance", "both at chance"),
                          ("not learned", "not learned"), ("rarely solved", "rarely solved"),
                          ("mostly at chance", "mostly at chance"), ("post hoc", "post hoc")):
        counts[word] = int((v == verdict).sum())
    counts["pending"] = int(decisions.stopped.map(is_pending).sum())
    return counts


def arm_runs(runs: pd.DataFrame, variant: str, task: str, regime: str) -> pd.DataFrame:
    """One row's runs in `comparisons.runs_table` (a variant on a task and regime at the
    reference's base and answer), each run once: the table lists a run under every
    measurement that uses it."""
    return variant_rows(runs, variant, task, regime).drop_duplicates("run")


def solved_of(runs: pd.DataFrame) -> str:
    """How many of these runs solved within the cap, as the prose says it: '17 of 40'."""
    return f"{int((~runs.censored.astype(bool)).sum())} of {len(runs)}"


def arm_values(runs: pd.DataFrame, arm: tuple, column: str) -> pd.Series:
    """One row's value per seed (indexed by seed) from `comparisons.runs_table`; `arm` is
    a decision's `reference_arm` or `control_arm`: (task, variant, regime, rope_theta, answer).
    A row with no arms (a family no row learns, reported as one row) has no values."""
    if not isinstance(arm, tuple):
        return pd.Series(dtype=float, name=column, index=pd.Index([], name="seed", dtype=int))
    task, variant, regime, theta, answer = arm
    g = variant_rows(runs, variant, task, regime, answer=answer, rope_theta=theta).drop_duplicates("run")
    return g.set_index("seed")[column].sort_index()


def paired_values(runs: pd.DataFrame, row, column: str) -> pd.DataFrame:
    """The reference and control values of one decision row, seed by seed (the seeds both
    rows have; a missing value, such as the solve step of a run that never solved, stays NaN)."""
    ref, ctl = arm_values(runs, row.reference_arm, column), arm_values(runs, row.control_arm, column)
    return pd.concat({"reference": ref, "control": ctl}, axis=1, join="inner")


def worked_row(decisions: pd.DataFrame) -> pd.Series:
    """The row the methods appendix and its correction work through by hand: of the primary
    speed rows decided better or worse, the one with the smallest p; on a reader's short
    run that decides none, the primary row with the smallest p (the first, with no p)."""
    primary = decisions[decisions.primary.astype(bool)]
    pick = primary[(primary.metric == "speed") & primary.verdict.isin(["better", "worse"])]
    rows = pick if len(pick) else primary[primary.p.notna()] if primary.p.notna().any() else primary
    return rows.sort_values("p", kind="stable").iloc[0]


def worked_units(runs: pd.DataFrame, row, seeds=None) -> pd.Series:
    """The worked row's per-seed speed differences as the tests count them: the log ratio
    of the control's capped time to the reference's, in `comparisons.SPEED.unit`s, rounded
    to whole units; on `seeds` (the first ten by default), indexed by seed."""
    pair = paired_values(runs, row, "time_capped")
    pair = pair[pair.index.isin(sequential.FIRST_SEEDS if seeds is None else seeds)]
    return np.round(np.log(pair.control / pair.reference) / comparisons.SPEED.unit)

def seed_strip_rows(decisions: pd.DataFrame) -> list[pd.Series]:
    """The comparisons the results chapter draws seed by seed, picked by rule among the
    primary rows: the decided speed row and the decided generalisation row with the
    smallest p, the equivalent row (the first by p) and the undecided row with the smallest
    p; a kind the decisions lack is left out (none at all: the first primary row)."""
    primary = decisions[decisions.primary.astype(bool)]
    decided = primary.verdict.isin(["better", "worse"])
    kinds = [primary[(primary.metric == "speed") & decided], primary[(primary.metric != "speed") & decided],
             primary[primary.verdict == "equivalent"], primary[primary.verdict == "undecided"]]
    picked = [rows.sort_values("p", kind="stable").iloc[0] for rows in kinds if len(rows)]
    return picked or [primary.iloc[0]]


def stays_open(rows: pd.DataFrame) -> pd.Series:
    """Whether each row's interval leaves the comparison open by itself: it reaches past the
    margin on at least one side, or an end sits at no difference only through tied pairs.
    Every undecided row should; a decided or equivalent row does not."""
    return ((rows.ci_low < rows.margin_low) | (rows.ci_high > rows.margin_high)
            | rows.ci_low_ties.astype(bool) | rows.ci_high_ties.astype(bool))


def interval_widths(decisions: pd.DataFrame) -> pd.Series:
    """The median width of the primary rows' intervals, by endpoint kind and seeds: indexed
    by (speed, n); a speed interval's width is the log of the ratio of its ends, an
    accuracy interval's the difference of its ends. Rows with no interval, or both at
    chance, are left out."""
    primary = decisions[decisions.primary.astype(bool)]
    shown = primary[primary.ci_low.notna() & (primary.verdict != "both at chance")]
    low, high = shown.ci_low.astype(float), shown.ci_high.astype(float)
    is_speed = shown.metric == "speed"
    log_ratio = np.log((high / low).where(is_speed, 1.0))  # a ratio's width on the log scale
    return (shown.assign(width=log_ratio.where(is_speed, high - low), speed=is_speed)
            .groupby(["speed", "n"]).width.median())


def difference_sd(runs: pd.DataFrame, row, seeds) -> float:
    """Standard deviation of one comparison's per-seed differences on `seeds`, in the
    endpoint's scale (log ratio for speed, accuracy otherwise); NaN with fewer than two."""
    ep = ENDPOINTS[row.metric]
    p = paired_values(runs, row, ep.column)
    p = p[p.index.isin(seeds)]
    diff = np.log(p.control / p.reference) if ep.log else p.control - p.reference
    return float(np.std(diff, ddof=1)) if len(diff) > 1 else math.nan



def endpoint_spread(runs: pd.DataFrame, primary: pd.DataFrame, seeds) -> pd.Series:
    """The median spread of per-seed differences (`difference_sd` on `seeds`) over the
    primary comparisons not at chance and not unlearned: accuracy at index False, speed
    (log ratio) at index True."""
    live = primary[~primary.verdict.isin(["both at chance", "not learned"])]
    spread = [difference_sd(runs, r, seeds) for r in live.itertuples()]
    return live.assign(sd=spread).groupby(live.metric == "speed").sd.median().reindex([False, True])


def tost_power_table(cases: dict[str, tuple[float, float]], seed_counts=(10, 40)) -> pd.DataFrame:
    """`stats.tost_power` with no true difference, one row per case (label -> (margin, sd)),
    one column per number of seeds."""
    return pd.DataFrame({f"power at {n} seeds": {k: stats.tost_power(margin, sd, n)
                                                 for k, (margin, sd) in cases.items()}
                         for n in seed_counts})

__all__ = ["chapter_decisions", "decision_table", "chapter_ledger", "chapter_ledgers", "CHAPTER_CONTROLS",
           "OUTCOME", "TEST", "decision_counts", "what_moved",
           "branch_table", "conditional_cells", "conditional_table",
           "decision_effect_text", "solved_text", "row_facts", "verdict_text",
           "margin_text", "signed", "is_ratio", "row_label", "is_pending",
           "arm_runs", "solved_of", "arm_values", "paired_values", "worked_row", "worked_units",
           "seed_strip_rows",
           "stays_open", "interval_widths", "difference_sd", "endpoint_spread", "tost_power_table",
           "METRIC_TITLES", "MEASUREMENT_TITLES", "SHORT_TITLES"]


# ---------------------------------------------------------------- censored times and the study as one

def _ratio_text(ratio: float, low: float, high: float) -> str:
    return f"×{ratio:.2f} [{low:.2f}, {high:.2f}]"


def censored_tables(rows: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """`solve_times.censored_verdicts` as the results chapter shows it, in two tables that
    fit the page: per speed row (1) the solves (reference first), McNemar's p and reading,
    the log-rank's; (2) the restricted-mean ratio with its interval and reading, the
    design's capped-time verdict and the one the book reads (`speed verdict`, by the
    construction the resampling check validates)."""
    index = pd.Index([row_label(r) for r in rows.itertuples()], name="comparison")
    solves = pd.DataFrame({
        "n": rows.n.astype(int).values,
        "solved": [f"{int(r.reference_solved)} / {int(r.control_solved)}" for r in rows.itertuples()],
        "McNemar p": rows.p_mcnemar.map(lambda p: f"{p:.3g}").values, "solves": rows.solves_verdict.values,
        "log-rank p": rows.p_logrank.map(lambda p: f"{p:.3g}").values,
        "curves": rows.logrank_verdict.values}, index=index)
    times = pd.DataFrame({
        "restricted mean": [_ratio_text(r.rmst_ratio, r.rmst_low, r.rmst_high) for r in rows.itertuples()],
        "its verdict": rows.rmst_verdict.values, "capped time": rows.verdict.values,
        "speed verdict": rows.censored_verdict.values}, index=index)
    return solves, times


def stage_one_table(moves: pd.DataFrame) -> pd.DataFrame:
    """`comparisons.stage_one_moves` as the methods chapter shows it."""
    label = [f"{r.comparison}, {r.task}, {r.regime}" for r in moves.itertuples()]
    out = moves.assign(comparison=label, endpoint=moves.metric.map(SHORT_TITLES))
    cols = {"endpoint": "endpoint", "n_now": "n", "verdict_before": "verdict before",
            "verdict_now": "verdict now", "seeds": "added seeds"}
    return out.set_index("comparison")[list(cols)].rename(columns=cols)


def margin_table(moved: pd.DataFrame) -> pd.DataFrame:
    """`study_wide.margin_sensitivity` as the methods chapter shows it: each row whose verdict
    changes, the margin scale, and its verdict at the study's margin and at the scaled one."""
    endpoint = moved.metric.map(lambda m: SHORT_TITLES.get(m, "held-out loss"))
    out = moved.assign(endpoint=endpoint, margin=moved.scale.map(lambda s: f"×{s:g}"))
    cols = {"study": "study", "family": "family", "endpoint": "endpoint", "margin": "margin",
            "verdict": "verdict", "verdict_scaled": "at the scaled margin"}
    return out.set_index("comparison")[list(cols)].rename(columns=cols)


def two_text_analyses_table(both: pd.DataFrame) -> pd.DataFrame:
    """`text_comparisons.registered_and_corrected` on the primary rows as a reader reads
    them: each analysis's seeds, centre (the registered one's mean, the corrected one's
    median; nats per character) and verdict, and what the correction moved."""
    rows = []
    for r in both[both.primary.astype(bool)].itertuples():
        rows.append({"comparison": r.comparison,
                     "registered: seeds": r.n_registered, "mean Δ": signed(r.effect_registered, 4),
                     "registered verdict": r.verdict_registered,
                     "corrected: seeds": r.n_corrected, "median Δ": signed(r.effect_corrected, 4),
                     "corrected verdict": r.verdict_corrected})
    return pd.DataFrame(rows).set_index("comparison")
