"""Shared tables, comparisons, generated sentences and figures for every chapter.

Chapters hold narrative; everything they compute from the study goes through here, so
a table, a ranking sentence or a seed plot means the same thing on every page.

Conventions (SPEC §7): mean and *population* standard deviation over seeds, every seed's
value shown, paired seed-by-seed differences where rows share initialisation and data.
A gap is called decided only when every seed moves the same way AND the mean gap is
larger than either row's seed spread; otherwise the sentence says it is inside the spread.
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


def display_table(table: pd.DataFrame, digits: int = 3, percent: bool = False) -> pd.DataFrame:
    """Strings for the page: 'mean ± std' then every seed, fixed digits."""
    def fmt(x):
        if x is None or (isinstance(x, float) and math.isnan(x)):
            return "–"
        return f"{100 * x:.1f}%" if percent else f"{x:.{digits}f}"
    out = pd.DataFrame(index=table.index)
    out["mean ± std"] = [f"{fmt(m)} ± {fmt(s)}" for m, s in zip(table["mean"], table["std"])]
    for c in table.columns:
        if c.startswith("seed "):
            out[c] = [fmt(v) for v in table[c]]
    out.index.names = table.index.names
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
    def spread(self) -> float:
        return max(self.std_a, self.std_b)

    @property
    def consistent(self) -> bool:
        n = len(self.diffs)
        return n > 0 and (self.wins == n or self.losses == n)

    @property
    def decided(self) -> bool:
        return self.consistent and abs(self.gap) > self.spread

    def sentence(self, percent: bool = True, label_a: str | None = None,
                 label_b: str | None = None) -> str:
        """A sentence generated from the numbers: flips when the data flip."""
        a, b = label_a or self.a, label_b or self.b
        f = (lambda x: f"{100 * x:.1f} points") if percent else (lambda x: f"{x:.3f}")
        g = (lambda x: f"{100 * x:.1f}%") if percent else (lambda x: f"{x:.3f}")
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
        if abs(self.gap) <= self.spread:
            return s + (f"; the gap is inside the seed spread (std up to {f(self.spread)}), "
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
    f = (lambda x: f"{100 * x:+.1f}") if percent else (lambda x: f"{x:+.3f}")
    rows = []
    for c in comparisons:
        row = {"comparison": f"{c.a} − {c.b}", "mean gap": f(c.gap)}
        row.update({f"seed {s}": f(d) for s, d in zip(c.seeds, c.diffs)})
        row["verdict"] = ("decided" if c.decided else
                          "inside seed spread" if abs(c.gap) <= c.spread else "seeds disagree")
        rows.append(row)
    return pd.DataFrame(rows).set_index("comparison")


def rank_sentence(table: pd.DataFrame, what: str = "test accuracy", percent: bool = True,
                  higher_is_better: bool = True) -> str:
    """'Ranked by mean test accuracy: a (x), b (y), ...' from a seed_table."""
    t = table.sort_values("mean", ascending=not higher_is_better)
    g = (lambda x: f"{100 * x:.1f}%") if percent else (lambda x: f"{x:.3f}")
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


# ---------------------------------------------------------------- figures

def seed_points(ax, table: pd.DataFrame, percent: bool = True, color="C0", label_rotation=0,
                offset: float = 0.0, label: str | None = None):
    """Each seed as a point, the mean as a bar tick, one x position per row of a seed_table."""
    scale = 100 if percent else 1
    seed_cols = [c for c in table.columns if c.startswith("seed ")]
    x = np.arange(len(table)) + offset
    for i, (_, row) in enumerate(table.iterrows()):
        vals = row[seed_cols].to_numpy(dtype=float) * scale
        jitter = np.linspace(-0.12, 0.12, len(vals))
        ax.scatter(x[i] + jitter, vals, s=18, color=color, alpha=0.75, zorder=3,
                   label=label if i == 0 else None)
        ax.hlines(row["mean"] * scale, x[i] - 0.22, x[i] + 0.22, color=color, lw=2.2, zorder=4)
    ax.set_xticks(np.arange(len(table)))
    ax.set_xticklabels([_label(i) for i in table.index], rotation=label_rotation)
    if percent:
        ax.set_ylabel("accuracy (%)")
        ax.set_ylim(-3, 103)
    return ax


def seed_curves(ax, df: pd.DataFrame, by: str, value: str = "test_acc", order=None,
                percent: bool = True, x: str = "step", colors: dict | None = None):
    """Accuracy against training step: one thin line per seed, a thick line for the mean.

    `x` names another column to plot against (e.g. a depth or a length); `colors` maps a
    group to its colour (default: the style's cycle, in `order`)."""
    scale = 100 if percent else 1
    groups = order or list(dict.fromkeys(df[by]))
    for i, g in enumerate(groups):
        d = df[df[by] == g]
        color = (colors or {}).get(g, f"C{i}")
        for _, s in d.groupby("seed"):
            s = s.sort_values(x)
            ax.plot(s[x], s[value] * scale, color=color, lw=0.8, alpha=0.45)
        m = d.groupby(x)[value].mean() * scale
        ax.plot(m.index, m.values, color=color, lw=2.2, marker="o", ms=4, label=str(g))
    ax.set_xlabel("training step" if x == "step" else x)
    ax.set_ylabel(("" if not percent else "") + METRIC_NAMES.get(value, value) + (" (%)" if percent else ""))
    ax.legend(frameon=False, fontsize=8)
    return ax


def summary_figure(df: pd.DataFrame):
    """The intro's one-screen summary: accuracy at the last checkpoint per variant and task,
    every seed a point."""
    import matplotlib.pyplot as plt

    from .config import MATRIX_VARIANTS
    from .plotting import TASK_COLORS, use_book_style

    use_book_style()
    d = df[df.measurement == "matrix"]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), sharey=True)
    for ax, task in zip(axes, ("addition", "recall")):
        t = seed_table(d[d.task == task], "variant", "test_acc", order=MATRIX_VARIANTS)
        seed_points(ax, t, color=TASK_COLORS[task], label_rotation=30)
        ax.set_title(f"{task}: test accuracy at the last checkpoint")
        ax.axhline(100 * t.loc["llama", "mean"], color="0.6", lw=0.8, ls="--")
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------- orderings across tasks
# Added for the GQA chapter (and any chapter that reads three rows on both tasks):
# whether two tasks order the same rows the same way, generated from the data.

def mean_order(table: pd.DataFrame, percent: bool = True, labels: dict | None = None) -> str:
    """'a (x) > b (y) = c (z)' from a seed_table: rows by mean, highest first."""
    g = (lambda x: f"{100 * x:.1f}%") if percent else (lambda x: f"{x:.3f}")
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
                        "counted) are inside the seed spread or split by the seeds, so the "
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
    f = (lambda x: f"{100 * abs(x):.1f} points") if percent else (lambda x: f"{abs(x):.3f}")
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
                    "inside the seed spread" if abs(c.gap) <= c.spread else "the seeds disagree")
                 + ")" for c in rest]
        s += " Not decided: " + ", ".join(parts) + "."
    return s
