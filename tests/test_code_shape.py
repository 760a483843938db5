"""The code stays the shape a reader can open: no function over a screen, no logic in chapters."""
from __future__ import annotations

import ast
import inspect
import re
import textwrap

from llamanat_core.paths import ROOT

MAX_FUNCTION_LINES = 60
MAX_CHAPTER_FUNCTION_BODY = 4


def long_functions(paths) -> list[str]:
    out = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    out.append(f"{path.name}:{node.lineno} {node.name} ({lines} lines)")
    return out


def chapter_functions(text: str) -> list[tuple[str, int]]:
    """(name, non-blank body lines) of every function a chapter source defines."""
    lines = text.split("\n")
    out = []
    for i, line in enumerate(lines):
        m = re.match(r"^(\s*)def (\w+)", line)
        if not m:
            continue
        indent, j = len(m.group(1)), i + 1
        while j < len(lines) and (not lines[j].strip() or len(lines[j]) - len(lines[j].lstrip()) > indent):
            j += 1
        body = [b for b in lines[i + 1:j] if b.strip() and not b.strip().startswith("```")]
        out.append((m.group(2), len(body)))
    return out


def test_no_function_over_sixty_lines():
    paths = sorted((ROOT / "llamanat_core").rglob("*.py")) + sorted((ROOT / "benchmarks").glob("*.py"))
    assert len(paths) > 20
    assert not long_functions(paths)


def test_the_check_sees_a_long_function(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    (tmp_path / "long.py").write_text(f"def long():\n{body}\n\n\ndef short():\n    return 1\n")
    assert long_functions([tmp_path / "long.py"]) == [f"long.py:1 long ({MAX_FUNCTION_LINES + 1} lines)"]


def test_chapters_define_no_logic():
    """A chapter may bind a one-line helper; anything longer lives in the package, tested."""
    sizes = {f"{p.stem}.{name}": n for p in sorted((ROOT / "chapters").glob("*.md"))
             for name, n in chapter_functions(p.read_text())}
    assert sizes, "the scan found no function at all: it is broken"
    assert {k: n for k, n in sizes.items() if n > MAX_CHAPTER_FUNCTION_BODY} == {}
    assert chapter_functions("def f(x):\n    a = 1\n\n    return a\nprint(1)") == [("f", 2)]


def branches(source: str) -> int:
    """if statements, conditional expressions, loops and try blocks in some source."""
    kinds = (ast.If, ast.IfExp, ast.For, ast.While, ast.Try, ast.Match)
    return sum(isinstance(node, kinds) for node in ast.walk(ast.parse(textwrap.dedent(source))))


def test_the_attention_the_book_shows_reads_top_to_bottom():
    """The chapters show `Attention.forward` whole: at most two branches (the rotary
    tables and the returned weights); the cache and the three paths live in helpers."""
    from llamanat_core.model.blocks import Attention

    assert branches(inspect.getsource(Attention.forward)) <= 2
    # the check can fail: a forward choosing its path inline, as the layer once did
    inline = ("def forward(x):\n    if rope is not None:\n        pass\n    if cache is not None:\n"
              "        pass\n    if return_weights:\n        pass\n    elif manual:\n        pass\n"
              "    return out if weights is None else (out, weights)\n")
    assert branches(inline) == 5
