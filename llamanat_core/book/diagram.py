"""The decoder drawn in code: every box, label and number comes from a Config.

    token embedding -> n_layers x [RMSNorm -> attention -> add -> RMSNorm -> SwiGLU -> add]
    -> final norm -> output head (tied with the embedding)

Flow runs bottom to top. One decoder layer is drawn in full inside a frame marked with
the layer count. `highlight` colours one component and greys the rest, so a chapter can
point at the part it takes apart; every patch carries its component as its `gid`.
"""
from __future__ import annotations

import matplotlib.colors as mcolors
import matplotlib.pyplot as plt
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch
from matplotlib.path import Path

from ..model.config import REFERENCE, Config
from .plotting import BLUE, GREEN, NEUTRAL, ORANGE, PURPLE, SKY, VERMILION, png_bytes, use_book_style

# component -> its colour when nothing is highlighted (Okabe-Ito, lightened behind text)
COLORS = {"embedding": SKY, "head": SKY, "norm": GREEN, "attention": BLUE, "gqa": BLUE,
          "rope": PURPLE, "swiglu": ORANGE, "residual": "#000000", "kv_cache": "#F0E442"}
HIGHLIGHT = VERMILION
GREY = "#ebebeb"
HIGHLIGHTS = ("embedding", "norm", "attention", "rope", "gqa", "swiglu", "residual", "kv_cache", "head")

X0, X1 = 2.2, 7.2  # the main column
COLS = ((2.2, 3.75), (3.9, 5.45), (5.6, 7.15))  # q, k, v (and gate, up on the left two)


def _tint(color: str, amount: float = 0.45) -> str:
    """`color` mixed with white: a face light enough for black text."""
    r, g, b = mcolors.to_rgb(color)
    return mcolors.to_hex((1 - amount * (1 - r), 1 - amount * (1 - g), 1 - amount * (1 - b)))


def _members(highlight: str, cfg: Config) -> set[str]:
    """The components a highlight colours: the attention includes its K/V heads, and a
    tied head is the embedding matrix, so either name colours both."""
    if highlight == "attention":
        return {"attention", "gqa"}
    if highlight in ("embedding", "head") and cfg.tie_embeddings:
        return {"embedding", "head"}
    return {highlight}


class _Drawer:
    """Draws the diagram's boxes, frames, arrows and residual adds on one axes, each in its
    component's colour (or highlighted / greyed when a highlight is set)."""
    def __init__(self, ax, lit: set[str] | None):
        self.ax, self.lit = ax, lit

    def face(self, component: str) -> str:
        if self.lit is None:
            return _tint(COLORS[component])
        return HIGHLIGHT if component in self.lit else GREY

    def edge(self, component: str) -> str:
        if self.lit is None:
            return COLORS[component]
        return "#000000" if component in self.lit else NEUTRAL

    def ink(self, component: str) -> str:
        if self.lit is None:
            return "#000000"
        return "#ffffff" if component in self.lit else "#777777"

    def box(self, x0, x1, y0, y1, text, component, dashed=False, fontsize=8):
        patch = FancyBboxPatch((x0, y0), x1 - x0, y1 - y0, boxstyle="round,pad=0,rounding_size=0.08",
                               facecolor=self.face(component), edgecolor=self.edge(component),
                               lw=1.0, ls="--" if dashed else "-", gid=component, zorder=3)
        self.ax.add_patch(patch)
        self.ax.text((x0 + x1) / 2, (y0 + y1) / 2, text, ha="center", va="center", fontsize=fontsize,
                     color=self.ink(component), zorder=4)
        return patch

    def frame(self, x0, x1, y0, y1, component, label):
        """An outline around a group of boxes (no face: it never hides the boxes)."""
        self.ax.add_patch(FancyBboxPatch((x0, y0), x1 - x0, y1 - y0, facecolor="none",
                                         boxstyle="round,pad=0,rounding_size=0.15",
                                         edgecolor=self.edge(component), lw=1.2, zorder=2))
        self.ax.text(x1 + 0.15, y1, label, ha="left", va="top", fontsize=8, zorder=4,
                     color=self.edge(component) if self.lit is not None else "#000000")

    def arrow(self, points, component=None, dashed=False):
        """A connector through `points`; residual connections carry their component."""
        color = "#444444" if component is None else self.edge(component)
        if component == "residual" and self.lit is not None and "residual" in self.lit:
            color = HIGHLIGHT
        codes = [Path.MOVETO] + [Path.LINETO] * (len(points) - 1)
        patch = FancyArrowPatch(path=Path(points, codes), arrowstyle="-|>", mutation_scale=9,
                                color=color, lw=1.6 if component == "residual" else 1.0,
                                ls="--" if dashed else "-", gid=component, zorder=1)
        self.ax.add_patch(patch)

    def add(self, y):
        face = HIGHLIGHT if self.lit is not None and "residual" in self.lit else "white"
        self.ax.add_patch(Circle(((X0 + X1) / 2, y), 0.25, facecolor=face, gid="residual", zorder=3,
                                 edgecolor=self.edge("residual") if self.lit else "#000000", lw=1.2))
        self.ax.text((X0 + X1) / 2, y, "+", ha="center", va="center", fontsize=12, zorder=4,
                     color="#ffffff" if face == HIGHLIGHT else "#000000")


def _check_drawable(cfg: Config, highlight: str | None) -> None:
    """Raise ValueError for a highlight or a config the drawing cannot show."""
    if highlight is not None and highlight not in HIGHLIGHTS:
        raise ValueError(f"unknown highlight {highlight!r}; choose one of {list(HIGHLIGHTS)}")
    if cfg.norm_position != "pre":
        raise ValueError(f"block_diagram draws the pre-norm decoder; Config.norm_position is "
                         f"{cfg.norm_position!r}")
    if highlight == "rope" and cfg.position != "rope":
        raise ValueError("this config has no RoPE to highlight (Config.position='learned')")
    if highlight == "swiglu" and cfg.mlp != "swiglu":
        raise ValueError(f"this config has no SwiGLU to highlight (Config.mlp={cfg.mlp!r})")


def block_diagram(cfg: Config | None = None, highlight: str | None = None):
    """The decoder of `cfg` (default: the reference) as a matplotlib Figure.

    `highlight` (one of HIGHLIGHTS) colours that component and greys the rest. The
    drawing is of the pre-norm decoder; a config it cannot show raises ValueError."""
    cfg = REFERENCE if cfg is None else cfg
    _check_drawable(cfg, highlight)
    use_book_style()
    fig, ax = plt.subplots(figsize=(7.0, 10.0))
    ax.set_xlim(0, 10)
    ax.set_ylim(0, 16.2)
    ax.axis("off")
    d = _Drawer(ax, None if highlight is None else _members(highlight, cfg))
    # bottom to top, in the order the patches have always been added (it fixes the PNG's bytes)
    _draw_input(d, cfg)
    _draw_attention(d, cfg)
    _draw_feed_forward(d, cfg)
    _draw_output(d, cfg)
    return fig


MID = (X0 + X1) / 2  # the main column's centre line
CENTRES = [(a + b) / 2 for a, b in COLS]


def _norm_name(cfg: Config) -> str:
    return "RMSNorm" if cfg.norm == "rms" else "LayerNorm"


def _draw_input(d: _Drawer, cfg: Config) -> None:
    """Token ids -> embedding (+ the learned position table of the control), the frame of
    one decoder layer, its first norm and the residual path around attention."""
    ax, mid, d_model = d.ax, MID, cfg.d_model
    ax.text(mid, 0.3, "token ids", ha="center", va="center", fontsize=9)
    if cfg.position == "learned":
        d.box(X0, mid - 0.1, 0.7, 1.3, f"token embedding\n{cfg.vocab_size} × {d_model}", "embedding")
        d.box(mid + 0.1, X1, 0.7, 1.3, f"+ position table\n{cfg.max_seq_len} × {d_model}", "embedding")
    else:
        d.box(X0, X1, 0.7, 1.3, f"token embedding  {cfg.vocab_size} × {d_model}", "embedding")
    d.arrow([(mid, 0.45), (mid, 0.7)])

    # one decoder layer, drawn in full
    ax.add_patch(FancyBboxPatch((0.5, 1.75), 8.9, 11.6, boxstyle="round,pad=0,rounding_size=0.2",
                                facecolor="none", edgecolor="#999999", lw=1.0, ls=":", zorder=0))
    ax.text(0.6, 13.25, f"× {cfg.n_layers} decoder layers", ha="left", va="top", fontsize=9,
            fontweight="bold")
    d.arrow([(mid, 1.3), (mid, 2.2)])
    d.box(X0, X1, 2.2, 2.7, f"{_norm_name(cfg)} ({d_model})", "norm")
    d.arrow([(mid, 1.95), (1.0, 1.95), (1.0, 8.75), (mid - 0.25, 8.75)], "residual")


def _draw_attention(d: _Drawer, cfg: Config) -> None:
    """q, k, v projections, RoPE on q and k, K/V heads repeated, scores, o; the KV cache."""
    ax, mid, centre = d.ax, MID, CENTRES
    d_model, heads, kv, hd = cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
    d.frame(2.0, 7.35, 3.1, 7.7, "attention",
            f"attention (causal)\n{heads} query heads\n{kv} KV head{'s' if kv > 1 else ''}")
    ax.plot([mid, mid], [2.7, 2.95], color="#444444", lw=1.0, zorder=1)
    ax.plot([centre[0], centre[2]], [2.95, 2.95], color="#444444", lw=1.0, zorder=1)
    for c in centre:
        d.arrow([(c, 2.95), (c, 3.3)])
    d.box(*COLS[0], 3.3, 3.9, f"q_proj\n{d_model} → {heads}×{hd}", "attention")
    d.box(*COLS[1], 3.3, 3.9, f"k_proj\n{d_model} → {kv}×{hd}", "gqa")
    d.box(*COLS[2], 3.3, 3.9, f"v_proj\n{d_model} → {kv}×{hd}", "gqa")
    if cfg.position == "rope":
        for col in COLS[:2]:
            d.box(*col, 4.3, 4.75, "RoPE", "rope")
        d.arrow([(centre[0], 3.9), (centre[0], 4.3)])
        d.arrow([(centre[1], 3.9), (centre[1], 4.3)])
        d.arrow([(centre[0], 4.75), (centre[0], 6.0)])
        d.arrow([(centre[1], 4.75), (centre[1], 5.15)])
        k_out = (COLS[1][1], 4.52)  # the cache keeps keys already rotated
    else:
        d.arrow([(centre[0], 3.9), (centre[0], 6.0)])
        d.arrow([(centre[1], 3.9), (centre[1], 5.15)])
        k_out = (centre[1], 4.52)  # from the key line: the v_proj box sits beside k_proj
    d.arrow([(centre[2], 3.9), (centre[2], 5.15)])
    d.box(COLS[1][0], COLS[2][1], 5.15, 5.6, f"repeat_kv ×{cfg.n_rep}: {kv} → {heads} heads", "gqa")
    d.arrow([(centre[1], 5.6), (centre[1], 6.0)])
    d.arrow([(centre[2], 5.6), (centre[2], 6.0)])
    d.box(X0, X1, 6.0, 6.6, f"softmax(q·kᵀ / √{hd}, causal) · v", "attention")
    d.arrow([(mid, 6.6), (mid, 6.95)])
    d.box(X0, X1, 6.95, 7.5, f"o_proj  {heads}×{hd} → {d_model}", "attention")
    d.arrow([(mid, 7.5), (mid, 8.5)])

    # the KV cache of generation: keys (rotated) and values of every past position
    d.box(7.75, 9.75, 3.3, 4.9, f"KV cache\nK and V, {kv}×{hd}\nper layer and\nposition", "kv_cache",
          dashed=True)
    d.arrow([k_out, (7.75, k_out[1])], dashed=True)
    d.arrow([(COLS[2][1], 3.45), (7.75, 3.45)], dashed=True)


def _draw_feed_forward(d: _Drawer, cfg: Config) -> None:
    """The residual add after attention, the second norm, and the feed-forward: SwiGLU
    (gate, up, down), or the GELU control's two matrices; then the second residual add."""
    ax, mid, d_model = d.ax, MID, cfg.d_model
    d.add(8.75)
    d.arrow([(mid, 9.0), (mid, 9.2)])
    d.box(X0, X1, 9.2, 9.7, f"{_norm_name(cfg)} ({d_model})", "norm")
    d.arrow([(mid, 9.08), (1.0, 9.08), (1.0, 12.95), (mid - 0.25, 12.95)], "residual")
    ax.plot([mid, mid], [9.7, 9.9], color="#444444", lw=1.0, zorder=1)
    if cfg.mlp == "swiglu":
        d.frame(2.0, 7.35, 10.05, 12.45, "swiglu", f"SwiGLU\nd_ff = {cfg.d_ff}")
        gate, up = (COLS[0][0], 4.6), (4.8, COLS[2][1])
        ax.plot([(gate[0] + gate[1]) / 2, (up[0] + up[1]) / 2], [9.9, 9.9], color="#444444", lw=1.0)
        for a, b in (gate, up):
            d.arrow([((a + b) / 2, 9.9), ((a + b) / 2, 10.25)])
            d.arrow([((a + b) / 2, 10.8), ((a + b) / 2, 11.1)])
        d.box(*gate, 10.25, 10.8, f"gate_proj  {d_model} → {cfg.d_ff}", "swiglu")
        d.box(*up, 10.25, 10.8, f"up_proj  {d_model} → {cfg.d_ff}", "swiglu")
        d.box(X0, X1, 11.1, 11.55, "silu(gate) ⊙ up", "swiglu")
        d.box(X0, X1, 11.85, 12.3, f"down_proj  {cfg.d_ff} → {d_model}", "swiglu")
    else:
        d.frame(2.0, 7.35, 10.05, 12.45, "swiglu", f"GELU MLP\nwidth {cfg.gelu_ff}")
        d.arrow([(mid, 9.9), (mid, 10.25)])
        d.arrow([(mid, 10.8), (mid, 11.1)])
        d.box(X0, X1, 10.25, 10.8, f"up_proj  {d_model} → {cfg.gelu_ff}", "swiglu")
        d.box(X0, X1, 11.1, 11.55, "gelu", "swiglu")
        d.box(X0, X1, 11.85, 12.3, f"down_proj  {cfg.gelu_ff} → {d_model}", "swiglu")
    d.arrow([(mid, 11.55), (mid, 11.85)])
    d.arrow([(mid, 12.3), (mid, 12.7)])
    d.add(12.95)


def _draw_output(d: _Drawer, cfg: Config) -> None:
    """The final norm and the output head (tied or not)."""
    mid, d_model = MID, cfg.d_model
    d.arrow([(mid, 13.2), (mid, 13.8)])
    d.box(X0, X1, 13.8, 14.3, f"final {_norm_name(cfg)} ({d_model})", "norm")
    d.arrow([(mid, 14.3), (mid, 14.7)])
    tied = "tied: the embedding matrix" if cfg.tie_embeddings else "its own matrix"
    d.box(X0, X1, 14.7, 15.4, f"output head  {d_model} → {cfg.vocab_size}\n({tied})", "head")
    d.arrow([(mid, 15.4), (mid, 15.7)])
    d.ax.text(mid, 15.9, "next-token logits", ha="center", va="center", fontsize=9)


def diagram_png(cfg: Config | None = None) -> bytes:
    """The PNG bytes of `block_diagram(cfg)`: the same code draws the same bytes."""
    fig = block_diagram(cfg)
    try:
        return png_bytes(fig)
    finally:
        plt.close(fig)


__all__ = ["HIGHLIGHTS", "HIGHLIGHT", "COLORS", "block_diagram", "diagram_png"]


if __name__ == "__main__":  # `make book`: python -m llamanat_core.book.diagram PATH (the README's picture)
    import sys

    from ..util import atomic_write_bytes

    if len(sys.argv) != 2:
        sys.exit("usage: python -m llamanat_core.book.diagram PATH.png  (the reference decoder's diagram)")
    atomic_write_bytes(sys.argv[1], diagram_png())
