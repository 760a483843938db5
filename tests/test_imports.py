"""The package imports only downward: model core -> training -> study -> analysis -> book.
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

# The layers, lowest first (CONTRIBUTING.md draws them). A top-level module or subpackage
# belongs to one layer; it may import its own layer and the layers below, never above.
LAYERS = {
    "model core": ("paths", "util", "config", "positional", "blocks", "kv", "published", "model", "hf"),
    "training": ("tasks", "rdata", "corpus", "text", "ngram", "optim", "schedule", "train", "fast",
                 "text_train", "sampling"),
    "study": ("study",),
    "analysis": ("stats", "sequential", "paired", "families", "comparisons", "text_comparisons",
                 "text_design", "text_design_check", "sensitivity", "solve_times", "study_wide", "two_stage",
                 "decision_tables", "replication", "report", "claims", "scorecard"),
    "book": ("plotting", "probes", "mechanism", "inside", "diagram", "chapters", "commands", "cli",
             "book_ext"),
}
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
    """A module's layer: the package's own __init__ sits with the model core it re-exports."""
    parts = module.split(".")
    return 0 if len(parts) == 1 else layers[parts[1]]


def upward(edges: list[Edge], layers: dict[str, int] = LEVEL) -> list[Edge]:
    return [e for e in edges if layer(e.target, layers) > layer(e.source, layers)]


# ---------------------------------------------------------------- the package

EDGES = import_graph(PACKAGE_DIR)


def test_the_graph_sees_imports_at_module_level_and_inside_functions():
    """A sanity check of the reader on edges known to exist (so an empty graph cannot pass)."""
    seen = {(e.source, e.target) for e in EDGES}
    assert ("llamanat_core.study.results", "llamanat_core.study.run_files") in seen
    assert ("llamanat_core.two_stage", "llamanat_core.comparisons") in seen


def test_every_module_has_a_layer():
    top = {p.relative_to(PACKAGE_DIR).parts[0].removesuffix(".py") for p in PACKAGE_DIR.rglob("*.py")}
    assert not top - {"__init__", "__main__"} - set(LEVEL), "add the module to LAYERS and CONTRIBUTING.md"


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
print(sorted(m for m in ("torch", "numpy", "pandas", "llamanat_core.commands", "llamanat_core.config")
             if m in sys.modules))
"""


def test_help_and_a_usage_error_load_no_torch():
    """`llamanat --help`, a subcommand's --help and a mistyped argument answer from the
    parser alone: neither torch, numpy, pandas nor the commands' module is loaded (the
    package's config is: the scan sees the package's modules)."""
    out = subprocess.run([sys.executable, "-c", HELP_LOADS], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "usage: llamanat" in out.stdout and "invalid choice: 'nope'" in out.stderr
    assert out.stdout.splitlines()[-1] == "['llamanat_core.config']"


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
    package = _fake_package(tmp_path, {
        "kv.py": "", "study/__init__.py": "", "probes/__init__.py": "", "probes/alphabet.py": "",
        "study/checkpoints.py": "from ..kv import x\nfrom ..probes.alphabet import CHECKPOINT\n",
    })
    layers = {"kv": 0, "study": 2, "probes": 4}
    assert [(e.source, e.target) for e in upward(import_graph(package), layers)] == [
        ("fake.study.checkpoints", "fake.probes.alphabet")]


@pytest.mark.parametrize("statement, target", [
    ("from . import kv", "fake.kv"),  # a submodule named in `from . import`
    ("from .kv import KVCache", "fake.kv"),
    ("import fake.kv", "fake.kv"),
    ("from fake import kv", "fake.kv"),
])
def test_every_spelling_of_an_import_is_an_edge(tmp_path, statement, target):
    package = _fake_package(tmp_path, {"kv.py": "", "model.py": statement + "\n"})
    assert [e.target for e in import_graph(package) if e.source == "fake.model"] == [target]
