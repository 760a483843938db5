"""The chapter pipeline: MyST Markdown sources (jupytext) -> papermill -> sanitised,
reproducible artifacts; the shape of chapter sources (a parameters cell, the parameter
check after it, plumbing hidden from the HTML); the parameter check itself; and the rule
that no measured value is typed into prose.

Markers: `notebook` (executes chapters through papermill and a kernel); `slow` (the tier
`make test` leaves to `make test-slow`: the tiny-budget run of all chapters but one)."""
from __future__ import annotations

import ast
import io
import re
from pathlib import Path

import nbformat
import pytest

from llamanat_core.book.execute import (
    CHAPTERS,
    INJECTED_ID,
    ROOT,
    ChapterError,
    ChapterParameterError,
    check_chapter_parameters,
    read_source,
    run_chapters,
)
from llamanat_core.paths import ARTIFACTS_DIR, CHAPTERS_DIR
from llamanat_core.train.loop import Budget

BOOK_DIR = ROOT / "book"
SOURCES = sorted(CHAPTERS_DIR.glob("*.md"))
COMMON_PARAMETERS = {"seeds", "steps", "fresh"}
HIDDEN = {"remove-cell", "remove-input", "hide-input"}  # tags that keep code out of the page


def read(path: Path):
    """A chapter source (MyST Markdown) or an executed artifact (.ipynb) as a NotebookNode."""
    path = Path(path)
    return read_source(path) if path.suffix == ".md" else nbformat.read(str(path), as_version=4)


def tags(cell) -> set[str]:
    return set(cell.get("metadata", {}).get("tags", []))


# ------------------------------------------------------------------ the runner's validation

def test_unknown_chapter_name_is_rejected_with_the_valid_names():
    with pytest.raises(ValueError) as err:
        run_chapters(["model", "attention"], out_dir="/nonexistent")
    msg = str(err.value)
    assert "'attention'" in msg
    for name in CHAPTERS:
        assert name in msg


def test_chapter_order_is_the_book_order():
    """CHAPTERS (the order `llamanat chapters` runs) is the order of the table of contents."""
    import yaml

    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [c["file"] for part in toc["parts"] for c in part["chapters"]]
    in_toc = tuple(f.removeprefix("artifacts/") for f in files if f.startswith("artifacts/"))
    assert CHAPTERS == in_toc


# ------------------------------------------------------------------ chapter parameters

@pytest.mark.parametrize("kwargs, expected", [
    ({}, None),  # None: the committed study's seeds, the committed budget
    ({"seeds": [0, 1], "steps": 100, "fresh": True}, ((0, 1), 100, True)),
    ({"seeds": (3,), "fresh": False}, ((3,), None, False)),
    ({"seeds": 2, "steps": 8, "fresh": True}, ((2,), 8, True)),  # one seed as an integer
    ({"seeds": [0], "steps": Budget().steps}, ((0,), Budget().steps, False)),  # the committed budget
])
def test_chapter_parameters_that_pass(kwargs, expected):
    seeds, steps, fresh = check_chapter_parameters(**kwargs)
    if expected is None:
        import inspect

        from llamanat_core.study import chapter_results

        default = inspect.signature(chapter_results).parameters["seeds"].default
        assert (seeds, steps, fresh) == (tuple(default), None, False)
    else:
        assert (seeds, steps, fresh) == expected
    assert all(type(s) is int for s in seeds)


@pytest.mark.parametrize("kwargs, names, syntax", [
    ({"seeds": "[0,1]"}, "'seeds'", '-y "seeds: [0, 1]"'),  # papermill -p passes a string
    ({"seeds": []}, "'seeds'", '-y "seeds: [0, 1]"'),
    ({"seeds": [0, 0, 1]}, "'seeds'", "more than once"),  # duplicates are one run twice
    ({"seeds": [0, -1]}, "'seeds'", ">= 0"),
    ({"seeds": [0, 1.5]}, "'seeds'", "integers"),
    ({"seeds": [True]}, "'seeds'", "integers"),
    ({"seeds": None, "steps": "100", "fresh": True}, "'steps'", "-p steps 100"),
    ({"steps": 0, "fresh": True}, "'steps'", "at least 1"),
    ({"steps": 2.5, "fresh": True}, "'steps'", "-p steps 100"),
    ({"steps": 100}, "'steps'", "fresh=True"),  # another budget trains new runs
    ({"fresh": "yes"}, "'fresh'", "-p fresh True"),
    ({"fresh": 1}, "'fresh'", "-p fresh True"),
])
def test_chapter_parameters_that_fail_name_the_parameter_and_the_syntax(kwargs, names, syntax):
    with pytest.raises(ChapterParameterError) as err:
        check_chapter_parameters(**kwargs)
    msg = str(err.value)
    assert names in msg and syntax in msg, msg
    assert isinstance(err.value, ValueError)


def test_undeclared_parameter_is_rejected_before_anything_runs(tmp_path):
    with pytest.raises(ValueError) as err:
        run_chapters(["model"], {"seeds": [0], "learning_rate": 0.1}, out_dir=tmp_path)
    msg = str(err.value)
    assert "'learning_rate'" in msg and "'model'" in msg
    for declared in COMMON_PARAMETERS:
        assert declared in msg  # the error lists what the chapter does declare
    assert not list(tmp_path.iterdir())  # nothing executed, nothing written


# ------------------------------------------------------------------ chapter sources

def test_every_source_is_a_known_chapter():
    assert SOURCES, "no chapter sources in chapters/"
    stray = [p.name for p in SOURCES if p.stem not in CHAPTERS]
    assert not stray, f"chapters/ holds notebooks that are not chapters: {stray}"


def test_no_chapter_source_is_an_ipynb():
    assert not list(CHAPTERS_DIR.glob("*.ipynb")), "chapter sources are MyST Markdown (chapters/NAME.md)"
    assert {p.stem for p in SOURCES} == set(CHAPTERS)


@pytest.mark.parametrize("path", SOURCES, ids=[p.stem for p in SOURCES])
def test_source_is_myst_with_one_parameters_cell_then_the_check(path):
    import jupytext

    from llamanat_core.book.execute import declared_parameters

    text = path.read_text()
    meta = jupytext.read(str(path)).metadata["jupytext"]["text_representation"]
    assert meta["format_name"] == "myst", f"{path.name} is not a MyST notebook"
    from jupytext.config import load_jupytext_configuration_file

    # canonical: jupytext, with the chapters' configuration (what Lab saves), writes the file
    # back byte for byte, so diffs show only real edits
    config = load_jupytext_configuration_file(str(path.parent / "jupytext.toml"))
    assert "format_version" not in text.split("---")[1]  # its decimal would read as a measured value
    assert jupytext.writes(jupytext.reads(text, fmt="md:myst"), fmt="md:myst", config=config) == text, (
        f"{path.name} is not in jupytext's canonical form: `jupytext --to md:myst {path}`")
    nb = read(path)
    code = [c for c in nb.cells if c.cell_type == "code"]
    tagged = [i for i, c in enumerate(code) if "parameters" in tags(c)]
    assert len(tagged) == 1, f"{path.name}: {len(tagged)} cells tagged 'parameters' (need exactly 1)"
    declared = set(declared_parameters(path))
    assert COMMON_PARAMETERS <= declared, f"{path.name} lacks {COMMON_PARAMETERS - declared}"
    check = code[tagged[0] + 1].source
    assert "check_chapter_parameters(" in check, (
        f"{path.name}: the cell after the parameters must validate them with check_chapter_parameters")
    ids = [c.get("id") for c in nb.cells]
    assert all(ids) and len(set(ids)) == len(ids), f"{path.name}: missing or duplicate cell ids"
    assert [c.id for c in read(path).cells] == ids, "cell ids are not stable between reads"


def _glue_calls(source: str) -> bool:
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            f = node.func
            if getattr(f, "id", None) in ("glue", "glue_all") or getattr(f, "attr", None) == "glue_all":
                return True
    return False


@pytest.mark.parametrize("path", SOURCES, ids=[p.stem for p in SOURCES])
def test_plumbing_is_out_of_sight(path):
    """Glue calls, the parameters, their check and the imports are removed from or
    collapsed in the HTML: the code a reader sees teaches."""
    nb = read(path)
    code = [c for c in nb.cells if c.cell_type == "code"]
    removed = {"remove-cell", "remove-input"}
    visible_glue = [c.id for c in code if _glue_calls(c.source) and not tags(c) & removed]
    assert not visible_glue, f"{path.name}: code cells with glue calls shown in the page: {visible_glue}"
    first = next(i for i, c in enumerate(code) if "parameters" in tags(c))
    assert tags(code[first]) & HIDDEN, f"{path.name}: the parameters cell is shown"
    assert tags(code[first + 1]) & HIDDEN, f"{path.name}: the parameter check is shown"
    assert tags(code[first + 2]) & HIDDEN, f"{path.name}: the import cell is shown"


@pytest.mark.parametrize("path", SOURCES, ids=[p.stem for p in SOURCES])
def test_conclusions_are_guarded_by_hidden_claim_cells(path):
    """Every chapter guards its text with claim cells: removed from the page and calling
    `claims.claim`, which is strict on the committed study and warns on a reader's own run
    (the chapter runner's parameter check says which), so the committed chapter fails to
    execute when the data stop supporting a sentence. No cell picks its own strictness."""
    nb = read(path)
    code = [c for c in nb.cells if c.cell_type == "code"]
    claims = [c for c in code if "claim" in tags(c)]
    assert claims, f"{path.name}: no cell tagged `claim`"
    for c in claims:
        assert "remove-cell" in tags(c), f"{path.name}: claim cell {c.id} is shown in the page"
        calls = len(re.findall(r"(?<![\w.])claim\(|claims\.claim\(", c.source))
        assert calls, f"{path.name}: claim cell {c.id} asserts nothing through claims.claim"
        assert not _glue_calls(c.source), f"{path.name}: claim cell {c.id} also glues"
    assert not any("strict=" in c.source for c in code), \
        f"{path.name}: a claim's strictness comes from the chapter's parameters, not the cell"


# ------------------------------------------------------------------ reproducible execution

VOLATILE_TAGS = {"nbval-ignore-output"}  # outputs nbval may not compare (e.g. timings)


# What papermill and the kernel record that differs from one execution to the next.
VOLATILE_METADATA = ("start_time", "end_time", "duration", "iopub.execute_input",
                     "shell.execute_reply", '"exception"', "environment_variables")


def without_volatile_outputs(text: str) -> str:
    """The notebook with the outputs of cells tagged as volatile blanked."""
    nb = nbformat.reads(text, as_version=4)
    for cell in nb.cells:
        if VOLATILE_TAGS & set(cell.metadata.get("tags", [])):
            cell.outputs = []
    return nbformat.writes(nb)


@pytest.mark.notebook
def test_a_string_from_papermills_p_fails_in_the_check_cell_with_the_right_syntax(tmp_path):
    """`papermill chapters/sweep.md out.ipynb -p seeds "[0,1]"` hands the chapter a string;
    the cell after the parameters stops it there, naming the parameter and the syntax,
    instead of torch failing deep inside a later cell."""
    with pytest.raises(ChapterError) as err:
        run_chapters(["sweep"], {"seeds": "[0,1]"}, out_dir=tmp_path, fresh_dir=tmp_path / "fresh")
    msg = str(err.value)
    assert "ChapterParameterError" in msg and "'seeds'" in msg and '-y "seeds: [0, 1]"' in msg, msg
    # the error names its cell by the first line's first 60 characters: the check's import
    assert "import check_chapter_param" in msg, f"the error did not come from the check cell: {msg}"


@pytest.fixture(scope="module")
def fresh_runs(tmp_path_factory):
    return tmp_path_factory.mktemp("fresh")


# `make test` runs the tiny-budget fresh run on one chapter, which trains runs of two
# measurements (the matrix and the length table); every other chapter's is in the slow
# tier (`make test-slow`).
TINY_RUN_IN_MAKE_TEST = "rope"


@pytest.mark.notebook
@pytest.mark.parametrize("path", [
    pytest.param(p, id=p.stem, marks=() if p.stem == TINY_RUN_IN_MAKE_TEST else pytest.mark.slow)
    for p in SOURCES])
def test_fresh_run_with_a_tiny_budget_executes(path, tmp_path, fresh_runs, monkeypatch):
    """A reader's `llamanat chapters NAME --fresh --steps 4 --seeds 0` works: the chapter
    trains its own runs (through the study runner, into a temporary folder here, never
    the repository's) and executes to the end on them: every code cell ran. The chapters
    share one such folder, as a reader's chapters share .fresh/: a run one chapter trained
    is the next one's cache hit. Four steps is the smallest cap that keeps four distinct
    checkpoints (its quarters); a tiny budget evaluates every step, so each step saved is
    an evaluation saved. Executed with parameters, the chapter records them, injects them
    once, and keeps no metadata that would differ between two executions (that two
    executions are the same bytes is the round trip's check)."""
    params = {"fresh": True, "steps": 4, "seeds": [0]}
    # Eager, as the README advises for a few steps: compiling each architecture's step
    # costs more than four steps on a new machine, and the compiled step has its own tests
    # (test_train, the study's pool). The kernel inherits the setting.
    monkeypatch.setenv("LLAMANAT_COMPILE", "0")
    fresh_dir = fresh_runs
    (out,) = run_chapters([path.stem], params, out_dir=tmp_path / "out", fresh_dir=fresh_dir)
    text = out.read_text()
    for volatile in VOLATILE_METADATA:
        assert volatile not in text, f"volatile metadata {volatile!r} survived sanitising"
    nb = nbformat.reads(text, as_version=4)
    assert nb.metadata.papermill["parameters"] == params
    injected = [c for c in nb.cells if c.id == INJECTED_ID]
    assert len(injected) == 1 and "seeds = [0]" in injected[0].source and "fresh = True" in injected[0].source
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.execution_count is not None for c in code), "a code cell did not execute"
    assert [c.source for c in nb.cells if c.id != INJECTED_ID] == [c.source for c in read(path).cells]
    assert any("image/png" in o.get("data", {}) for c in code for o in c.get("outputs", []))


COMMITTED = [p for p in SOURCES if (ARTIFACTS_DIR / f"{p.stem}.ipynb").exists()]
# Re-executing a committed chapter must leave `git status` clean. For every chapter that
# follows from three checks, none of which executes it twice: nbval re-executes the
# committed notebook and compares every output, figures byte for byte (nbval_figures.py);
# test_committed_artifact_has_the_source_cells says the notebook's code is the source's;
# test_committed_outputs_need_no_sanitizing says nbval's sanitizing patterns changed
# nothing it compared. What is left is the pipeline (papermill, then `execute.sanitize`
# of the metadata), the same for every chapter: the full round trip runs on one, the
# cheapest.
ROUND_TRIP = [p for p in COMMITTED if p.stem == "sweep"]


@pytest.mark.notebook
@pytest.mark.parametrize("path", ROUND_TRIP, ids=[p.stem for p in ROUND_TRIP])
def test_committed_artifact_is_what_the_source_produces(path, tmp_path):
    """Re-executing a chapter leaves `git status` clean: the committed artifact is byte for
    byte what its source produces now, figures (PNG bytes) included. Outputs of cells
    tagged nbval-ignore-output (machine-dependent timings) are the one exception. The
    committed artifact came from an earlier execution, so this is also the check that
    two executions of a chapter are the same bytes."""
    committed = (ARTIFACTS_DIR / f"{path.stem}.ipynb").read_text()
    meta = nbformat.reads(committed, as_version=4).metadata.get("papermill", {})
    assert meta.get("parameters", {}) == {}, (
        f"artifacts/{path.stem}.ipynb was executed with parameters {meta.get('parameters')}; the book "
        f"publishes the default run: `llamanat chapters {path.stem}`")
    progress = io.StringIO()
    (fresh,) = run_chapters([path.stem], out_dir=tmp_path, stream=progress)
    assert fresh == tmp_path / f"{path.stem}.ipynb"
    assert re.search(rf"{path.stem}\s+[0-9.]+ s", progress.getvalue()), progress.getvalue()
    assert not list(tmp_path.glob("*.tmp")) and not list(tmp_path.glob(".*.tmp"))  # atomic write
    text = fresh.read_text()
    assert without_volatile_outputs(text) == without_volatile_outputs(committed), (
        f"artifacts/{path.stem}.ipynb is stale or not reproducible: re-run `llamanat chapters "
        f"{path.stem}` and compare (git diff artifacts/{path.stem}.ipynb)")
    # what makes two executions byte-identical: no volatile metadata survives sanitising
    for volatile in VOLATILE_METADATA:
        assert volatile not in text, f"volatile metadata {volatile!r} survived sanitising"
    nb = nbformat.reads(text, as_version=4)
    assert "version" not in nb.metadata.get("language_info", {})
    assert [c.id for c in nb.cells] == [c.id for c in read(path).cells]
    assert nb.metadata.papermill["input_path"] == f"chapters/{path.name}"
    assert "jupytext" not in nb.metadata
    assert any("image/png" in o.get("data", {}) for c in nb.cells for o in c.get("outputs", []))


def nbval_patterns(path: Path = ROOT / "nbval_sanitize.cfg") -> dict[str, str]:
    """The sanitizing patterns nbval applies to both sides before it compares: name -> regex."""
    import configparser

    cfg = configparser.ConfigParser(interpolation=None)
    cfg.read(path)
    return {name: cfg[name]["regex"] for name in cfg.sections()}


def output_texts(cell) -> list[str]:
    """Every compared output of a cell as text (figures aside: they are compared as digests)."""
    texts = []
    for out in cell.get("outputs", []):
        if "text" in out:
            texts.append(out["text"])
        for mime, value in out.get("data", {}).items():
            if not mime.startswith("image/"):
                texts.append(value if isinstance(value, str) else repr(value))
    return texts


@pytest.mark.parametrize("path", COMMITTED, ids=[p.stem for p in COMMITTED])
def test_committed_outputs_need_no_sanitizing(path):
    """nbval replaces durations, addresses, progress bars and temporary paths on both sides
    before comparing; an artifact that printed one would pass nbval and still change on
    every execution. So no committed output outside the volatile cells contains one."""
    patterns = nbval_patterns()
    assert patterns  # the file was read
    found = []
    for i, cell in enumerate(read(ARTIFACTS_DIR / f"{path.stem}.ipynb").cells):
        if cell.cell_type != "code" or VOLATILE_TAGS & tags(cell):
            continue
        for text in output_texts(cell):
            found += [(i, name, m.group(0)[:60]) for name, regex in patterns.items()
                      for m in [re.search(regex, text)] if m]
    assert not found, f"artifacts/{path.stem}.ipynb prints what nbval sanitizes (cell, pattern, text): " \
                      f"{found}"


def test_the_sanitizing_scan_finds_what_nbval_would_replace():
    patterns = nbval_patterns()
    cell = nbformat.v4.new_code_cell(outputs=[nbformat.v4.new_output(
        "stream", name="stdout", text="trained in 12.5 s into /tmp/abc/run.json")])
    names = {name for text in output_texts(cell) for name, regex in patterns.items()
             if re.search(regex, text)}
    assert len(names) == 2  # the duration and the temporary folder


@pytest.mark.parametrize("path", COMMITTED, ids=[p.stem for p in COMMITTED])
def test_committed_artifact_has_the_source_cells(path):
    """Cheap staleness check: an edited source whose artifact was not regenerated."""
    src = [(c.cell_type, c.source) for c in read(path).cells]
    artifact = read(ARTIFACTS_DIR / f"{path.stem}.ipynb")
    out = [(c.cell_type, c.source) for c in artifact.cells if c.id != INJECTED_ID]
    assert src == out, f"artifacts/{path.stem}.ipynb does not match chapters/{path.name}: re-run the chapter"
    assert [tags(c) for c in read(path).cells] == [tags(c) for c in artifact.cells if c.id != INJECTED_ID]


# ------------------------------------------------------------------ no typed measurements

CONFIG_DECIMALS = {
    "0.02": "init std of the reference configuration",
    "1.5": "GELU width factor of the gelu_mlp control (1.5 x 192 = 288)",
    # fixed in advance, stated on the method page and checked against the code there
    "0.90": "the solve threshold, Budget.solve_at",
    "0.05": "the level of every verdict (stats.ALPHA)",
    "0.8": "lower bound of an equivalent time-to-solve ratio (comparisons.SPEED: log 1.25 either way)",
    "1.25": "upper bound of an equivalent time-to-solve ratio (comparisons.SPEED's margin, log 1.25)",
    "0.002": "the smallest exact sign-flip p with 10 seeds, 2/1,024 (stats.min_sign_flip_p)",
    "0.0071": "Holm's first threshold over 7 comparisons, 0.05/7",
}
CONFIG_INTEGERS = {
    # the budget, fixed before any run; book/method.md states them and a test there holds
    # them to Budget()
    "1,200": "the checkpoint every run reaches, and the earlier published study's steps",
    "4,800": "the cap of training steps",
    "4,000": "the finite regime's training items",
    # RoPE bases: the reference's, the sweep's, and published ones
    "10,000": "the reference's RoPE base (LLaMA's)",
    "1,000,000": "the largest base of the sweep",
    "500,000": "Llama 3's published base",
    # published configurations, read off the papers and checked in the model chapter
    "32,000": "LLaMA-1's vocabulary",
    "4,096": "LLaMA-1 7B's width",
    "5120": "LLaMA-1 13B's hidden_size, as transformers' LlamaConfig writes it",
    "2,048": "LLaMA-1's context, set in an exercise",
}
COUNTED = ("seeds?|runs?|rows?|comparisons?|questions?|verdicts?|solves?|parameters?|characters|"
           "families|decisions")
_ROLE = re.compile(r"\{(?:glue(?::\w+)?|doc|ref|numref|eq|cite(?::\w+)?|download|term)\}`[^`]*`")
_URL = re.compile(r"https?://\S+")
_MODEL_NAME = re.compile(r"\b(?:LLaMA|Llama)[- ]\d+(?:\.\d+)?")  # Llama-3.2 is a name, not a value
_DIRECTIVE_OPTION = re.compile(r"^\s*:[\w-]+:.*$", re.M)
_COMMENT = re.compile(r"^\s*%.*$|<!--.*?-->", re.M | re.S)
_COMMAND = re.compile(r"^```(?:bash|sh|shell|console)\n.*?^```", re.M | re.S)  # what a reader types
_TERM = re.compile(r"[-+−×/=]\s?$")  # "context + 1 characters": a term of a formula, not a count
_NUMBER = re.compile(
    r"(?<![\w.,])(?P<num>\d{1,3}(?:,\d{3})+(?!\d)|\d+\.\d+|\.\d+|\d+)(?P<tail>(?:\.\d)?)(?P<exp>[eE][-+]?\d)?"
    r"(?P<suffix>\s?%|\s?[BT]\b)?")
_OUT_OF = re.compile(r"\s+(?:of|out of)\s+\d")                 # "17 of 40": a count out of a total
_NOUN = re.compile(rf"\s+(?:[a-z][\w-]*\s+)?(?:{COUNTED})\b")  # "40 seeds", "71 primary rows"


def typed_measurements(text: str) -> list[str]:
    """Numbers typed into Markdown that look measured. The rule:

    - a decimal (0.71, .71) or a percentage (71 %, 71.5%) is measured, except the
      configuration decimals of CONFIG_DECIMALS, each with its reason;
    - an integer is measured when it is a count out of a total ("17 of 40"), when a counted
      noun follows it, directly or after one word ("40 seeds", "71 primary rows", "8 eager
      runs": seeds, runs, rows, comparisons, solves, parameters, bytes, ...), or when it has
      four digits or more (4,800 or 4800: parameters, bytes, steps to solve) and is neither
      a year (1800–2039, written without a separator) nor a design constant or published
      figure of CONFIG_INTEGERS, each with its reason;
    - allowed as written: other small integers (layers, heads, pairs, positions, a step of
      a worked example: the configuration the prose explains), versions (1.0.4),
      scientific notation (1e-5), arXiv ids (2302.13971), published sizes with a B or T
      suffix (6.7B, 1.4T), model names (LLaMA-2, Llama 3.1), a term of a formula
      ("context + 1 characters"), and whatever sits inside a role (glue, doc, cite), a
      URL, a comment, a directive's option or a shell block (a port, a flag's value).

    A number written in words ("ten seeds") passes: the design's constants read better so,
    and a reviewer still reads the prose.
    """
    text = _COMMENT.sub(" ", text)
    text = _COMMAND.sub(" ", text)
    text = _ROLE.sub(" ", text)
    text = _URL.sub(" ", text)
    text = _MODEL_NAME.sub(" ", text)
    text = _DIRECTIVE_OPTION.sub(" ", text)
    found = []
    for m in _NUMBER.finditer(text):
        num, suffix = m["num"], (m["suffix"] or "").strip()
        if m["tail"] or m["exp"]:
            continue  # a version (1.0.4) or scientific notation (1e-5, 1.5e-3)
        if suffix in ("B", "T"):
            continue  # a published size: 6.7B parameters, 1.4T tokens
        if re.fullmatch(r"\d{4}\.\d{4,5}", num):
            continue  # an arXiv identifier
        if "." in num or suffix == "%":
            if num not in CONFIG_DECIMALS or suffix == "%":
                found.append(m.group(0).strip())
            continue
        after = text[m.end():]
        digits = num.replace(",", "")
        year = "," not in num and len(digits) == 4 and 1800 <= int(digits) <= 2039
        if (_OUT_OF.match(after) or _NOUN.match(after)) and not _TERM.search(text[:m.start()]):
            found.append(m.group(0).strip())
        elif len(digits) >= 4 and not year and num not in CONFIG_INTEGERS:
            found.append(m.group(0).strip())
    return found


@pytest.mark.parametrize("text, expected", [
    ("accuracy reached 0.71 on recall", ["0.71"]),
    ("accuracy reached 71.5% on recall", ["71.5%"]),
    ("every seed reached 100 % at step 600", ["100 %"]),
    ("a gap of .04", [".04"]),
    ("mean 0.83 ± 0.02", ["0.83"]),  # 0.02 alone is the init std; the mean is still caught
    ("eps `1e-5`, lr 1e-3, lr 3.0e-4", []),
    ("jupyter-book 1.0.4 and arXiv 2302.13971", []),
    ("the paper's 6.7B and 65.2 B models, trained on 1.4T tokens", []),
    ("init std 0.02; GELU hidden 1.5 × 192 = 288; 1,200 steps of batch 64", []),
    ("reached {glue:text}`acc:.1%` (see {doc}`../book/method`)", []),
    ("% a MyST comment with 0.5\nplain text", []),
    ("```{glue:figure} fig\n:figwidth: 80%\n```", []),
    ("see https://example.org/v0.5/page", []),
    ("tied only in Llama-3.2 1B and 3B; LLaMA-1 7B; Llama 3.1", []),
    ("Llama-3.2 reached 0.5", ["0.5"]),
    ("call `stats.holm([0.001, 0.2])`", ["0.001", "0.2"]),  # an input typed in code is typed too
    # integers that look measured
    ("llama solved 17 of 40 seeds", ["17", "40"]),
    ("mqa solved addition on 33 out of 40", ["33"]),
    ("decided on 10 seeds; 71 primary rows; 8 eager runs", ["10", "71", "8"]),
    ("the reference has 102,528 parameters and a cache of 1024 bytes", ["102,528", "1024"]),
    ("it took 13824 steps", ["13824"]),
    # integers that are the design, a year, a citation or a name
    ("the Transformer of 2017 and base 10,000; 2 layers, 4 query heads, 12 pairs", []),
    ("a cap of 4,800 steps, 4,000 items, the checkpoint at 1,200 steps", []),
    ("LLaMA-1 7B and 65B, a vocabulary of 32,000; see {cite:p}`touvron2023llama`", []),
    ("at step 600 of item 3; section 4", []),
    ("ten seeds, then thirty more", []),
    ("windows of {glue:text}`context` + 1 characters", []),
    ("```bash\nray start --port=6379 --num-cpus=8 --seeds 10\n```\nabout 13 runs a minute", ["13"]),
])
def test_typed_measurement_scanner(text, expected):
    assert typed_measurements(text) == expected


def prose_sources():
    for path in SOURCES:  # MyST: markdown cells, split out by jupytext
        for i, cell in enumerate(read(path).cells):
            if cell.cell_type == "markdown":
                yield f"chapters/{path.name} cell {i} ({cell.get('id')})", cell.source
    for path in sorted(BOOK_DIR.glob("*.md")):
        yield f"book/{path.name}", path.read_text()


def test_no_measured_value_is_typed_into_prose():
    offenders = {where: hits for where, text in prose_sources() if (hits := typed_measurements(text))}
    assert not offenders, ("measured values typed into prose (glue them with myst_nb.glue and "
                           f"{{glue:text}}): {offenders}")


def test_a_count_planted_in_a_chapter_is_found():
    """The scan on a real paragraph: the GQA chapter's takeaway with its glued seed count and
    difference passes; the same paragraph with them typed in fails."""
    text = next(t for w, t in prose_sources() if w.startswith("chapters/gqa.md")
                and "gqa_t_mha_n" in t)
    planted = text.replace("{glue:text}`gqa_t_mha_n`", "10")
    planted = planted.replace("{glue:text}`gqa_t_mha`", "0.022")
    assert typed_measurements(text) == [] and typed_measurements(planted) == ["10", "0.022"]


def test_method_page_states_the_budget_of_the_code():
    """book/method.md is a Markdown page, not a notebook: the configuration numbers it types
    (the budget, the item lengths) must match the code. Measured values and the seeds of
    the study are glued from the model chapter instead."""
    from llamanat_core.data.tasks import Recall

    text = (BOOK_DIR / "method.md").read_text()
    assert "{glue:text}`../artifacts/model.ipynb::summary_seeds:s`" in text
    lengths = [Recall(0, n).prompt_len for n in (4, 8, 12)]
    assert f"Items are {lengths[0]} tokens long" in text
    assert f"({lengths[1]} and {lengths[2]} tokens)" in text
    b = Budget()
    for value in (f"{b.steps:,}", f"{b.n_train:,}", f"{b.n_test:,}", f"batches of {b.batch_size}",
                  f"clipped at {b.clip:g}", *(f"{c:,}" for c in b.checkpoints)):
        assert value in text, f"book/method.md does not state {value!r} from Budget()"
    import math

    from llamanat_core.analysis import comparisons, sequential

    assert f"at least {b.solve_at:.2f} for three" in text and b.solved_evals == 3
    speed = comparisons.SPEED.margin
    assert f"ratio {math.exp(-speed):g}–{math.exp(speed):g} for" in text
    assert comparisons.LENGTH_8.margin == comparisons.LENGTH_12.margin == 0.15 and "fifteen points" in text
    assert len(sequential.FIRST_SEEDS) == 10 and len(sequential.ADDED_SEEDS) == 30 and "thirty more" in text
    lr = re.search(r"learning rate `([^`]+)`", text)
    assert lr and float(lr.group(1)) == b.lr, "book/method.md states another learning rate"


# ------------------------------------------------------------------ nbval's sanitising

def sanitised(text: str) -> str:
    """`text` as nbval sees it under `--nbval-sanitize-with nbval_sanitize.cfg`: the
    patterns read by nbval's own parser, applied in order."""
    from nbval.plugin import get_sanitize_patterns

    for regex, replace in get_sanitize_patterns((ROOT / "nbval_sanitize.cfg").read_text()):
        text = re.sub(regex, replace, text)
    return text


@pytest.mark.parametrize("run_a, run_b", [
    ("object at 0x7f3a2b1c4d50>", "object at 0x7f99aa00bc11>"),
    ("trained in 12.3 s", "trained in 9.87 s"),
    ("took 4.56 ms", "took 12 ms"),
    ("3.21 ms/step", "0.5 ms/step"),
    ("  3%|▎         | 1/32 [00:08<04:13,  8.18s/run, llama]\r  6%|▋         | 2/32 [00:40<11:11]\n",
     "  3%|▎         | 1/32 [00:02<01:01,  2.00s/run, llama]\r  6%|▋         | 2/32 [00:04<01:00]\n"),
    ("wrote /tmp/pytest-of-root/pytest-3/run0/a.json", "wrote /tmp/tmpab12_x/a.json"),
])
def test_sanitising_equates_what_differs_between_machines(run_a, run_b):
    assert run_a != run_b and sanitised(run_a) == sanitised(run_b)


@pytest.mark.parametrize("text", [
    "accuracy 0.71 at step 1,200 | 12 of 32 seeds",  # a measured value, a table-like bar
    "in 12 pairs", "1/32 of the items",
    "iVBORw0KGgoAAAANSUhEUgAA" + "QUJDRA+/" * 15_000,  # a glued figure's base64: one long line
])
def test_sanitising_leaves_everything_else_alone(text):
    """What is not machine-dependent must reproduce exactly, so the patterns match nothing
    else; the long line is the glued-figure record nbval compares as text (a pattern that
    restarted its scan at every character took a minute on one such line)."""
    assert sanitised(text) == text


def test_notebooks_and_the_ray_file_are_each_one_unit_of_work():
    """`make test` runs tests and notebooks in one pytest-xdist session: a notebook's cells
    (one kernel, in order) and the Ray tests (one local instance at a time) must each stay
    on one worker; every other test is scheduled on its own."""
    from conftest import _one_worker_scope

    cells = [_one_worker_scope(f"artifacts/rope.ipynb::Cell {i}") for i in (0, 1, 35)]
    assert cells == ["artifacts/rope.ipynb"] * 3
    assert _one_worker_scope("artifacts/norm.ipynb::Cell 0") == "artifacts/norm.ipynb"
    ray = {_one_worker_scope(f"tests/test_ray.py::{t}") for t in ("test_a", "test_b[x-1]")}
    assert ray == {"tests/test_ray.py"}
    assert _one_worker_scope("tests/test_train.py::test_flat_adamw_is_torch_adamw") is None
    graph = {_one_worker_scope(f"tests/test_train.py::{t}") for t in (
        "test_same_seed_is_bit_identical[recall-compiled]",
        "test_speed_path_computes_the_plain_loop[llama-recall-compiled]")}
    assert len(graph) == 1 and None not in graph  # one compiled graph, compiled once
    assert _one_worker_scope("tests/test_train.py::test_same_seed_is_bit_identical[recall-eager]") is None
    # the tests of the tiny study's fixture, parametrized or not, share one worker; others do not
    tiny = {_one_worker_scope(f"tests/test_study.py::{t}") for t in (
        "test_rerun_uses_the_cache", "test_bad_cache_entry_is_reported_and_recomputed[garbage]",
        "test_results_frames_are_tidy")}
    assert len(tiny) == 1 and None not in tiny
    assert _one_worker_scope("tests/test_study.py::test_committed_study_is_complete") is None
    hf = _one_worker_scope("tests/test_hf.py::test_logits_match_transformers[llama-init]")
    assert hf == "tests/test_hf.py"


def test_the_longest_units_of_work_are_handed_out_first():
    """Ray and the browser, then the notebooks (larger first, each in cell order), then the
    tests that start processes or compile, then the short tests."""
    from types import SimpleNamespace

    from conftest import run_order

    def item(nodeid: str, *markers: str):
        path = ROOT / nodeid.split("::")[0]
        return SimpleNamespace(nodeid=nodeid, fspath=path,
                               get_closest_marker=lambda name: name if name in markers else None)

    by_size = sorted(COMMITTED, key=lambda p: (ARTIFACTS_DIR / f"{p.stem}.ipynb").stat().st_size)
    small, large = by_size[0], by_size[-1]
    items = [item("tests/test_stats.py::test_holm"), item("tests/test_study.py::test_pool", "pool"),
             item(f"artifacts/{small.stem}.ipynb::Cell 0"), item(f"artifacts/{large.stem}.ipynb::Cell 0"),
             item(f"artifacts/{large.stem}.ipynb::Cell 1"), item("tests/test_ray.py::test_a", "pool"),
             item("tests/test_train.py::test_same_seed_is_bit_identical[recall-compiled]", "compile")]
    order = [i.nodeid for i in sorted(items, key=run_order)]
    assert order == ["tests/test_ray.py::test_a", f"artifacts/{large.stem}.ipynb::Cell 0",
                     f"artifacts/{large.stem}.ipynb::Cell 1", f"artifacts/{small.stem}.ipynb::Cell 0",
                     "tests/test_study.py::test_pool",
                     "tests/test_train.py::test_same_seed_is_bit_identical[recall-compiled]",
                     "tests/test_stats.py::test_holm"]


# A 1 x 1 PNG: the figure a cell displays (nbval compares it however it was drawn).
TINY_PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII="


@pytest.mark.notebook
def test_nbval_compares_figures_byte_for_byte(tmp_path):
    """tests/nbval_figures.py makes nbval compare PNG outputs (as digests): of two cells
    that display the same figure, the one whose stored figure differs by one byte fails
    and the one storing the true figure passes (one notebook, one kernel)."""
    import base64
    import os
    import subprocess
    import sys

    code = f"from IPython.display import Image, display\ndisplay(Image(data={base64.b64decode(TINY_PNG)!r}))"
    cells = []
    for stored in (TINY_PNG, TINY_PNG[:40] + ("A" if TINY_PNG[40] != "A" else "B") + TINY_PNG[41:]):
        cell = nbformat.v4.new_code_cell(code, execution_count=len(cells) + 1)
        cell.outputs = [nbformat.v4.new_output("display_data", data={"image/png": stored, "text/plain":
                                                                     "<IPython.core.display.Image object>"})]
        cells.append(cell)
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, str(tmp_path / "figures.ipynb"))
    env = dict(os.environ, PYTHONPATH=str(ROOT / "tests"))
    command = [sys.executable, "-m", "pytest", "-p", "nbval_figures", "--nbval", "--nbval-current-env",
               "-q", "-rA", "-p", "no:cacheprovider", "figures.ipynb"]
    result = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    summary = result.stdout[-2000:]
    assert result.returncode == 1 and "PNG sha256:" in result.stdout, summary
    assert re.search(r"^PASSED figures\.ipynb::Cell 0", result.stdout, re.M), summary
    assert re.search(r"^FAILED figures\.ipynb::Cell 1", result.stdout, re.M), summary


def test_sanitizing_joins_prints_the_kernel_split_by_timing():
    import nbformat

    from llamanat_core.book.execute import sanitize

    def printed(*chunks):
        cell = nbformat.v4.new_code_cell("print('a'); print('b')")
        cell.outputs = [nbformat.v4.new_output("stream", name=n, text=t) for n, t in chunks]
        nb = nbformat.v4.new_notebook(cells=[cell])
        return sanitize(nb, "x.ipynb").cells[0].outputs

    split, whole = printed(("stdout", "a\n"), ("stdout", "b\n")), printed(("stdout", "a\nb\n"))
    assert split == whole and len(whole) == 1
    assert [o.name for o in printed(("stdout", "a\n"), ("stderr", "w\n"), ("stdout", "b\n"))] == [
        "stdout", "stderr", "stdout"]  # another stream between them keeps them apart
