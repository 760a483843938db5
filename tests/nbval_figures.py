"""nbval compares the chapters' figures too: a pytest plugin. tests/conftest.py applies it
whenever tests/ is part of the session (as in `make test`); on its own, for one chapter:

    PYTHONPATH=tests pytest -p nbval_figures --nbval --nbval-current-env artifacts/NAME.ipynb
"""
import hashlib

PNG = "image/png"


def png_digest(value):
    """A figure as its digest: nbval then compares PNG bytes, and a failure prints two short
    digests instead of two base64 images."""
    if isinstance(value, str) and value.startswith("iVBORw0KGgo"):  # base64 of the PNG signature
        return "PNG sha256:" + hashlib.sha256(value.encode()).hexdigest()[:16]
    return value


def compare_figures_too(items) -> None:
    """nbval skips image outputs unless it runs with nbdime; the chapters' figures are
    deterministic (same data, same bytes), so nbval compares them as well: re-executing a
    committed notebook must reproduce every figure byte for byte."""
    for item in items:
        notebook = item.parent
        if PNG in getattr(notebook, "skip_compare", ()):
            notebook.skip_compare = tuple(k for k in notebook.skip_compare if k != PNG)
            cell = type(item)
            if not getattr(cell, "_figures_as_digests", False):
                sanitize = cell.sanitize
                cell.sanitize = lambda self, s, _sanitize=sanitize: _sanitize(self, png_digest(s))
                cell._figures_as_digests = True


def pytest_collection_modifyitems(config, items):  # the hook when loaded with -p
    compare_figures_too(items)
