"""A small Sphinx extension that keeps the book offline (loaded from `_config.yml`).

1. MathJax is served from the book itself, not from a CDN: the MathJax 3 files of the
   pinned `django-static-mathjax` wheel (a plain copy of MathJax's `es5` build) are
   copied into `_static/mathjax/`, and `mathjax_path` points there.
2. Any remote script, stylesheet or image that a page would load is a build warning,
   so `jupyter-book build -W` fails on it instead of publishing a page that reaches
   out to the network.
3. Identical scripts registered twice are written once (a duplicated inline `const`
   is a console error in every page otherwise), and the redirecting index.html gets
   the book's icon (otherwise the browser asks for a /favicon.ico that is not there).
"""
from __future__ import annotations

import shutil
from pathlib import Path

from sphinx.util import logging

logger = logging.getLogger(__name__)

MATHJAX_ENTRY = "tex-mml-chtml.js"  # what Sphinx would load from the CDN, same build
# Bundles we do not load; everything else (fonts, input/output modules, a11y, ui, sre)
# is what the entry point may fetch lazily, so it is copied.
_MATHJAX_SKIP = ("tex-chtml.js", "tex-chtml-full.js", "tex-chtml-full-speech.js", "tex-svg.js",
                 "tex-svg-full.js", "tex-mml-svg.js", "mml-chtml.js", "mml-svg.js", "node-main.js",
                 "*.map")
_REMOTE = ("http://", "https://", "//")


def mathjax_source() -> Path:
    """The es5 folder of the installed MathJax 3 copy."""
    try:
        import mathjax  # django-static-mathjax: a Python package that only carries the files
    except ImportError as exc:  # pragma: no cover - requirements.txt pins it
        raise RuntimeError("the book serves MathJax itself: pip install django-static-mathjax "
                           "(pinned in requirements.txt)") from exc
    es5 = Path(mathjax.__file__).parent / "static" / "mathjax" / "es5"
    if not (es5 / MATHJAX_ENTRY).exists():
        raise RuntimeError(f"MathJax entry point {MATHJAX_ENTRY} not found under {es5}")
    return es5


def _config_inited(app, config) -> None:
    mathjax_source()  # fail early, before any page is read
    config.mathjax_path = f"mathjax/{MATHJAX_ENTRY}"


def _is_remote(uri: str | None) -> bool:
    return bool(uri) and uri.strip().lower().startswith(_REMOTE)


def _asset_key(asset) -> tuple:
    attrs = getattr(asset, "attributes", {}) or {}
    return str(getattr(asset, "filename", asset) or ""), tuple(sorted((k, str(v)) for k, v in attrs.items()))


def _check_page_assets(app, pagename, templatename, context, doctree) -> None:
    for kind in ("script_files", "css_files"):
        assets = context.get(kind)
        if not assets:
            continue
        # Some extensions register the same inline script twice (sphinx-thebe and
        # sphinx-togglebutton under Jupyter Book); a repeated `const` declaration is a
        # SyntaxError in the reader's console. Keep the first of identical assets.
        seen, unique = set(), []
        for asset in assets:
            if (key := _asset_key(asset)) not in seen:
                seen.add(key)
                unique.append(asset)
        assets[:] = unique
        for asset in assets:
            uri = getattr(asset, "filename", asset)
            if _is_remote(str(uri)):
                logger.warning(f"page {pagename!r} would load a remote asset {uri} "
                               "(the book must build and read offline)",
                               type="llamanat", subtype="remote-asset")


def _check_images(app, doctree, docname) -> None:
    from docutils import nodes  # Sphinx brings docutils: only when the book builds

    for node in doctree.findall(nodes.image):
        if _is_remote(node.get("uri")):
            logger.warning(f"remote image {node['uri']} (the book must read offline)",
                           location=node, type="llamanat", subtype="remote-asset")


def _copy_mathjax(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    target = Path(app.outdir) / "_static" / "mathjax"
    shutil.copytree(mathjax_source(), target, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns(*_MATHJAX_SKIP))


def _complete_redirect_page(app, exception) -> None:
    """sphinx-external-toc writes index.html as a bare refresh tag; give it a title and the
    book's icon so a browser opening it does not go looking for /favicon.ico."""
    if exception is not None or app.builder.format != "html":
        return
    index = Path(app.outdir) / "index.html"
    if not index.exists():
        return
    text = index.read_text(encoding="utf-8")
    if "<html" in text.lower() or 'http-equiv="refresh"' not in text.lower():
        return
    icon = ""
    if app.config.html_favicon:
        icon = f'<link rel="icon" href="_static/{Path(app.config.html_favicon).name}" />'
    index.write_text(f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8" />'
                     f"<title>{app.config.html_title or app.config.project}</title>{icon}"
                     f"{text.strip()}</head><body></body></html>\n", encoding="utf-8")


def setup(app):
    app.connect("config-inited", _config_inited, priority=900)
    app.connect("html-page-context", _check_page_assets, priority=999)  # after every other
    app.connect("doctree-resolved", _check_images)
    app.connect("build-finished", _copy_mathjax)
    app.connect("build-finished", _complete_redirect_page, priority=900)  # after etoc writes it
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
