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

def _style():
    try:
        from .plotting import use_book_style
        use_book_style()
    except ImportError:  # pragma: no cover - plotting style is optional
        pass


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
                percent: bool = True):
    """Accuracy against training step: one thin line per seed, a thick line for the mean."""
    scale = 100 if percent else 1
    groups = order or list(dict.fromkeys(df[by]))
    for i, g in enumerate(groups):
        d = df[df[by] == g]
        color = f"C{i}"
        for _, s in d.groupby("seed"):
            s = s.sort_values("step")
            ax.plot(s.step, s[value] * scale, color=color, lw=0.8, alpha=0.45)
        m = d.groupby("step")[value].mean() * scale
        ax.plot(m.index, m.values, color=color, lw=2.2, marker="o", ms=4, label=str(g))
    ax.set_xlabel("training step")
    ax.set_ylabel(("" if not percent else "") + METRIC_NAMES.get(value, value) + (" (%)" if percent else ""))
    ax.legend(frameon=False, fontsize=8)
    return ax


def summary_figure(df: pd.DataFrame):
    """The intro's one-screen summary: accuracy at the last checkpoint per variant and task,
    every seed a point."""
    import matplotlib.pyplot as plt

    from .config import MATRIX_VARIANTS

    _style()
    d = df[df.measurement == "matrix"]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), sharey=True)
    for ax, task in zip(axes, ("addition", "recall")):
        t = seed_table(d[d.task == task], "variant", "test_acc", order=MATRIX_VARIANTS)
        seed_points(ax, t, color="C0" if task == "addition" else "C1", label_rotation=30)
        ax.set_title(f"{task}: test accuracy at the last checkpoint")
        ax.axhline(100 * t.loc["llama", "mean"], color="0.6", lw=0.8, ls="--")
    fig.tight_layout()
    return fig
