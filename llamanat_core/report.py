"""Shared tables, comparisons and generated sentences for every chapter.

Chapters hold narrative; everything they compute from the study goes through here, so
a table or a ranking sentence means the same thing on every page. Figures are drawn by
`llamanat_core.plotting`.

Conventions: mean and *population* standard deviation over seeds, every seed's value
shown, paired seed-by-seed differences where rows share initialisation and data. A gap
is called decided only when every seed moves the same way AND the mean gap is larger
than the larger of the two rows' standard deviations (`Comparison.max_seed_std`);
otherwise the sentence says it is inside the seed spread. Accuracy tables state the
chance floor (`chance`): the accuracy of a model that has learnt the answer's format
but not the task.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

METRIC_NAMES = {
    "test_acc": "test accuracy",
    "test_acc_8": "accuracy at 8 pairs",
    "test_acc_12": "accuracy at 12 pairs",
    "val_loss": "validation loss",
    "final_loss": "final training loss",
}


# ---------------------------------------------------------------- formatters
# One name per format, used by every table and sentence below.

def _percent(x: float) -> str:
    """0.715 -> '71.5%'"""
    return f"{100 * x:.1f}%"


def _points(x: float) -> str:
    """A gap in accuracy: 0.05 -> '5.0 points'"""
    return f"{100 * x:.1f} points"


def _signed_points(x: float) -> str:
    """A paired difference in accuracy points: 0.05 -> '+5.0'"""
    return f"{100 * x:+.1f}"


def _plain(x: float) -> str:
    return f"{x:.3f}"


def _signed_plain(x: float) -> str:
    return f"{x:+.3f}"


# ---------------------------------------------------------------- chance floors

ADDITION_CHANCE = 1 / 1000  # the answer is one sum among about a thousand a guess could give


def chance(task: str, pairs: int = 4) -> float:
    """Accuracy of a model that has learnt the answer's format but not the task.

    Recall: the values of an item are distinct, so a model that answers with one of the
    item's `pairs` values, without knowing which, is right 1/pairs of the time (not
    1/16: the item itself narrows the 16 symbols to its own values). Addition: the
    answer is one sum among about a thousand, ≈ 1/1,000."""
    if task == "recall":
        if not isinstance(pairs, int | np.integer) or pairs < 1:
            raise ValueError(f"recall chance needs a positive number of pairs, got {pairs!r}")
        return 1 / int(pairs)
    if task == "addition":
        return ADDITION_CHANCE
    raise ValueError(f"unknown task {task!r}; chance is defined for 'addition' and 'recall'")


def chance_label(x: float) -> str:
    """A chance floor as a fraction for prose and legends: 0.25 -> '1/4', 0.001 -> '1/1,000'."""
    n = round(1 / x)
    if not math.isclose(1 / n, x, rel_tol=1e-9):
        raise ValueError(f"{x!r} is not one chance in a whole number")
    return f"1/{n:,}"


def final(df: pd.DataFrame) -> pd.DataFrame:
    """Rows at the last checkpoint of each run."""
    return df[df["final"].astype(bool)].reset_index(drop=True)


def at_step(df: pd.DataFrame, step: int | None) -> pd.DataFrame:
    if step is None:
        return final(df)
    out = df[df.step == step]
    if out.empty:
        raise ValueError(f"no checkpoint at step {step}; have {sorted(df.step.unique())}")
    return out.reset_index(drop=True)


def _group_key(by):
    return [by] if isinstance(by, str) else list(by)


def seed_table(df: pd.DataFrame, by="variant", value: str = "test_acc", step: int | None = None,
               order=None) -> pd.DataFrame:
    """One row per group: mean, population std, n and every seed's value (columns seed 0 ...)."""
    d = at_step(df, step)
    keys = _group_key(by)
    if d.duplicated(keys + ["seed"]).any():
        raise ValueError(f"several rows per ({', '.join(keys)}, seed): filter to one measurement first")
    wide = d.pivot_table(index=keys, columns="seed", values=value, aggfunc="first")
    wide.columns = [f"seed {s}" for s in wide.columns]
    vals = wide.to_numpy(dtype=float)
    table = pd.DataFrame({"mean": np.nanmean(vals, axis=1), "std": np.nanstd(vals, axis=1, ddof=0),
                          "n": np.sum(~np.isnan(vals), axis=1)}, index=wide.index)
    table = pd.concat([table, wide], axis=1)
    if order is not None:
        table = table.reindex([o for o in order if o in table.index])
    return table


def display_table(table: pd.DataFrame, digits: int = 3, percent: bool = False,
                  chance=None) -> pd.DataFrame:
    """Strings for the page: 'mean ± std' then every seed, fixed digits.

    `chance`: the chance floor of an accuracy table, as one number for every row, a dict
    from the first index level to a number (one floor per task), or one number per row;
    it becomes a column 'chance' (a percentage and a fraction, e.g. '25.0% (1/4)')."""
    def fmt(x):
        if x is None or (isinstance(x, float) and math.isnan(x)):
            return "–"
        return _percent(x) if percent else f"{x:.{digits}f}"
    out = pd.DataFrame(index=table.index)
    out["mean ± std"] = [f"{fmt(m)} ± {fmt(s)}" for m, s in zip(table["mean"], table["std"])]
    for c in table.columns:
        if c.startswith("seed "):
            out[c] = [fmt(v) for v in table[c]]
    if chance is not None:
        if isinstance(chance, dict):
            firsts = [i[0] if isinstance(i, tuple) else i for i in table.index]
            floors = [chance[k] for k in firsts]
        elif np.ndim(chance) == 0:
            floors = [float(chance)] * len(table)
        else:
            floors = [float(c) for c in chance]
            if len(floors) != len(table):
                raise ValueError(f"{len(floors)} chance floors for {len(table)} rows")
        out["chance"] = [f"{fmt(c)} ({chance_label(c)})" for c in floors]
    out.index.names = table.index.names
    return out


def thousands(table: pd.DataFrame) -> pd.DataFrame:
    """Integers of a table written with thousands separators (102528 -> '102,528'), for
    tables shown beside formatted prose; other columns are left alone."""
    out = table.copy()
    for c in out.columns:
        if pd.api.types.is_integer_dtype(out[c]) and not pd.api.types.is_bool_dtype(out[c]):
            out[c] = [f"{int(v):,}" for v in out[c]]
    return out


@dataclass(frozen=True)
class Comparison:
    """Row `a` against row `b`, seed by seed."""
    a: str
    b: str
    metric: str
    mean_a: float
    mean_b: float
    std_a: float
    std_b: float
    diffs: tuple  # a - b per seed, in seed order
    seeds: tuple

    @property
    def gap(self) -> float:
        return self.mean_a - self.mean_b

    @property
    def wins(self) -> int:
        return sum(d > 0 for d in self.diffs)

    @property
    def losses(self) -> int:
        return sum(d < 0 for d in self.diffs)

    @property
    def max_seed_std(self) -> float:
        """The larger of the two rows' population standard deviations over seeds: the
        seed spread a decided gap must exceed."""
        return max(self.std_a, self.std_b)

    @property
    def consistent(self) -> bool:
        n = len(self.diffs)
        return n > 0 and (self.wins == n or self.losses == n)

    @property
    def decided(self) -> bool:
        return self.consistent and abs(self.gap) > self.max_seed_std

    def sentence(self, percent: bool = True, label_a: str | None = None,
                 label_b: str | None = None) -> str:
        """A sentence generated from the numbers: flips when the data flip."""
        a, b = label_a or self.a, label_b or self.b
        f = _points if percent else _plain
        g = _percent if percent else _plain
        what = METRIC_NAMES.get(self.metric, self.metric)
        n = len(self.diffs)
        if self.gap == 0 and self.wins == self.losses:
            return f"{a} and {b} reach the same mean {what} ({g(self.mean_a)})."
        hi, lo = (a, b) if self.gap > 0 else (b, a)
        ahead = self.wins if self.gap > 0 else self.losses
        s = (f"{hi} is ahead of {lo} on {what} by {f(abs(self.gap))} "
             f"({g(max(self.mean_a, self.mean_b))} against {g(min(self.mean_a, self.mean_b))}), "
             f"ahead on {ahead} of {n} paired seeds")
        if self.decided:
            return s + "; every seed agrees and the gap exceeds the seed spread."
        if abs(self.gap) <= self.max_seed_std:
            return s + (f"; the gap is inside the seed spread (std up to {f(self.max_seed_std)}), "
                        "so this budget does not separate them.")
        return s + "; the seeds disagree on the direction, so the gap is not decided."


def compare(df: pd.DataFrame, column: str, a, b, value: str = "test_acc",
            step: int | None = None) -> Comparison:
    """Paired comparison of rows where df[column] == a and == b, matched by seed."""
    d = at_step(df, step)
    sa = d[d[column] == a].set_index("seed")[value]
    sb = d[d[column] == b].set_index("seed")[value]
    if sa.index.duplicated().any() or sb.index.duplicated().any():
        raise ValueError(f"several rows per seed for {column}={a!r}/{b!r}: filter first")
    seeds = tuple(sorted(set(sa.index) & set(sb.index)))
    if not seeds:
        raise ValueError(f"no shared seeds between {column}={a!r} and {column}={b!r}")
    va = np.array([sa[s] for s in seeds], dtype=float)
    vb = np.array([sb[s] for s in seeds], dtype=float)
    return Comparison(str(a), str(b), value, float(va.mean()), float(vb.mean()),
                      float(va.std()), float(vb.std()), tuple(float(x) for x in va - vb), seeds)


def paired_table(comparisons: list[Comparison], percent: bool = True) -> pd.DataFrame:
    """One row per comparison: each seed's difference, the mean gap, and the verdict."""
    f = _signed_points if percent else _signed_plain
    rows = []
    for c in comparisons:
        row = {"comparison": f"{c.a} − {c.b}", "mean gap": f(c.gap)}
        row.update({f"seed {s}": f(d) for s, d in zip(c.seeds, c.diffs)})
        row["verdict"] = ("decided" if c.decided else
                          "inside seed spread" if abs(c.gap) <= c.max_seed_std else "seeds disagree")
        rows.append(row)
    return pd.DataFrame(rows).set_index("comparison")


def rank_sentence(table: pd.DataFrame, what: str = "test accuracy", percent: bool = True,
                  higher_is_better: bool = True) -> str:
    """'Ranked by mean test accuracy: a (x), b (y), ...' from a seed_table."""
    t = table.sort_values("mean", ascending=not higher_is_better)
    g = _percent if percent else _plain
    parts = [f"{_label(i)} ({g(m)})" for i, m in zip(t.index, t["mean"])]
    return f"Ranked by mean {what}: " + ", ".join(parts) + "."


def _label(index) -> str:
    return " / ".join(str(i) for i in index) if isinstance(index, tuple) else str(index)


def pct(x: float, digits: int = 1) -> str:
    return f"{100 * float(x):.{digits}f}%"


def glue_all(values: dict) -> None:
    """Glue each value for `{glue:text}` in Markdown, as a plain Python str/int/float."""
    from myst_nb import glue

    for name, value in values.items():
        if isinstance(value, np.generic):
            value = value.item()
        if not isinstance(value, (str, int, float)):
            raise TypeError(f"glue {name!r}: expected str/int/float, got {type(value).__name__}")
        glue(name, value, display=False)


# ---------------------------------------------------------------- orderings across tasks
# Added for the GQA chapter (and any chapter that reads three rows on both tasks):
# whether two tasks order the same rows the same way, generated from the data.

def mean_order(table: pd.DataFrame, percent: bool = True, labels: dict | None = None) -> str:
    """'a (x) > b (y) = c (z)' from a seed_table: rows by mean, highest first."""
    g = _percent if percent else _plain
    t = table.sort_values("mean", ascending=False, kind="stable")
    out, prev = "", None
    for i, m in zip(t.index, t["mean"]):
        name = (labels or {}).get(i, _label(i))
        if prev is not None:
            out += " = " if m == prev else " > "
        out += f"{name} ({g(m)})"
        prev = m
    return out


def orderings_sentence(df: pd.DataFrame, column: str, rows, tasks=("addition", "recall"),
                       value: str = "test_acc", step: int | None = None, percent: bool = True,
                       labels: dict | None = None) -> str:
    """Do two tasks order `rows` the same way? A sentence generated from the data.

    It states each task's order by mean, then: the same order (and how many of the
    pairwise gaps behind it are decided), or which pairs swap places and whether any
    swap is decided on *both* tasks — only then does it say the order depends on the task.
    """
    from itertools import combinations

    if len(tasks) != 2:
        raise ValueError(f"orderings_sentence compares exactly two tasks, got {tasks!r}")
    what = METRIC_NAMES.get(value, value)

    def name(r) -> str:
        return (labels or {}).get(r, str(r))

    def sign(x: float) -> int:
        return (x > 0) - (x < 0)

    per_task = {t: df[df.task == t] for t in tasks}
    orders = {t: mean_order(seed_table(d, column, value, step, order=rows), percent, labels)
              for t, d in per_task.items()}
    cmp = {t: {p: compare(d, column, p[0], p[1], value, step) for p in combinations(rows, 2)}
           for t, d in per_task.items()}
    t1, t2 = tasks
    s = f"By mean {what}, {t1} orders them {orders[t1]}; {t2} orders them {orders[t2]}. "
    pairs = list(cmp[t1])
    flips = [p for p in pairs if sign(cmp[t1][p].gap) * sign(cmp[t2][p].gap) < 0]
    same = all(sign(cmp[t1][p].gap) == sign(cmp[t2][p].gap) for p in pairs)
    flat = [t for t in tasks if all(cmp[t][p].gap == 0 for p in pairs)]
    if len(flat) == 2:
        return s + "Neither task separates the rows: every mean is equal on both."
    if same:
        undecided = sum(not cmp[t][p].decided for t in tasks for p in pairs)
        s += "The two tasks give the same order"
        if undecided:
            return s + (f", but {undecided} of its {2 * len(pairs)} pairwise gaps (both tasks "
                        f"counted) {'is' if undecided == 1 else 'are'} inside the seed spread or "
                        "split by the seeds, so the "
                        "order is not fully decided by this budget.")
        return s + ", and every pairwise gap behind it is decided on both tasks."
    if flat:
        other = t2 if flat[0] == t1 else t1
        flat_task = flat[0][:1].upper() + flat[0][1:]
        return s + (f"{flat_task} does not separate the rows at all (every mean is equal), "
                    f"so only {other} orders them; no pair swaps places.")
    if not flips:
        return s + ("The orders differ only where one task ties rows the other separates; "
                    "no pair swaps places.")
    swapped = ", ".join(f"{name(a)} and {name(b)}" for a, b in flips)
    real = [p for p in flips if cmp[t1][p].decided and cmp[t2][p].decided]
    s += f"The two tasks order them differently: {swapped} swap places. "
    if real:
        both = ", ".join(f"{name(a)} against {name(b)}" for a, b in real)
        return s + (f"For {both} the swap is decided on both tasks (every seed agrees and "
                    "the gap exceeds the seed spread on each), so which is better depends "
                    "on the task.")
    return s + ("No swap is decided on both tasks: on at least one task each swapped gap is "
                "inside the seed spread or split by the seeds, so the data show rows this "
                "budget does not separate, not an order that depends on the task.")


# ---------------------------------------------------------------- tiny numbers in prose
# Added for the norm and RoPE chapters: differences at float-rounding size, glued as text.

_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def sci(x: float, digits: int = 1) -> str:
    """A number for prose in scientific form: '2.4 × 10⁻⁷'; an exact zero is '0'."""
    x = float(x)
    if x == 0 or not math.isfinite(x):
        return "0" if x == 0 else str(x)
    exp = math.floor(math.log10(abs(x)))
    mant = round(x / 10 ** exp, digits)
    if abs(mant) >= 10:
        mant, exp = mant / 10, exp + 1
    return f"{mant:.{digits}f}" + ("" if exp == 0 else f" × 10{str(exp).translate(_SUPERSCRIPT)}")


def range_text(values, digits: int = 2, thousands: bool = False) -> str:
    """The range of some values for prose: 'lo to hi', one number when both round alike,
    '–' when there are none (a reader's short run may leave a group empty). With
    `thousands`, whole numbers with separators ('1,000 to 1,400')."""
    vals = [float(v) for v in values if v == v]  # NaN dropped
    if not vals:
        return "–"
    fmt = (lambda v: f"{v:,.0f}") if thousands else (lambda v: f"{v:.{digits}f}")
    lo, hi = fmt(min(vals)), fmt(max(vals))
    return lo if lo == hi else f"{lo} to {hi}"


# ---------------------------------------------------------------- several comparisons at once
# Added for the sweep and alphabet chapters (and any chapter with a family of paired
# comparisons): which gaps the data decide, in one generated sentence.

def verdict_sentence(comparisons: list[Comparison], what: str | None = None,
                     percent: bool = True) -> str:
    """'On <metric>, k of n gaps are decided: A is above B by x (every seed). Not decided: ...'

    Driven by `Comparison.decided` alone, so a rerun that moves a gap into or out of the
    seed spread changes the sentence.
    """
    if not comparisons:
        raise ValueError("verdict_sentence needs at least one comparison")
    f = (lambda x: _points(abs(x))) if percent else (lambda x: _plain(abs(x)))
    what = what or METRIC_NAMES.get(comparisons[0].metric, comparisons[0].metric)
    decided = [c for c in comparisons if c.decided]
    rest = [c for c in comparisons if not c.decided]
    n = len(comparisons)
    if decided:
        s = (f"On {what}, {len(decided)} of {n} gap{'s' if n > 1 else ''} "
             f"{'is' if len(decided) == 1 else 'are'} decided: ")
        s += "; ".join(f"{c.a} is {'above' if c.gap > 0 else 'below'} {c.b} by {f(c.gap)}, "
                       f"on each of the {len(c.diffs)} paired seeds" for c in decided) + "."
    else:
        s = f"On {what}, " + ("the gap is not decided." if n == 1 else f"none of the {n} gaps is decided.")
    if rest:
        parts = [f"{c.a} against {c.b} ("
                 + ("identical on every seed" if not any(c.diffs) else
                    "inside the seed spread" if abs(c.gap) <= c.max_seed_std else "the seeds disagree")
                 + ")" for c in rest]
        s += " Not decided: " + ", ".join(parts) + "."
    return s
