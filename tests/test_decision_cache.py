"""The decisions cache: computed once per code and data, recomputed on any change or a bad file."""
from pathlib import Path

import pandas as pd
import pytest

from llamanat_core.analysis import decision_cache
from llamanat_core.analysis.decision_cache import code_fingerprint, decided, frame_fingerprint


@pytest.fixture
def counted():
    calls = []

    def decide(results):
        calls.append(len(results))
        return results.assign(verdict=["better" if x > 0 else "worse" for x in results.x])
    return decide, calls


def frame(*xs):
    return pd.DataFrame({"seed": range(len(xs)), "x": list(xs)})


def test_a_second_ask_reads_the_first_answer(tmp_path, counted):
    decide, calls = counted
    first = decided(frame(1.0, -2.0), decide, "decide()", tmp_path)
    again = decided(frame(1.0, -2.0), decide, "decide()", tmp_path)
    assert calls == [2]
    pd.testing.assert_frame_equal(first, again)
    assert len(list(tmp_path.glob("*.pkl"))) == 1 and not list(tmp_path.glob("*.tmp"))


def test_other_data_or_another_name_is_decided_anew(tmp_path, counted):
    decide, calls = counted
    decided(frame(1.0, -2.0), decide, "decide()", tmp_path)
    changed = decided(frame(1.0, 2.0), decide, "decide()", tmp_path)
    decided(frame(1.0, -2.0), decide, "decide(margin_scale=2)", tmp_path)
    assert calls == [2, 2, 2] and list(changed.verdict) == ["better", "better"]
    # a dtype is part of the data: 1 and 1.0 are different results
    assert frame_fingerprint(frame(1, 2)) != frame_fingerprint(frame(1.0, 2.0))


def test_a_bad_file_is_decided_again_and_replaced(tmp_path, counted):
    decide, calls = counted
    decided(frame(3.0), decide, "decide()", tmp_path)
    (path,) = tmp_path.glob("*.pkl")
    path.write_bytes(b"cut sh")
    out = decided(frame(3.0), decide, "decide()", tmp_path)
    assert calls == [1, 1] and list(out.verdict) == ["better"]
    assert pd.read_pickle(path).equals(out)


def test_a_folder_that_cannot_be_written_costs_only_time(tmp_path, counted):
    decide, calls = counted
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    out = decided(frame(-1.0), decide, "decide()", blocked / "decisions")
    assert calls == [1] and list(out.verdict) == ["worse"]


def test_any_edit_to_the_package_changes_the_key(tmp_path, monkeypatch):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "sub" / "a.py").write_text("x = 1\n")
    before = code_fingerprint.__wrapped__(package)
    (package / "sub" / "a.py").write_text("x = 2\n")
    assert code_fingerprint.__wrapped__(package) != before
    assert code_fingerprint() == code_fingerprint.__wrapped__(decision_cache.PACKAGE_DIR)


def test_the_cache_lives_outside_the_repository(tmp_path, monkeypatch, counted):
    """$LLAMANAT_CACHE_DIR, else $XDG_CACHE_HOME/llamanat, else ~/.cache/llamanat: never
    under the repository, where git and the tests' check on the working tree would see it."""
    from llamanat_core.paths import ROOT, decisions_cache_dir

    monkeypatch.delenv("LLAMANAT_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert decisions_cache_dir() == Path.home() / ".cache" / "llamanat" / "decisions"
    assert ROOT not in decisions_cache_dir().parents
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert decisions_cache_dir() == tmp_path / "xdg" / "llamanat" / "decisions"
    monkeypatch.setenv("LLAMANAT_CACHE_DIR", str(tmp_path / "own"))
    decide, calls = counted
    decided(frame(2.0), decide, "decide()")
    assert len(list((tmp_path / "own" / "decisions").glob("*.pkl"))) == 1
