"""The repository's front door: the README's picture is what the code draws, the README's
set-up is two commands and the links resolve, CONTRIBUTING and the book's code walk
(book/code.md) map every module and the walk names only objects that exist (how long each
is, `make lint-book` reports), and
`make test`'s Chromium step installs the browser as root and otherwise stops with the
command to run; the virtualenv step falls back to pip where uv cannot be had, and (slow
tier) installs exactly the pins, torch's file as pip chose it."""
from __future__ import annotations

import importlib
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from debian import machine

from llamanat_core import paths
from llamanat_core.book import diagram
from llamanat_core.paths import ROOT

PICTURE = paths.DIAGRAM_PATH
ENSURE_CHROMIUM = ROOT / "tools" / "ensure_chromium.sh"
DOCS = ("README.md", "CONTRIBUTING.md", "benchmarks/README.md")
LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_the_readme_picture_is_what_the_code_draws():
    """`make book` (make figures) writes it; an edit of the diagram or the reference
    Config that was not followed by `make figures` fails here."""
    assert PICTURE.read_bytes() == diagram.diagram_png(), (
        "artifacts/figures/decoder.png is stale: run `make figures` and commit it")
    assert "](artifacts/figures/decoder.png)" in (ROOT / "README.md").read_text()


@pytest.mark.parametrize("name", DOCS)
def test_relative_links_resolve(name):
    path = ROOT / name
    targets = [t for t in LINK.findall(path.read_text()) if not re.match(r"[a-z]+:", t)]
    missing = [t for t in targets if not (path.parent / t.split("#")[0]).exists()]
    assert not missing, f"{name} links to files that do not exist: {missing}"


def test_readme_is_a_front_door():
    text = (ROOT / "README.md").read_text()
    setup = text.split("## Set-up", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    commands = [line.split("#")[0].strip() for line in setup.strip().splitlines()]
    assert commands == ["make book", "make test"]


def _modules() -> list[str]:
    package = ROOT / "llamanat_core"
    return sorted(p.relative_to(package).as_posix() for p in package.rglob("*.py")
                  if p.name != "__init__.py" and p.name != "__main__.py")


def _mapped(module: str, text: str) -> bool:
    """`x.py` is mapped as `x.py` or, once it has become a package, `x/`; `pkg/x.py` (and
    `layer/pkg/x.py`) as its folder `pkg/` with `x.py` named."""
    *package, name = module.split("/")
    if package:
        return f"`{package[-1]}/`" in text and f"`{name}`" in text
    return f"`{name}`" in text or f"`{name.removesuffix('.py')}/`" in text


def test_contributing_maps_every_module():
    text = (ROOT / "CONTRIBUTING.md").read_text()
    modules = _modules()
    assert "study/plan.py" in modules and "book/helpers/rope.py" in modules  # the scan sees subfolders
    missing = [m for m in modules if not _mapped(m, text)]
    assert not missing, f"CONTRIBUTING.md does not map {missing}"
    assert not _mapped("book/probes/rope.py", text) and not _mapped("trainer.py", text)


# ------------------------------------------------------------------ the code walk (book/code.md)

CODE_PAGE = ROOT / "book" / "code.md"
FENCE = re.compile(r"^```.*?^```", re.M | re.S)
INLINE_CODE = re.compile(r"`([^`\n]+)`")
DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")
FILE_SUFFIXES = {"py", "md", "yml", "json", "csv", "ipynb", "safetensors", "png"}


def _dotted_references(text: str) -> list[str]:
    """Every backticked `module.name` or `Class.method` outside code blocks (file names
    such as `config.py` are not references: the module test covers them)."""
    spans = INLINE_CODE.findall(FENCE.sub(" ", text))
    return [s for s in spans if DOTTED.fullmatch(s) and s.rsplit(".", 1)[1] not in FILE_SUFFIXES]


def _package_modules() -> set[str]:
    """Dotted names of the package's modules and subpackages: `model.blocks`, `study`, `study.run_files`."""
    names = set()
    for path in (ROOT / "llamanat_core").rglob("*.py"):
        parts = path.relative_to(ROOT / "llamanat_core").with_suffix("").parts
        parts = parts[:-1] if parts[-1] == "__init__" else parts
        if parts:
            names.add(".".join(parts))
    return names


def _module_file(module: str) -> Path:
    path = ROOT / "llamanat_core" / Path(*module.split("."))
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def _attributes_resolve(obj, names) -> bool:
    for name in names:
        if not hasattr(obj, name):
            return False
        obj = getattr(obj, name)
    return True


def _resolve(reference: str) -> bool:
    """Whether a dotted reference names an object of llamanat_core: a module of the
    package (its `llamanat_core.` prefix optional) followed by attributes, or a name the
    package defines at the top level of a module (a class, function or constant) followed
    by attributes. A name the package only imports (`torch.compile`) does not resolve."""
    parts = reference.removeprefix("llamanat_core.").split(".")
    modules = _package_modules()
    for i in range(len(parts), 0, -1):  # the longest module prefix first
        if ".".join(parts[:i]) in modules:
            module = importlib.import_module("llamanat_core." + ".".join(parts[:i]))
            return _attributes_resolve(module, parts[i:])
    defines = re.compile(rf"^(?:class|def)\s+{re.escape(parts[0])}\b|^{re.escape(parts[0])}\s*[:=]", re.M)
    owners = [m for m in sorted(modules)
              if defines.search(_module_file(m).read_text())]
    return any(_attributes_resolve(importlib.import_module("llamanat_core." + m), parts)
               for m in owners)


def test_the_code_page_walks_every_module_and_stays_a_map():
    text = CODE_PAGE.read_text()
    missing = [m for m in _modules() if not _mapped(m, text)]
    assert not missing, f"book/code.md does not walk through {missing}"
    assert 1 <= text.count("{literalinclude}") <= 6


def test_every_dotted_name_on_the_code_page_is_in_the_package():
    """A rename breaks the page, not the reader: `blocks.RMSNorm`, `Config.replace`,
    `study.run_files.store`, ... each name an object that exists."""
    references = _dotted_references(CODE_PAGE.read_text())
    assert len(references) >= 10  # the scan sees the page's references
    unresolved = [r for r in references if not _resolve(r)]
    assert not unresolved, f"book/code.md names objects the package does not have: {unresolved}"


def test_the_reference_resolver_can_fail():
    text = "See `blocks.repeat_kv`, `config.py`, `x + y` and\n```{literalinclude} x.py\n`a.b`\n```\n"
    assert _dotted_references(text) == ["blocks.repeat_kv"]
    for good in ("model.blocks.RMSNorm.forward", "Config.replace", "Config.attention",
                 "study.run_files.store", "study.load_results", "llamanat_core.analysis.stats.holm",
                 "TinyLlama.generate", "book.plotting.show"):
        assert _resolve(good), good
    for bad in ("model.blocks.RMSNorm.backward", "Config.no_such_field", "RMSNorm.forwards",
                "study.run_files.nope", "blocks.RMSNorm", "nosuchmodule.thing", "torch.compile",
                "F.scaled_dot_product_attention", "Path.exists"):
        assert not _resolve(bad), bad


def test_the_code_page_is_in_the_toc_before_the_cluster_page():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    (part,) = [p for p in toc["parts"] if p["caption"] == "Running it yourself"]
    files = [c["file"] for c in part["chapters"]]
    assert "book/code" in files and files.index("book/code") < files.index("book/cluster")


# ------------------------------------------------------------------ make test's Chromium step
# tools/ensure_chromium.sh on a temporary machine (tests/debian.py): real tools, an apt
# whose package lists start empty, and Debian's `chromium` package in its archive.

CHROMIUM = {"chromium": "#!/bin/sh\necho Chromium 120\n"}


def test_without_chromium_a_user_is_told_the_command_at_once(tmp_path):
    m = machine(tmp_path, uid=1000).with_apt().package("chromium", CHROMIUM)
    result = m.run(ENSURE_CHROMIUM)
    assert result.returncode == 1 and result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert "`sudo apt-get update && sudo apt-get install -y chromium`" in line
    assert not m.has("chromium") and not m.lists.exists()  # nothing attempted


def test_without_chromium_root_installs_debians_package(tmp_path):
    m = machine(tmp_path, uid=0).with_apt().package("chromium", CHROMIUM)
    result = m.run(ENSURE_CHROMIUM)
    assert result.returncode == 0, result.stderr
    assert m.has("chromium") and m.lists.exists()  # the lists were fetched, then the browser


def test_an_install_that_brings_no_chromium_fails(tmp_path):
    """A package named chromium that puts no browser on the PATH (a snap's stub, say)."""
    m = machine(tmp_path, uid=0).with_apt().package("chromium", {"README": "use the snap\n"})
    result = m.run(ENSURE_CHROMIUM)
    assert result.returncode == 1 and "no chromium" in result.stderr.splitlines()[-1]


def test_an_archive_without_chromium_fails_with_apts_error(tmp_path):
    m = machine(tmp_path, uid=0).with_apt()
    result = m.run(ENSURE_CHROMIUM)
    assert result.returncode != 0 and "Unable to locate package chromium" in result.stderr
    assert not m.has("chromium")


@pytest.mark.parametrize("name", ["chromium", "chromium-browser", "google-chrome"])
def test_with_a_browser_nothing_is_done(tmp_path, name):
    m = machine(tmp_path, uid=0).with_apt().package("chromium", CHROMIUM)
    m.script(name, "#!/bin/sh\n")
    before = sorted(p.name for p in m.bin.iterdir())
    result = m.run(ENSURE_CHROMIUM)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    assert sorted(p.name for p in m.bin.iterdir()) == before and not m.lists.exists()


MAKE_VENV = ROOT / "tools" / "make_venv.sh"


def test_every_requirement_is_pinned_and_the_installer_finds_its_two():
    """requirements.txt is the one list of what is installed: every line `name==version`,
    uv and torch among them (tools/make_venv.sh reads both pins from it)."""
    lines = (ROOT / "requirements.txt").read_text().splitlines()
    assert all(re.fullmatch(r"[A-Za-z0-9_.\-]+==[A-Za-z0-9_.+\-]+", ln) for ln in lines)
    names = {ln.split("==")[0] for ln in lines}
    assert {"uv", "torch"} <= names and len(names) == len(lines)


def _make_venv(venv: Path, env: dict[str, str]):
    """tools/make_venv.sh as `make` runs it (from the repository, with python3), into `venv`."""
    return subprocess.run([shutil.which("bash"), str(MAKE_VENV), str(venv), "python3"], cwd=ROOT,
                          env={**os.environ, **env}, capture_output=True, text=True, timeout=1800)


def _name(project: str) -> str:
    return re.sub(r"[-_.]+", "-", project).lower()


@pytest.mark.pool
def test_where_no_package_can_be_fetched_pip_is_tried_and_its_failure_is_the_scripts(tmp_path):
    """A real new virtualenv on a machine that can fetch nothing (no index, no wheels on
    disk, no pip configuration): uv cannot be had, so the script says it falls back to pip,
    exits with pip's failure, and leaves no temporary folder behind."""
    venv, tmp = tmp_path / "venv", tmp_path / "tmp"
    tmp.mkdir()
    offline = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(tmp_path / "no-wheels"),
               "PIP_CONFIG_FILE": os.devnull, "TMPDIR": str(tmp)}
    result = _make_venv(venv, offline)
    assert result.returncode != 0
    fallback = "uv could not install requirements.txt; installing it with pip instead"
    assert fallback in result.stderr.splitlines()
    assert (venv / "bin" / "python").exists() and not (venv / "bin" / "uv").exists()
    assert not list(tmp.iterdir())


@pytest.mark.slow
def test_a_new_virtualenv_holds_exactly_the_pins(tmp_path):
    """The whole install into a new virtualenv (uv, torch's wheel as pip picks it): every
    line of requirements.txt at its version and nothing else (pip's own aside), torch the
    CPU build, this repository's package importable in editable mode, no temporary folder
    left. Slow tier: it installs ~180 packages (1 GB with torch)."""
    venv, tmp = tmp_path / "venv", tmp_path / "tmp"
    tmp.mkdir()
    result = _make_venv(venv, {"TMPDIR": str(tmp)})
    # pip warns of a machine's own configured index folders that do not exist; not ours
    missing_folder = r"WARNING: Location '.*' is ignored: it is neither a file nor a directory\."
    ours = [ln for ln in result.stderr.splitlines() if not re.fullmatch(missing_folder, ln)]
    assert result.returncode == 0 and not ours, result.stderr
    python = str(venv / "bin" / "python")
    listed = subprocess.run([python, "-m", "pip", "list", "--format=freeze", "--exclude-editable"],
                            capture_output=True, text=True, check=True).stdout.split()
    installed = {_name(n): v for n, v in (line.split("==", 1) for line in listed)}
    pins = {_name(n): v for n, v in (ln.split("==", 1) for ln in
                                     (ROOT / "requirements.txt").read_text().splitlines())}
    wrong = {n: (v, installed.get(n)) for n, v in pins.items() if installed.get(n, "").split("+")[0] != v}
    assert not wrong, f"installed versions differ from the pins: {wrong}"
    assert not set(installed) - set(pins) - {"pip", "setuptools", "wheel"}
    assert installed["torch"].endswith("+cpu")
    where = subprocess.run([python, "-c", "import llamanat_core; print(llamanat_core.__file__)"],
                           capture_output=True, text=True, check=True).stdout.strip()
    assert Path(where).parent == ROOT / "llamanat_core"
    assert not list(tmp.iterdir())
