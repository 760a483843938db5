"""Does the two-stage design keep its promises on data like the study's?

Simulates families of seven controls compared with one shared reference, seed by seed,
with outcomes drawn the way the study's come out: bimodal (a seed escapes the plateau
or does not), capped at 4,800 steps, correlated within a seed (a seed that is hard for
one row tends to be hard for the other). Each family goes through exactly what the study
does (`sequential.continues` on ten seeds, thirty more for the rows it sends on, the
stage-wise p, Holm levels, intervals inverted from the test) and the script prints:

- the family-wise rate of false decisions under "no difference" (any `better` or
  `worse` in a family of seven true nulls), with its 95 % interval: the design promises
  at most 5 %;
- the coverage of the intervals under real differences (the share that contains the true
  mean difference), against their nominal level (each row's interval is at 1 − its Holm
  level, so at least 95 %);
- the share of comparisons the rule sends on, and how often stage 1 decides;
- where coverage is lost: intervals on made-up differences, symmetric or skewed like the
  study's, from the two stages and from one stage of all forty seeds;
- with `--constructions`, the same intervals built four ways from the same test (whole units
  or tenths; the stopping rule applied to the real differences only, as the study does, or
  again to every shifted copy, as it once did): coverage, by shape, and mean width.

    python benchmarks/sequential_design.py                 # 2,000 null families, 1,000 intervals
    python benchmarks/sequential_design.py --constructions # also the four constructions
    python benchmarks/sequential_design.py --families 200 --intervals 100   # a quick look
    python benchmarks/sequential_design.py --intervals 3000 --constructions --write   # the committed file
    python benchmarks/sequential_design.py --resample --write          # on the study's own rows
    python benchmarks/sequential_design.py --resample --text --write   # on the text study's rows

The written file is what the methods appendix quotes.
"""
from __future__ import annotations

import argparse
import collections
import json
import math
import time
from pathlib import Path

import numpy as np
import scipy.stats

from llamanat_core.analysis import paired, sequential, stats
from llamanat_core.study import STUDY_DIR
from llamanat_core.train.loop import Budget
from llamanat_core.util import atomic_write_text

OUT = STUDY_DIR / "design_simulation.json"

CAP, EVERY = Budget().steps, Budget().eval_every  # the study's cap and evaluation interval
RHO = 0.3  # within-seed correlation, about the study's median
UNIT = 0.01  # speed differences in hundredths of a log ratio, as the study
CONTROLS = 7


def draw_times(rng, n: int, q: float, median: float, shared: np.ndarray) -> np.ndarray:
    """Capped times to solve: solved with probability q (seed effect shared), then a
    log-normal step rounded up to an evaluation; unsolved or late runs sit at the cap."""
    own = rng.standard_normal(n)
    solves = scipy.stats.norm.ppf(q) + math.sqrt(RHO) * shared + math.sqrt(1 - RHO) * own > 0
    spread = math.sqrt(RHO) * shared + math.sqrt(1 - RHO) * rng.standard_normal(n)
    when = np.exp(np.log(median) + 0.6 * spread)
    steps = np.maximum(EVERY, np.ceil(when / EVERY) * EVERY)
    return np.where(solves & (steps <= CAP), steps, CAP)


def units(control: np.ndarray, reference: np.ndarray) -> np.ndarray:
    return np.round((np.log(control) - np.log(reference)) / UNIT).astype(np.int64)


def comparison(rng, shared, ref, q_c, median_c):
    """One comparison through the design: (p, its stage-1 data, stage-2 data or None)."""
    ctl = draw_times(rng, len(shared), q_c, median_c, shared)
    d = units(ctl, ref)
    first, added = d[:10], d[10:]
    chance = bool((ref[:10] == CAP).all() and (ctl[:10] == CAP).all())
    margin = math.log(1.25) / UNIT
    go_on, why = sequential.continues(first, both_at_chance=chance, margin=(-margin, margin))
    stage2 = added if go_on else None
    return sequential.p_value(first, stage2), first, stage2, why, chance


def null_families(rng, families: int, q: float = 0.6, median: float = 1500.0):
    false, sent_on, early = 0, 0, 0
    for _ in range(families):
        shared = rng.standard_normal(sequential.MAX_SEEDS)
        ref = draw_times(rng, sequential.MAX_SEEDS, q, median, shared)
        rows = [comparison(rng, shared, ref, q, median) for _ in range(CONTROLS)]
        p = np.array([r[0] for r in rows])
        chance = np.array([r[4] for r in rows])
        levels = stats.holm_levels(p)
        false += bool(((p <= levels) & ~chance).any())
        sent_on += sum(r[2] is not None for r in rows)
        early += sum(r[3] == "decided on the first 10 seeds" for r in rows)
    return false, sent_on, early


def true_mean(q_c: float, median_c: float, q: float, median: float, draws: int = 400_000) -> float:
    rng = np.random.default_rng(12345)
    shared = rng.standard_normal(draws)
    control = draw_times(rng, draws, q_c, median_c, shared)
    d = np.log(control) - np.log(draw_times(rng, draws, q, median, shared))
    return float(d.mean() / UNIT)


CASES = [(0.8, 1000.0), (0.4, 2200.0), (0.6, 1500.0)]
"""Controls that really differ from the reference (q 0.6, median 1,500): (q, median)."""


def made_up_shapes(rng) -> dict:
    """Made-up differences: (draw n of them, their true mean), symmetric (normal) or skewed
    like the study's (most seeds 0, the rest one large lump)."""
    return {"symmetric": (lambda n: rng.normal(20, 40, n), 20.0),
            "skewed": (lambda n: np.where(rng.random(n) < 0.6, 0, rng.normal(80, 30, n)), 32.0)}


def real_difference_draws(rng, intervals: int, q: float = 0.6, median: float = 1500.0):
    """(first ten, added seeds, true mean) of `intervals` comparisons of one control that
    really differs, spread evenly over `CASES`."""
    for q_c, median_c in CASES:
        truth = true_mean(q_c, median_c, q, median)
        for _ in range(intervals // len(CASES)):
            shared = rng.standard_normal(sequential.MAX_SEEDS)
            ref = draw_times(rng, sequential.MAX_SEEDS, q, median, shared)
            _, first, stage2, _, _ = comparison(rng, shared, ref, q_c, median_c)
            yield first, stage2, truth


def made_up_draws(rng, per_case: int):
    """(case, first, added, true mean): `per_case` draws of each made-up shape, read as two
    stages (10 + 30 seeds) and as one stage of all 40."""
    for name, (draw, truth) in made_up_shapes(rng).items():
        for design in ("two stages", "one stage"):
            for _ in range(per_case):
                d = np.round(draw(sequential.MAX_SEEDS)).astype(np.int64)
                first, added = (d[:10], d[10:]) if design == "two stages" else (d, None)
                yield f"{name}, {design}", first, added, truth


def covers(first, added, truth) -> bool:
    """Whether the study's 95 % interval holds the true mean."""
    lo, hi = sequential.interval(first, added, stats.ALPHA, (-400, 400))
    return lo <= truth <= hi


def coverage(rng, intervals: int):
    """Intervals at a fixed 95 % for one control that really differs: (covered, total)."""
    hits = [covers(*draw) for draw in real_difference_draws(rng, intervals)]
    return sum(hits), len(hits)


def symmetry(rng, intervals: int) -> dict:
    """Where the coverage goes: 95 % intervals for the mean of made-up differences, symmetric
    (normal) or skewed like the study's (most seeds 0, the rest one large lump), from the two
    stages and from one stage of all 40. Returns coverage per case."""
    hits = collections.Counter()
    for case, first, added, truth in made_up_draws(rng, intervals):
        hits[case] += covers(first, added, truth)
    return {case: n / intervals for case, n in hits.items()}


def restopping_interval(first, added, level: float, bounds, grid: int) -> tuple[float, float]:
    """The interval the study once used, for comparison: at every shift the stopping rule is
    applied again to the shifted stage-1 data (`sequential.stagewise_tails` of the shifted
    differences), so a continued comparison rejects every shift at which its first ten
    seeds alone would have stopped."""
    first = np.asarray(first, dtype=np.int64) * grid
    added = None if added is None else np.asarray(added, dtype=np.int64) * grid

    def tails(k):
        return sequential.stagewise_tails(first - k, None if added is None else added - k)

    return sequential.invert(tails, level, bounds, grid)


CONSTRUCTIONS = {  # stopping rule re-applied to every shifted copy, or as it happened
    "stopping re-applied, whole units": lambda f, a, lv, b: restopping_interval(f, a, lv, b, 1),
    "stopping re-applied, tenths": lambda f, a, lv, b: restopping_interval(f, a, lv, b, 10),
    "stopping as it happened, whole units": lambda f, a, lv, b: sequential.interval(f, a, lv, b, grid=1),
    "stopping as it happened, tenths (the study's)": lambda f, a, lv, b: sequential.interval(f, a, lv, b),
}


def constructions(rng, intervals: int, q: float = 0.6, median: float = 1500.0) -> dict:
    """Coverage and mean width of 95 % intervals built each way of `CONSTRUCTIONS` on the
    same draws: the cases of `coverage`, then the made-up shapes of `symmetry`."""
    out = {name: {"covered": 0, "width": 0.0, "by_shape": {}} for name in CONSTRUCTIONS}

    def score(key, first, added, truth):
        for name, build in CONSTRUCTIONS.items():
            lo, hi = build(first, added, stats.ALPHA, (-400, 400))
            if key is None:
                out[name]["covered"] += lo <= truth <= hi
                out[name]["width"] += hi - lo
            else:
                out[name]["by_shape"][key] = out[name]["by_shape"].get(key, 0) + (lo <= truth <= hi)

    total = 0
    for first, stage2, truth in real_difference_draws(rng, intervals, q, median):
        score(None, first, stage2, truth)
        total += 1
    per_shape = intervals // len(CASES)  # as many of each shape as of each case
    for case, first, added, truth in made_up_draws(rng, per_shape):
        score(case, first, added, truth)
    base = out[next(iter(CONSTRUCTIONS))]["width"]
    for rec in out.values():
        rec["coverage_ci"] = list(scipy.stats.binomtest(rec["covered"], total).proportion_ci(method="exact"))
        rec["intervals"], rec["relative_width"] = total, rec["width"] / base
        rec["by_shape"] = {k: v / per_shape for k, v in rec["by_shape"].items()}
        del rec["width"]
    return out


# ---------------------------------------------------------------- resampling the study's own rows

RESAMPLE_OUT = STUDY_DIR / "resampling_validation.json"
TEXT_RESAMPLE_OUT = STUDY_DIR / "text_resampling_validation.json"
BRANCHES = ("decided at ten", "equivalent at ten", "continued to forty")
RESAMPLE_LEVEL = 0.05
"""Level of every interval and test in the resampling (nominal coverage 95 %); an early stop
is judged as each construction judges it (the corrected one at `sequential.ALPHA_FIRST`)."""


def centred(d: np.ndarray, at: float) -> np.ndarray:
    """Integer differences moved so that their value `at` (mean or median) is 0, rounded,
    the rounding residual taken off the largest one so a mean is exactly 0."""
    p = np.round(d - at).astype(np.int64)
    if at == float(np.mean(d)):
        p[np.argmax(np.abs(p))] -= int(p.sum())
    return p


def median_of(pop: np.ndarray) -> float:
    """The population's median: the middle of its median set (every θ with at most half
    the values on either side), so a sign test at any point of the set is valid."""
    s = np.sort(pop)
    n = len(s)
    return float(s[n // 2]) if n % 2 else float(s[n // 2 - 1] + s[n // 2]) / 2


def populations(d: np.ndarray, margin: float) -> dict:
    """One row's differences moved to known truths: no difference (symmetrised: the sign
    flips' own null), a mean of zero keeping the row's skew, a median of zero, the observed
    and half the observed mean, and each estimand just past the equivalence margin."""
    zero_mean, zero_median = centred(d, float(np.mean(d))), centred(d, median_of(d))
    side = 1 if np.mean(d) >= 0 else -1
    edge = side * int(math.ceil(margin))
    return {"no difference (symmetric)": np.concatenate([zero_mean, -zero_mean]),
            "mean zero, skewed": zero_mean, "median zero, skewed": zero_median,
            "half the observed mean": zero_mean + int(round(np.mean(d) / 2)),
            "the observed mean": zero_mean + int(round(np.mean(d))),
            "mean at the margin": zero_mean + edge, "median at the margin": zero_median + edge}


def registered_branch(first: np.ndarray, margin: float) -> str:
    """Which way the puzzles' registered stage-1 rule sends ten seeds."""
    go_on, why = sequential.continues(first, both_at_chance=False, margin=(-margin, margin))
    return BRANCHES[2] if go_on else BRANCHES[0] if why.startswith("decided") else BRANCHES[1]


def sign_test_branch(first: np.ndarray, margin: float) -> str:
    """Which way the sign test's stage-1 rule (`paired.first_look`, the rule the text study
    ran and the corrected puzzle analysis stops by, `comparisons.stage_one`) sends ten
    seeds, in whole units."""
    look = paired.first_look(first, unit=1, margin=margin)
    return {"decided": BRANCHES[0], "equivalent": BRANCHES[1], "continue": BRANCHES[2]}[look]


REGISTERED, CORRECTED = "registered (sign flips, centre of symmetry)", "corrected (sign test, median seed)"
STAGE_ONE_RULES = {False: {REGISTERED: registered_branch, CORRECTED: sign_test_branch},
                   True: {REGISTERED: sign_test_branch, CORRECTED: sign_test_branch}}
"""The stage-1 rule behind each construction, by `text`: each puzzle analysis stops by its own
test (one test from the first look to the verdict); the text study ran the sign test's rule
under both. The resampling branches every construction by its own rule."""
RESAMPLE_DRAWS = {False: 150, True: 60}
"""Draws per truth of each committed validation (`--resample` with no number), by `text`;
the record keeps them (`draws_per_truth`) and the command that wrote it (`command`)."""


def judge(lo: float, hi: float, margin: float) -> str:
    return "decided" if lo > 0 or hi < 0 else "equivalent" if -margin < lo and hi < margin else "undecided"


def registered_look(first, added, margin, span):
    lo, hi = sequential.interval(first, added, RESAMPLE_LEVEL, (-span, span))
    return lo, hi, judge(lo, hi, margin)


def corrected_look(first, added, margin, span):
    r = paired.decide_paired(first, added, unit=1, margin=margin, level=RESAMPLE_LEVEL)
    return r.low, r.high, {"higher": "decided", "lower": "decided"}.get(r.verdict, r.verdict)


RESAMPLED = {REGISTERED: (registered_look, "mean"), CORRECTED: (corrected_look, "median")}
"""Each construction, and the estimand it is scored against."""


def false_decision(lo: float, hi: float, verdict: str, truth: float, margin: float) -> bool:
    """A decision of the wrong sign (any decision when the truth is 0), or equivalence
    claimed for a truth at or past the margin."""
    if verdict == "decided":
        return truth == 0 or (lo > 0) != (truth > 0)
    return verdict == "equivalent" and abs(truth) >= margin


def resample_row(rng, row: dict, draws: int, tally: dict, rules: dict) -> None:
    """`draws` resamples of 40 seeds from each of the row's populations, through the whole
    two-stage rule; every construction scored on the same draws, each branched by its own
    stage-1 rule (`rules`: construction -> rule)."""
    for truth_name, pop in populations(row["differences"], row["margin"]).items():
        truths = {"mean": float(np.mean(pop)), "median": median_of(pop)}
        span = int(np.abs(pop).max()) + 2
        for _ in range(draws):
            d = pop[rng.integers(0, len(pop), sequential.MAX_SEEDS)]
            first = d[:len(sequential.FIRST_SEEDS)]
            for name, (look, estimand) in RESAMPLED.items():
                branch = rules[name](first, row["margin"])
                added = d[len(sequential.FIRST_SEEDS):] if branch == BRANCHES[2] else None
                lo, hi, verdict = look(first, added, row["margin"], span)
                truth = truths[estimand]
                covered = int(lo <= truth <= hi)  # plain ints: the record is written as JSON
                false = int(false_decision(lo, hi, verdict, truth, row["margin"]))
                cell = tally[name][branch]
                cell["n"], cell["covered"], cell["false"] = cell["n"] + 1, cell["covered"] + covered, \
                    cell["false"] + false
                counts = cell["by_truth"].setdefault(truth_name, [0, 0, 0])
                counts[0], counts[1], counts[2] = counts[0] + 1, counts[1] + covered, counts[2] + false


def text_rows() -> list[dict]:
    """The text study's primary rows in the form `comparisons.row_differences` gives the
    puzzles': each comparison's differences (every seed both arms have) in whole
    `TEXT_UNIT`s, and its margin in the same units."""
    from llamanat_core.analysis.text_comparisons import TEXT_MARGIN, TEXT_UNIT, text_differences
    from llamanat_core.study import load_text_results

    d = text_differences(load_text_results())
    return [{"comparison": c, "differences": np.round(g.difference.to_numpy() / TEXT_UNIT).astype(np.int64),
             "margin": round(TEXT_MARGIN / TEXT_UNIT)} for c, g in d.groupby("comparison", sort=False)]


def _empty_tally() -> dict:
    cell = lambda: {"n": 0, "covered": 0, "false": 0, "by_truth": {}}  # noqa: E731
    return {name: {b: cell() for b in BRANCHES} for name in RESAMPLED}


def _resample_rows(job) -> dict:
    """One worker's share of the rows, each drawn from its own stream (seed, row index),
    so the tally does not depend on how the rows are shared out."""
    seed, indexed, draws, text = job
    tally = _empty_tally()
    for i, row in indexed:
        resample_row(np.random.default_rng([seed, i]), row, draws, tally, STAGE_ONE_RULES[text])
    return tally


def _add_tallies(into: dict, other: dict) -> None:
    for name, cells in other.items():
        for branch, c in cells.items():
            cell = into[name][branch]
            for k in ("n", "covered", "false"):
                cell[k] += c[k]
            for truth, counts in c["by_truth"].items():
                have = cell["by_truth"].setdefault(truth, [0, 0, 0])
                have[:] = [a + b for a, b in zip(have, counts)]


def resampling(seed: int, draws: int, text: bool = False, workers: int = 1) -> dict:
    """The validation on the study's own rows (the text study's with `text`): per
    construction and branch, how many resamples took the branch, the share whose interval
    covers the truth (of those), and the false decisions it made as a share of every
    resample (so the branches add up to the construction's whole false-decision rate).
    Each row draws from its own stream, so `workers` processes give the same numbers."""
    from llamanat_core.analysis.comparisons import row_differences
    from llamanat_core.study import load_results

    rows = text_rows() if text else row_differences(load_results())
    jobs = [(seed, [(i, rows[i]) for i in range(w, len(rows), workers)], draws, text) for w in range(workers)]
    if workers == 1:
        parts = [_resample_rows(jobs[0])]
    else:
        import multiprocessing

        with multiprocessing.get_context("fork").Pool(workers) as pool:
            parts = pool.map(_resample_rows, jobs)
    tally = _empty_tally()
    for part in parts:
        _add_tallies(tally, part)
    total = sum(c["n"] for c in tally[next(iter(RESAMPLED))].values())
    for cells in tally.values():
        for cell in cells.values():
            cell["coverage"] = cell["covered"] / cell["n"] if cell["n"] else math.nan
            cell["false_rate"] = cell["false"] / total
    command = f"python benchmarks/sequential_design.py --resample {draws}{' --text' if text else ''} --write"
    return {"rows": len(rows), "draws_per_truth": draws, "resamples": total, "seed": seed, "text": text,
            "stage_one_rule": {name: rule.__name__ for name, rule in STAGE_ONE_RULES[text].items()},
            "command": command, "streams": "one per row: numpy default_rng([seed, row index])",
            "level": RESAMPLE_LEVEL, "truths": list(populations(rows[0]["differences"], 1.0)),
            "constructions": tally}


def print_resampling(rec: dict) -> None:
    print(f"resampling the study's own rows: {rec['rows']} rows x {len(rec['truths'])} truths x "
          f"{rec['draws_per_truth']:,} draws = {rec['resamples']:,} two-stage comparisons")
    for name, cells in rec["constructions"].items():
        print(f"  {name}:")
        for branch, c in cells.items():
            print(f"    {branch:>20}: {c['n']:>7,} resamples, coverage {c['coverage']:.1%}, "
                  f"false decisions {c['false_rate']:.2%} of all resamples")
            for truth, (n, covered, false) in c["by_truth"].items():
                of_truth = rec["resamples"] // len(rec["truths"])
                print(f"      {truth:>26}: {n:>6,} here, coverage {covered / n:.1%}, "
                      f"false decisions {false / of_truth:.2%} of this truth's resamples")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--families", type=int, default=2000, help="null families of seven (2,000)")
    ap.add_argument("--intervals", type=int, default=1000, help="intervals under real differences (1,000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--constructions", action="store_true",
                    help="also compare the four interval constructions (slow: about 0.2 s an interval)")
    ap.add_argument("--write", action="store_true", help=f"write the rates to {OUT.name} beside the study")
    ap.add_argument("--resample", type=int, nargs="?", default=0, const=-1, metavar="DRAWS",
                    help="instead: resample each study row's own differences, DRAWS per truth "
                         f"(no number: the committed count, {RESAMPLE_DRAWS[False]} for the puzzles, "
                         f"{RESAMPLE_DRAWS[True]} for text; with --write, to {RESAMPLE_OUT.name})")
    ap.add_argument("--workers", type=int, default=1,
                    help="with --resample: processes sharing the rows (the numbers do not change)")
    ap.add_argument("--text", action="store_true",
                    help="with --resample: the text study's rows "
                         f"(with --write, to {TEXT_RESAMPLE_OUT.name})")
    ap.add_argument("--survival", action="store_true",
                    help="with --resample: the censored-time construction on the speed rows "
                         f"(with --write, to {SURVIVAL_OUT.name})")
    args = ap.parse_args(argv)
    if args.resample:
        return resample_main(args)
    rng = np.random.default_rng(args.seed)
    t0 = time.perf_counter()
    false, sent_on, early = null_families(rng, args.families)
    lo, hi = scipy.stats.binomtest(false, args.families).proportion_ci(method="exact")
    n_rows = args.families * CONTROLS
    print(f"null families of {CONTROLS}: {args.families:,}; families with a false decision: {false:,} = "
          f"{false / args.families:.3%} [95% CI {lo:.3%}, {hi:.3%}] (the design promises <= 5%)")
    print(f"  comparisons sent on to 40 seeds: {sent_on / n_rows:.1%}; decided on the first 10: "
          f"{early / n_rows:.2%}")
    covered, total = coverage(rng, args.intervals)
    clo, chi = scipy.stats.binomtest(covered, total).proportion_ci(method="exact")
    print(f"95% intervals under real differences: {covered:,} of {total:,} cover the true mean = "
          f"{covered / total:.1%} [95% CI {clo:.1%}, {chi:.1%}] (nominal 95%)")
    by_case = symmetry(rng, args.intervals)
    for case, rate in by_case.items():
        print(f"  95% intervals on made-up differences, {case}: {rate:.1%} cover ({args.intervals:,} each)")
    by_construction = constructions(rng, args.intervals) if args.constructions else None
    for name, rec in (by_construction or {}).items():
        low, high = rec["coverage_ci"]
        shapes = "; ".join(f"{k} {v:.1%}" for k, v in rec["by_shape"].items())
        print(f"  {name}: {rec['covered']:,} of {rec['intervals']:,} cover = "
              f"{rec['covered'] / rec['intervals']:.1%} [95% CI {low:.1%}, {high:.1%}], mean width "
              f"x{rec['relative_width']:.3f} of the first; by shape: {shapes}")
    print(f"({time.perf_counter() - t0:.0f} s)")
    if args.write:
        record = {"what": "the two-stage design on simulated families (benchmarks/sequential_design.py)",
                  "families": args.families, "controls": CONTROLS, "false_families": false,
                  "false_rate_ci": [lo, hi], "rows": n_rows, "sent_on": sent_on, "decided_early": early,
                  "intervals": total, "covered": covered, "coverage_ci": [clo, chi], "seed": args.seed,
                  "rho": RHO, "cap": CAP, "coverage_by_shape": by_case}
        if by_construction is not None:
            record["coverage_by_construction"] = by_construction
        atomic_write_text(Path(OUT), json.dumps(record, indent=1, sort_keys=True) + "\n")
        print(f"written: {OUT}")
    return 0


SURVIVAL_OUT = STUDY_DIR / "survival_resampling_validation.json"
SURVIVAL_DRAWS = 60
"""Draws per truth of the committed survival validation (`--resample --survival`)."""
SURVIVAL_PERMUTATIONS = 1000
"""Relabellings per log-rank stage past 14 pairs in the resampling (the book's rows use 4,000)."""


def survival_rows() -> list[dict]:
    """Each primary speed row's seed pairs (every seed both arms have): time to solve or the
    cap, and whether it solved, control and reference; rows at chance are left out."""
    from llamanat_core.analysis import comparisons
    from llamanat_core.study import load_results

    results = load_results()
    decisions = comparisons.decide(results, with_registered=False)
    pairs = comparisons.seed_pairs(results)
    speed = decisions[(decisions.metric == "speed") & decisions.primary.astype(bool)
                      & ~decisions.verdict.isin(["both at chance", "not learned"])]
    out = []
    for r in speed.itertuples():
        pr = pairs[(r.measurement, r.comparison, r.task, r.regime)]
        out.append({"comparison": f"{r.measurement} {r.task} {r.regime} {r.comparison}",
                    "t_c": pr.time_capped_c.to_numpy(float), "e_c": ~pr.censored_c.astype(bool).to_numpy(),
                    "t_r": pr.time_capped_r.to_numpy(float), "e_r": ~pr.censored_r.astype(bool).to_numpy(),
                    "cap": float(pr.steps_r.max())})
    return out


def slowed(t: np.ndarray, e: np.ndarray, factor: float, cap: float) -> tuple[np.ndarray, np.ndarray]:
    """Solve times multiplied by `factor`, on the evaluation grid, censored again at the cap."""
    t2 = np.where(e, np.ceil(t * factor / EVERY) * EVERY, cap)
    return np.minimum(t2, cap), e & (t2 <= cap)


def survival_populations(row: dict) -> dict:
    """Known truths for one speed row's pairs: no difference (each pair and its swap), the
    row as observed, and the control's solve times stretched until the restricted-mean ratio
    sits at the margin, on the side the row lies (equivalence there is a false claim)."""
    t_c, e_c, t_r, e_r, cap = row["t_c"], row["e_c"], row["t_r"], row["e_r"], row["cap"]
    swap = (np.concatenate([t_c, t_r]), np.concatenate([e_c, e_r]),
            np.concatenate([t_r, t_c]), np.concatenate([e_r, e_c]))
    ratio = t_c.mean() / t_r.mean()
    goal = math.exp(math.copysign(SPEED_MARGIN, math.log(ratio) if ratio != 1 else 1.0))
    lo, hi = 0.05, 20.0  # the factor that puts the restricted-mean ratio at the margin
    for _ in range(40):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if slowed(t_c, e_c, mid, cap)[0].mean() / t_r.mean() < goal else (lo, mid)
    edge = (*slowed(t_c, e_c, hi, cap), t_r, e_r)
    return {"no difference": swap, "as observed": (t_c, e_c, t_r, e_r), "ratio at the margin": edge}


SPEED_MARGIN = math.log(1.25)


def survival_look(t_c, e_c, t_r, e_r, branch: str, cap: float) -> dict:
    """The censored-time reading of one resampled row, on the branch stage one took: the
    restricted-mean ratio's interval and verdict, and the log-rank's and McNemar's rejections."""
    from llamanat_core.analysis import solve_times

    n1 = len(sequential.FIRST_SEEDS)
    continued = branch == BRANCHES[2]
    use = slice(None) if continued else slice(0, n1)
    level = RESAMPLE_LEVEL if continued else min(RESAMPLE_LEVEL, sequential.ALPHA_FIRST)
    x_c, x_r = np.column_stack([t_c[use], e_c[use]]), np.column_stack([t_r[use], e_r[use]])
    ratio, low, high = stats.paired_bootstrap_ratio(x_c, x_r, stats.capped_mean, level, draws=1000)
    verdict = solve_times.rmst_verdict(low, high, SPEED_MARGIN)

    def tails(s):
        return stats.paired_logrank_tails(t_c[s], e_c[s], t_r[s], e_r[s], draws=SURVIVAL_PERMUTATIONS)

    up, down = tails(slice(0, n1))
    if continued:
        up2, down2 = tails(slice(n1, None))
        up, down = sequential.combine(up, up2), sequential.combine(down, down2)
    solved_c, solved_r = e_c[use], e_r[use]
    mcnemar = stats.mcnemar_exact(int((solved_c & ~solved_r).sum()), int((~solved_c & solved_r).sum()))
    return {"low": low, "high": high, "verdict": verdict, "level": level,
            "logrank": sequential.two_sided(up, down) <= level, "logrank_sooner": up < down,
            "mcnemar": mcnemar <= level}


def score(cell: dict, truth_name: str, truth: float, look: dict) -> None:
    """Add one resample's reading to its branch's tally: covered, a false decision by the
    restricted-mean ratio, by the log-rank, by McNemar (any rejection under no difference)."""
    covered = int(look["low"] <= truth <= look["high"])
    null = truth_name == "no difference"
    decided = "decided" if look["verdict"] in ("better", "worse") else look["verdict"]
    false = int(false_decision(math.log(look["low"]), math.log(look["high"]), decided,
                               0.0 if null else math.log(truth), SPEED_MARGIN))
    lr_false = int(look["logrank"] and (null or look["logrank_sooner"] != (truth < 1)))
    for k, v in (("n", 1), ("covered", covered), ("false", false), ("logrank_false", lr_false),
                 ("mcnemar_false", int(look["mcnemar"] and null))):
        cell[k] += v
    by = cell["by_truth"].setdefault(truth_name, [0, 0, 0, 0])
    for i, v in enumerate((1, covered, false, lr_false)):
        by[i] += v


def survival_resampling(seed: int, draws: int) -> dict:
    """The censored-time construction through the study's whole rule on each speed row's own
    pairs: stage one branched by the corrected design's rule (the sign test on the capped
    log ratios), then the restricted-mean ratio scored against the population's, per branch:
    coverage, and false decisions (a decision of the wrong sign, any decision when there is
    no difference, equivalence at the margin) as a share of all resamples and of the branch's
    own; the log-rank's and McNemar's rejections under no difference likewise."""
    from llamanat_core.analysis import comparisons

    rng = np.random.default_rng(seed)
    rows = survival_rows()
    cells = {b: {"n": 0, "covered": 0, "false": 0, "logrank_false": 0, "mcnemar_false": 0,
                 "by_truth": {}} for b in BRANCHES}
    margin_units = SPEED_MARGIN / UNIT
    for row in rows:
        for truth_name, (t_c, e_c, t_r, e_r) in survival_populations(row).items():
            truth = float(t_c.mean() / t_r.mean())
            for _ in range(draws):
                pick = rng.integers(0, len(t_c), sequential.MAX_SEEDS)
                d = units(t_c[pick], t_r[pick])
                chance = bool(not e_c[pick][:10].any() and not e_r[pick][:10].any())
                if chance:
                    continue  # both arms at the cap on all ten: never tested
                go_on, why = comparisons.stage_one(d[:10], False, margin_units)
                branch = BRANCHES[2] if go_on else BRANCHES[0] if why.startswith("decided") else BRANCHES[1]
                score(cells[branch], truth_name, truth,
                      survival_look(t_c[pick], e_c[pick], t_r[pick], e_r[pick], branch, row["cap"]))
    total = sum(c["n"] for c in cells.values())
    for c in cells.values():
        c["coverage"] = c["covered"] / c["n"] if c["n"] else math.nan
        c["false_rate"] = c["false"] / total
        c["false_in_branch"] = c["false"] / c["n"] if c["n"] else math.nan
        c["logrank_false_in_branch"] = c["logrank_false"] / c["n"] if c["n"] else math.nan
    return {"rows": len(rows), "draws_per_truth": draws, "resamples": total, "seed": seed,
            "level": RESAMPLE_LEVEL, "truths": ["no difference", "as observed", "ratio at the margin"],
            "stage_one_rule": "comparisons.stage_one (the sign test on the capped log ratios)",
            "command": f"python benchmarks/sequential_design.py --resample {draws} --survival --write",
            "branches": cells}


def print_survival(rec: dict) -> None:
    print(f"censored-time construction, {rec['rows']} speed rows x {len(rec['truths'])} truths x "
          f"{rec['draws_per_truth']} draws = {rec['resamples']:,} resamples")
    for branch, c in rec["branches"].items():
        print(f"  {branch:>20}: {c['n']:>6,}, coverage {c['coverage']:.1%}, false {c['false_rate']:.2%} "
              f"of all, {c['false_in_branch']:.2%} of the branch; log-rank false "
              f"{c['logrank_false_in_branch']:.2%}")
        for truth, (n, covered, false, lr) in c["by_truth"].items():
            print(f"      {truth:>22}: {n:>6,}, coverage {covered / n:.1%}, false {false / n:.2%}, "
                  f"log-rank false {lr / n:.2%}")


def resample_main(args) -> int:
    t0 = time.perf_counter()
    if args.survival:
        rec = survival_resampling(args.seed, SURVIVAL_DRAWS if args.resample == -1 else args.resample)
        print_survival(rec)
        print(f"({time.perf_counter() - t0:.0f} s)")
        if args.write:
            atomic_write_text(Path(SURVIVAL_OUT), json.dumps(rec, indent=1, sort_keys=True) + "\n")
            print(f"written: {SURVIVAL_OUT}")
        return 0
    draws = RESAMPLE_DRAWS[args.text] if args.resample == -1 else args.resample
    rec = resampling(args.seed, draws, args.text, args.workers)
    print_resampling(rec)
    print(f"({time.perf_counter() - t0:.0f} s)")
    if args.write:
        out = TEXT_RESAMPLE_OUT if args.text else RESAMPLE_OUT
        atomic_write_text(Path(out), json.dumps(rec, indent=1, sort_keys=True) + "\n")
        print(f"written: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
