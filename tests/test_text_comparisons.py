"""The text study's decisions on constructed losses whose answer is known: a control lower on
every seed, one within a thousandth of the reference, one that needs the added seeds, and an
endpoint a learned position table cannot have."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from llamanat_core.analysis.sequential import ADDED_SEEDS
from llamanat_core.analysis.text_comparisons import TEXT_MARGIN, decide_text, text_added_arms, text_arm
from llamanat_core.study.text_plan import text_added_plan

SEEDS10 = range(10)


def _rows(variant, seeds, loss, theta=10_000.0, longer=True):
    out = []
    for s, x in zip(seeds, loss):
        out.append({"variant": variant, "seed": s, "rope_theta": theta, "lr_scale": 1.0,
                    "loss_end": x, "loss_half": x + 0.1,
                    "loss_2x": x + 0.2 if longer else np.nan, "loss_4x": x + 0.4 if longer else np.nan})
    return out


def _study(extra_seeds=False):
    base = 1.76 + 0.01 * np.sin(np.arange(40))  # the reference's seeds differ by ~0.01
    rows = _rows("llama", range(40 if extra_seeds else 10), base)
    rows += _rows("gelu_mlp", SEEDS10, base[:10] + 0.08)  # worse on every seed
    rows += _rows("mqa", SEEDS10, base[:10] + 0.001 * np.cos(np.arange(10)))  # within ±0.001
    split = base + np.where(np.arange(40) % 5 == 0, 0.03, -0.02)  # lower on 4 seeds of 5
    rows += _rows("layernorm", range(40 if extra_seeds else 10), split)
    rows += _rows("abs_pos", SEEDS10, base[:10] + 0.03, longer=False)
    rows += _rows("llama", SEEDS10, base[:10] - 0.02, theta=1_000_000.0)
    return pd.DataFrame(rows)


def _row(d, comparison, metric="loss_end"):
    return d[(d.comparison == comparison) & (d.metric == metric)].iloc[0]


def test_every_seed_worse_is_decided_on_ten_seeds():
    d = decide_text(_study())
    g = _row(d, "gelu_mlp")
    assert g.verdict == "worse" and g.stopped == "decided on the first 10 seeds"
    assert g.effect == pytest.approx(0.08, abs=1e-4) and g.ci_low > 0 and g.control_lower == 0
    assert _row(d, "base 1,000,000").verdict == "better"  # the sweep is its own family


def test_within_a_thousandth_is_equivalent_and_ties_are_not_wins():
    m = _row(decide_text(_study()), "mqa")
    assert m.verdict == "equivalent" and -TEXT_MARGIN < m.ci_low and m.ci_high < TEXT_MARGIN


def test_a_split_comparison_waits_for_its_added_seeds_then_decides():
    d = decide_text(_study())
    ln = _row(d, "layernorm")
    assert ln.verdict == "pending" and ln.stopped.startswith("undecided on the first 10 seeds")
    assert np.isnan(ln.ci_low) and np.isnan(ln.ci_high)  # no interval end while seeds run
    arms = text_added_arms(d)
    assert arms == [("layernorm", ()), ("llama", ())]
    added = text_added_plan(arms, ADDED_SEEDS)["text"]
    assert len(added) == 60 and {r.seed for r in added} == set(range(10, 40))
    done = _row(decide_text(_study(extra_seeds=True)), "layernorm")
    assert done.n == 40 and done.verdict == "better" and done.stopped == "two stages: 40 seeds"


def test_an_endpoint_a_learned_table_cannot_have_is_no_row():
    d = decide_text(_study())
    assert set(d[d.comparison == "abs_pos"].metric) == {"loss_end", "loss_half"}


def test_a_control_label_names_its_arm():
    assert text_arm("base 1,000,000") == ("llama", (("rope_theta", 1_000_000.0),))
    assert text_arm("mqa") == ("mqa", ())


def test_the_learning_rate_table_finds_each_arms_best_rate():
    from llamanat_core.analysis.text_comparisons import learning_rate_table

    rows = []
    for scale, ref, ctl in ((0.5, 1.80, 1.85), (1.0, 1.76, 1.78), (2.0, 1.74, 1.70)):
        for s in range(3):
            rows += [{"variant": v, "rope_theta": 10_000.0, "seed": s, "lr_scale": scale, "loss_end": x}
                     for v, x in (("llama", ref), ("mqa", ctl))]
    t = learning_rate_table(pd.DataFrame(rows)).loc["mqa"]
    assert t["best rate"] == 2.0 and t["reference best rate"] == 2.0
    assert t["difference at ×1"] == pytest.approx(0.02)
    assert t["difference at best rates"] == pytest.approx(-0.04)
    assert not t.same_sign  # worse at the common rate, better once each arm has its own


def test_the_text_study_plan_adds_seeds_only_to_undecided_rows_and_only_when_asked(tmp_path, monkeypatch):
    from llamanat_core.analysis import two_stage
    from llamanat_core.study.run_files import run_path
    from llamanat_core.study.text_plan import text_plan

    losses = {(r.variant, r.rope_theta, r.seed): r.loss_end for r in _study().itertuples()}
    first = text_plan(("text",))["text"]

    def entry(cache_dir, run, weights):  # the constructed study's loss for each first-stage run
        key = (run.variant, run.config.rope_theta, run.seed)
        loss = losses.get(key, losses[("llama", 10_000.0, run.seed)] + 0.08)  # others: worse
        return {"params": 1, "seconds": 1.0, "endpoints": {
            "loss_end": loss, "loss_half": loss + 0.1, "loss_2x": loss + 0.2, "loss_4x": loss + 0.4}}

    monkeypatch.setattr(two_stage, "load_entry", entry)
    plain = two_stage.text_study_plan(tmp_path, ("text",))
    assert plain["text"] == first  # nothing added is cached yet, so nothing is added
    trained = two_stage.text_study_plan(tmp_path, ("text",), train_added=True)["text"]
    added = trained[len(first):]
    assert {(r.variant, r.overrides) for r in added} == {("layernorm", ()), ("llama", ())}  # mqa: equivalent
    assert {r.seed for r in added} == set(range(10, 40))
    cached = added[:5]
    for r in cached:
        run_path(tmp_path, r).parent.mkdir(exist_ok=True)
        run_path(tmp_path, r).write_text("{}")
    assert two_stage.text_study_plan(tmp_path, ("text",))["text"] == first + cached

    monkeypatch.setattr(two_stage, "load_entry", lambda c, r, w: None if r.seed == 9 else entry(c, r, w))
    assert two_stage.text_study_plan(tmp_path, ("text",), train_added=True)["text"] == first


def test_the_paired_differences_are_control_minus_reference_seed_by_seed():
    from llamanat_core.analysis.text_comparisons import text_differences

    d = text_differences(_study())
    g = d[d.comparison == "gelu_mlp"]
    assert list(g.seed) == list(range(10)) and np.allclose(g.difference, 0.08)
    assert len(d[d.comparison == "layernorm"]) == 10
    both = text_differences(_study(extra_seeds=True))
    assert len(both[both.comparison == "layernorm"]) == 40  # every seed both arms have
    assert set(d[d.comparison == "base 1,000,000"].family) == {"text_sweep"}
    assert np.allclose(d[d.comparison == "base 1,000,000"].difference, -0.02)


def test_runs_and_curves_are_labelled_by_their_arm():
    from llamanat_core.analysis.text_comparisons import labelled_curves, labelled_runs

    runs = _study().assign(run=lambda d: [f"r{i}" for i in range(len(d))])
    labels = labelled_runs(runs).drop_duplicates("label").set_index("label")
    assert list(labels.index) == ["llama", "gelu_mlp", "mqa", "layernorm", "abs_pos", "base 1,000,000"]
    assert labels.loc["base 1,000,000"].rope_theta == 1_000_000.0
    assert set(labels.index) - {"llama"} == set(decide_text(runs).comparison)  # decide_text's names
    curves = pd.DataFrame({"run": ["r0", f"r{len(runs) - 1}"], "step": [50, 50]})
    assert labelled_curves(runs, curves).label.tolist() == ["llama", "base 1,000,000"]
    assert labelled_runs(runs.iloc[:0]).empty


def test_each_published_finding_names_a_row_the_study_has_and_a_paper_the_book_cites():
    from llamanat_core.analysis.text_comparisons import TEXT_PUBLISHED, WINDOWS, TextFinding
    from llamanat_core.paths import ROOT
    from llamanat_core.study.text_plan import text_arms
    from llamanat_core.train.text import TEXT_ENDPOINTS

    bib = (ROOT / "book" / "references.bib").read_text()
    arms = {v if not o else f"base {dict(o)['rope_theta']:,.0f}" for v, o in text_arms()} - {"llama"}
    for f in TEXT_PUBLISHED:
        assert f"{{{f.key}," in bib, f.key
        assert f.comparison in arms | {WINDOWS} and f.metric in TEXT_ENDPOINTS, f
    assert "{nosuchkey2020," not in bib  # the check can fail
    with pytest.raises(ValueError, match="published"):
        TextFinding("A 2020", "a2020", "x", "mqa", "loss_end", "faster")


def test_the_replication_reads_each_findings_row_and_the_references_longer_windows():
    from llamanat_core.analysis.replication import text_replication
    from llamanat_core.analysis.text_comparisons import WINDOWS, window_decision

    study = _study()
    rep = text_replication(decide_text(study), study).set_index(["paper", "comparison"])
    assert rep.loc[("Shazeer 2020", "gelu_mlp")].replicates == "replicates"  # 0.08 worse, margin 0.01
    assert rep.loc[("Shazeer 2019; Ainslie et al. 2023", "mqa")].replicates == "is consistent"  # inside
    assert rep.loc[("Zhang & Sennrich 2019", "layernorm")].replicates == "not yet"  # pending
    assert "3.9 % fewer" in rep.loc[("Shazeer 2019; Ainslie et al. 2023", "mqa")].size_note
    assert rep.loc[("Xiong et al. 2020", "postnorm")].verdict == "absent"  # no post-norm runs
    longer = rep.loc[("Press et al. 2022", WINDOWS)]
    assert longer.verdict == "worse" and longer.effect == pytest.approx(0.4) and longer.control_lower == 0
    better = study.assign(loss_4x=study.loss_end - 0.05)  # a model that reads longer windows better
    assert window_decision(better).verdict == "better"
    assert window_decision(study[study.seed < 6]).verdict == "pending"
