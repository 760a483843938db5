"""Every figure of the book: one look, the shared figure functions, deterministic PNGs.

style.py      the palette, per-variant, per-task and per-verdict colours, the matplotlib style,
              `use_book_style`, `show` and `png_bytes` (byte-identical PNGs)
seeds.py      each seed's value per row (`seed_points`, `seed_curves`), the chance floor
              of an accuracy axis (`chance_line`), the matrix summary, accuracy per task ×
              regime at a checkpoint (`accuracy_grid`), accuracy by item length
              (`length_panels`)
curves.py     training and validation loss curves, per variant or per group
attention.py  attention maps and the task summaries of `llamanat_core.mechanism`

Chapters import everything from here (`from llamanat_core.plotting import show, ...`).
"""
from .attention import (
    HEAT_CMAP,
    MAP_LABEL,
    addition_attention_figure,
    attention_grid,
    attention_heatmap,
    position_heatmap,
    recall_attention_figure,
    recall_by_pair_figure,
)
from .curves import (
    loss_curves_axes,
    loss_figure,
)
from .seeds import (
    accuracy_grid,
    chance_line,
    legend_outside,
    length_panels,
    seed_curves,
    seed_points,
)
from .style import (
    BLACK,
    BLUE,
    CHANCE_COLOR,
    DPI,
    FIGSIZE,
    FIGURE_GROUPS,
    GREEN,
    NEUTRAL,
    ORANGE,
    PALETTE,
    PNG_METADATA,
    PRINT_KWARGS,
    PURPLE,
    SKY,
    STYLE,
    TASK_COLORS,
    VARIANT_COLORS,
    VERDICT_COLORS,
    VERMILION,
    png_bytes,
    show,
    use_book_style,
    variant_color,
)

__all__ = ["DPI", "FIGSIZE", "PALETTE", "NEUTRAL", "BLUE", "ORANGE", "SKY", "GREEN", "VERMILION",
           "PURPLE", "BLACK", "VARIANT_COLORS", "FIGURE_GROUPS", "TASK_COLORS", "CHANCE_COLOR",
           "STYLE", "PNG_METADATA", "PRINT_KWARGS", "use_book_style", "variant_color", "png_bytes",
           "show", "chance_line", "seed_points", "seed_curves", "legend_outside",
           "accuracy_grid", "length_panels",
           "loss_curves_axes", "loss_figure", "HEAT_CMAP", "MAP_LABEL",
           "attention_heatmap",
           "attention_grid", "position_heatmap", "recall_attention_figure", "recall_by_pair_figure",
           "addition_attention_figure", "VERDICT_COLORS"]
