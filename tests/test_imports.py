"""The package imports only downward, and its folders are its layers: core (paths, util)
-> model -> data -> train -> study -> analysis -> book -> the command line (cli, commands).
The graph is read from the source with `ast`, imports inside functions included, so an
import moved into a function to dodge a cycle is still an edge (and a cycle through it
still fails). A function imports packages from outside (heavy or optional ones: Ray,
transformers, papermill, ...); one of the package's own modules only with its reason in a
comment on the line or just above it (the command line loads its commands only once its
arguments parse, so `--help` answers at once)."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from llamanat_core.paths import PACKAGE_DIR

# The layers, lowest first (CONTRIBUTING.md draws them): each is a folder of the package,
# but the lowest and the highest, whose modules sit at the top level and are listed by name.
# A module may import its own layer and the layers below, never above. Model and data import
# nothing of each other (the tasks' tokens are plain integers; `Config`'s vocabulary sizes
# are numbers), so either order is downward: the model, which every layer above builds on,
# sits lower.
LAYERS = {
    "core": ("paths", "util"),
    "model": ("model",),
    "data": ("data",),
    "train": ("train",),
    "study": ("study",),
    "analysis": ("analysis",),
    "book": ("book",),
    "command line": ("cli", "commands"),
}
# The package's own __init__ re-exports the model's `Config` (and `TinyLlama`, lazily): it
# sits with the model layer, so a core module cannot import the package's top level.
PACKAGE_INIT_LAYER = "model"
LEVEL = {name: i for i, names in enumerate(LAYERS.values()) for name in names}


class Edge:
    """One import: `source` imports `target` at `line`, inside a function or not, with the
    comment that gives its reason (on its line or the comment lines just above; "" if none)."""

    def __init__(self, source: str, target: str, line: int, in_function: bool, reason: str = ""):
        self.source, self.target, self.line, self.in_function = source, target, line, in_function
        self.reason = reason

    def __repr__(self):
        where = " (inside a function)" if self.in_function else ""
        return f"{self.source} -> {self.target} at line {self.line}{where}"


def _module_name(path: Path, package: Path) -> str:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _function_nodes(tree: ast.AST) -> set[int]:
    """The ids of every node inside a function body."""
    inside = set()
    for f in ast.walk(tree):
        if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            inside |= {id(n) for n in ast.walk(f) if n is not f}
    return inside


def _targets(node, name: str, is_package: bool, modules: set[str]) -> list[str]:
    """The package's modules an import statement loads (a named submodule, else its parent)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name in modules]
    if node.level:
        base = name.split(".") if is_package else name.split(".")[:-1]
        base = base[:len(base) - node.level + 1]
        parent = ".".join(base + ([node.module] if node.module else []))
    else:
        parent = node.module or ""
    subs = [f"{parent}.{a.name}" for a in node.names if f"{parent}.{a.name}" in modules]
    plain = len(subs) < len(node.names)  # some names are objects of `parent` itself
    return subs + ([parent] if plain and parent in modules else [])


def _reason(lines: list[str], lineno: int) -> str:
    """The comment on line `lineno` (1-based) after the code, else the comment lines
    directly above it."""
    line = lines[lineno - 1]
    if "#" in line:
        return line.split("#", 1)[1].strip()
    above = []
    for prev in reversed(lines[:lineno - 1]):
        if not prev.strip().startswith("#"):
            break
        above.insert(0, prev.strip().lstrip("#").strip())
    return " ".join(above)


def import_graph(package: Path) -> list[Edge]:
    """Every import between the package's own modules, module level and inside functions."""
    files = {_module_name(p, package): p for p in sorted(package.rglob("*.py"))}
    edges = []
    for name, path in files.items():
        text = path.read_text()
        tree, lines = ast.parse(text, filename=str(path)), text.splitlines()
        inside = _function_nodes(tree)
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in _targets(node, name, path.name == "__init__.py", set(files)):
                    if target != name:
                        edges.append(Edge(name, target, node.lineno, id(node) in inside,
                                          _reason(lines, node.lineno)))
    return edges


def cycles(edges: list[Edge]) -> list[list[str]]:
    """The import cycles: each strongly connected set of more than one module (Tarjan),
    or a module importing itself."""
    graph: dict[str, set[str]] = {}
    for e in edges:
        graph.setdefault(e.source, set()).add(e.target)
        graph.setdefault(e.target, set())
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while not component or component[-1] != v:
                component.append(stack.pop())
                on_stack.discard(component[-1])
            if len(component) > 1 or v in graph[v]:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def layer(module: str, layers: dict[str, int] = LEVEL) -> int:
    """A module's layer: its folder's (a top-level module's own); the package's own
    __init__ sits with the model layer it re-exports."""
    parts = module.split(".")
    return layers[PACKAGE_INIT_LAYER] if len(parts) == 1 else layers[parts[1]]


def upward(edges: list[Edge], layers: dict[str, int] = LEVEL) -> list[Edge]:
    return [e for e in edges if layer(e.target, layers) > layer(e.source, layers)]


# ---------------------------------------------------------------- the package

EDGES = import_graph(PACKAGE_DIR)


def test_the_graph_sees_imports_at_module_level_and_inside_functions():
    """A sanity check of the reader on edges known to exist (so an empty graph cannot pass)."""
    seen = {(e.source, e.target) for e in EDGES}
    assert ("llamanat_core.study.results", "llamanat_core.study.run_files") in seen
    assert ("llamanat_core.analysis.two_stage", "llamanat_core.analysis.comparisons") in seen


TOP_LEVEL = {"__init__.py", "paths.py", "util.py", "cli.py", "commands.py"}
FOLDERS = set(LEVEL) - {name.removesuffix(".py") for name in TOP_LEVEL}


def strays(package: Path) -> list[str]:
    """The package's modules outside a layer folder: a top-level module beyond the five
    (the package's __init__, the core's paths and util, the command line's cli and commands),
    or a folder that is not a layer."""
    found = []
    for path in sorted(package.rglob("*.py")):
        top = path.relative_to(package).parts
        if len(top) == 1 and top[0] not in TOP_LEVEL or len(top) > 1 and top[0] not in FOLDERS:
            found.append(path.relative_to(package).as_posix())
    return found


def test_every_module_lives_in_a_layer_folder():
    """A new module goes in its layer's folder; the top level holds only the lowest and the
    highest layers' five files."""
    assert not strays(PACKAGE_DIR), "move these into a layer folder (LAYERS, CONTRIBUTING.md)"
    assert {p.name for p in PACKAGE_DIR.glob("*.py")} == TOP_LEVEL
    assert {p.name for p in PACKAGE_DIR.iterdir() if (p / "__init__.py").exists()} == FOLDERS


def test_a_stray_module_is_caught(tmp_path):
    package = _fake_package(tmp_path, {"paths.py": "", "model/__init__.py": "", "model/kv.py": "",
                                       "trainer.py": "", "probes/__init__.py": "", "probes/norm.py": "",
                                       "cli/__init__.py": ""})
    assert strays(package) == ["cli/__init__.py", "probes/__init__.py", "probes/norm.py", "trainer.py"]


def test_the_package_has_no_import_cycle():
    found = cycles(EDGES)
    assert not found, f"import cycles: {found}"


def test_the_package_imports_only_downward():
    found = upward(EDGES)
    assert not found, f"imports from a higher layer: {found}"


def unexplained(edges: list[Edge]) -> list[Edge]:
    return [e for e in edges if e.in_function and not e.reason]


def test_no_function_imports_the_package_without_a_reason():
    """An import inside a function hides a dependency; of the package's own modules it is
    how a cycle was dodged, unless its comment says why the function loads it (the cycle
    would fail above anyway)."""
    found = unexplained(EDGES)
    assert not found, (f"move these imports to the top of their module, or say in a comment "
                       f"why the function imports them: {found}")


HELP_LOADS = """
import sys
from llamanat_core.cli import main
for argv in (["--help"], ["study", "--help"], ["fit", "--variant", "nope", "--task", "recall"]):
    try:
        main(argv)
    except SystemExit:
        pass
print(sorted(m for m in ("torch", "numpy", "pandas", "llamanat_core.commands", "llamanat_core.model.config")
             if m in sys.modules))
"""


@pytest.mark.pool  # starts a Python (or dpkg) subprocess: not the inner loop
def test_help_and_a_usage_error_load_no_torch():
    """`llamanat --help`, a subcommand's --help and a mistyped argument answer from the
    parser alone: neither torch, numpy, pandas nor the commands' module is loaded (the
    package's config is: the scan sees the package's modules)."""
    out = subprocess.run([sys.executable, "-c", HELP_LOADS], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "usage: llamanat" in out.stdout and "invalid choice: 'nope'" in out.stderr
    assert out.stdout.splitlines()[-1] == "['llamanat_core.model.config']"


# ---------------------------------------------------------------- the checks can fail

def _fake_package(root: Path, files: dict[str, str]) -> Path:
    package = root / "fake"
    for name, text in {"__init__.py": "", **files}.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(text)
    return package


def test_a_cycle_through_an_import_inside_a_function_is_caught(tmp_path):
    package = _fake_package(tmp_path, {
        "cache.py": "def trained():\n    from .results import fresh\n    return fresh\n",
        "results.py": "from .cache import trained\n",
        "study/__init__.py": "",
        "study/plan.py": "from ..cache import trained\n",
    })
    edges = import_graph(package)
    assert cycles(edges) == [["fake.cache", "fake.results"]]
    assert [(e.source, e.target) for e in edges if e.in_function] == [("fake.cache", "fake.results")]


def test_a_function_import_without_its_reason_is_caught(tmp_path):
    package = _fake_package(tmp_path, {
        "kv.py": "",
        "cli.py": ("def main():\n    from . import kv\n"
                   "def help():\n    from . import kv  # lazy: --help answers at once\n"
                   "def run():\n    # lazy: the commands load torch\n"
                   "    # (seconds)\n    from . import kv\n"),
    })
    edges = [e for e in import_graph(package) if e.source == "fake.cli"]
    assert [e.reason for e in edges] == [
        "", "lazy: --help answers at once", "lazy: the commands load torch (seconds)"]
    assert [e.line for e in unexplained(edges)] == [2]


def test_an_upward_import_is_caught(tmp_path):
    """Planted in a copy of the package's own layout: the study importing a chapter helper
    of the book, beside a downward import of the model that must pass."""
    package = _fake_package(tmp_path, {
        "model/__init__.py": "", "model/kv.py": "", "study/__init__.py": "",
        "book/__init__.py": "", "book/helpers/__init__.py": "", "book/helpers/alphabet.py": "",
        "study/checkpoints.py": "from ..model.kv import x\nfrom ..book.helpers.alphabet import CHECKPOINT\n",
    })
    found = upward(import_graph(package))
    assert [(e.source, e.target) for e in found] == [("fake.study.checkpoints", "fake.book.helpers.alphabet")]
    assert "fake.study.checkpoints -> fake.book.helpers.alphabet" in repr(found)


def test_an_upward_import_into_the_top_level_is_caught(tmp_path):
    """A top-level module has its own layer: the core importing the command line, or the
    package's __init__ (it sits with the model layer), is upward; the command line importing
    the book is not."""
    package = _fake_package(tmp_path, {
        "__init__.py": "from .model.config import Config\n", "model/__init__.py": "", "model/config.py": "",
        "book/__init__.py": "", "book/execute.py": "",
        "util.py": "from . import commands\nfrom . import Config\n",
        "commands.py": "from .book.execute import run_chapters\n",
    })
    assert sorted((e.source, e.target) for e in upward(import_graph(package))) == [
        ("fake.util", "fake"), ("fake.util", "fake.commands")]


@pytest.mark.parametrize("statement, target", [
    ("from . import kv", "fake.kv"),  # a submodule named in `from . import`
    ("from .kv import KVCache", "fake.kv"),
    ("import fake.kv", "fake.kv"),
    ("from fake import kv", "fake.kv"),
])
def test_every_spelling_of_an_import_is_an_edge(tmp_path, statement, target):
    package = _fake_package(tmp_path, {"kv.py": "", "model.py": statement + "\n"})
    assert [e.target for e in import_graph(package) if e.source == "fake.model"] == [target]
