"""Every figure of the book: one look, the shared figure functions, deterministic PNGs.
Part of the book layer: it may import every layer below (the analysis' words and tables
included) and the book's own modules.

style.py      the palette, one colour per variant (kept apart by `colour_distance`), per-task
              and per-verdict colours, the matplotlib style, `use_book_style`, `show` and
              `png_bytes` (byte-identical PNGs), plain tick labels (`plain_ticks`: 0.01, 1,
              1,000, never 10⁰), `colliding_tick_labels`
seeds.py      each seed's value per row (`seed_points`, `seed_curves`), the chance floor
              of an accuracy axis (`chance_line`, labelled in the margin: `margin_label`),
              accuracy per task × regime at a checkpoint (`accuracy_grid`), accuracy by
              item length (`length_panels`)
curves.py     training and validation loss curves: per regime, solved and unsolved seeds
              apart, each seed faint and the median thick; the first steps per group
              (`early_loss_figure`); on text, the arms' held-out
              curves and their loss on windows longer than trained (`text_windows_figure`),
              the counted n-gram models as labelled lines (`draw_ngram_lines`)
cache.py      the KV cache: its bytes against the context length per model shape and attention
              layout (`cache_size_figure`), the time per generated token with and without it
              (`timing_figure`)
mlp.py        the feed-forward's functions and the SwiGLU gate (`activation_figure`,
              `gate_figure`)
attention.py  attention maps and the task summaries of `llamanat_core.book.mechanism`; which KV
              head each query head reads (`head_map_figure`); RoPE's
              angle per pair and position, modulo 360° (`angle_wheel_figure`); attention
              on the queried value against accuracy (`lookup_figure`)
decisions.py  what `comparisons.decide` returns: the forest of the primary endpoints, the
              share solved by each step, per-seed strips, an interval read off its test
              (imported as a module: `from llamanat_core.book.plotting import decisions`)
tuned.py      the tuned text study: the loss at each position of a window, one line per
              model; each mechanism's per-seed differences at S and M beside the margin
              (imported as a module: `from llamanat_core.book.plotting import tuned`)

Chapters import everything from here (`from llamanat_core.book.plotting import show, ...`).
"""
from .attention import (
    HEAT_CMAP,
    MAP_LABEL,
    addition_attention_figure,
    angle_wheel_figure,
    attention_grid,
    attention_heatmap,
    head_map_axes,
    head_map_figure,
    lookup_figure,
    position_heatmap,
    recall_attention_figure,
    recall_by_pair_figure,
    recall_items_figure,
    row_gradient_figure,
    score_map_figure,
    text_window_figure,
)
from .cache import CONTEXTS, cache_size_figure, timing_figure
from .curves import (
    draw_ngram_lines,
    early_loss_figure,
    loss_curves_axes,
    loss_figure,
    text_arms_figure,
    text_loss_figure,
    text_windows_figure,
)
from .mlp import KIND_COLORS, activation_figure, gate_figure
from .seeds import (
    accuracy_grid,
    chance_line,
    depth_figure,
    legend_outside,
    length_panels,
    margin_label,
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
    VISIONS,
    colliding_tick_labels,
    colour_distance,
    keep_end_labels_inside,
    plain_number,
    plain_ticks,
    png_bytes,
    show,
    use_book_style,
    variant_color,
)

__all__ = ["CONTEXTS", "cache_size_figure", "timing_figure",
           "draw_ngram_lines", "text_arms_figure", "text_loss_figure", "text_windows_figure",
           "KIND_COLORS", "activation_figure", "gate_figure",
           "DPI", "FIGSIZE", "PALETTE", "NEUTRAL", "BLUE", "ORANGE", "SKY", "GREEN", "VERMILION",
           "PURPLE", "BLACK", "VARIANT_COLORS", "FIGURE_GROUPS", "TASK_COLORS", "CHANCE_COLOR",
           "STYLE", "PNG_METADATA", "PRINT_KWARGS", "use_book_style", "variant_color", "png_bytes",
           "show", "plain_number", "plain_ticks", "chance_line", "margin_label", "seed_points",
           "seed_curves", "depth_figure", "legend_outside",
           "accuracy_grid", "length_panels",
           "loss_curves_axes", "loss_figure", "early_loss_figure", "HEAT_CMAP", "MAP_LABEL",
           "attention_heatmap",
           "attention_grid", "head_map_axes", "head_map_figure", "position_heatmap",
           "recall_attention_figure", "recall_items_figure", "row_gradient_figure", "score_map_figure",
           "text_window_figure",
           "recall_by_pair_figure",
           "addition_attention_figure", "angle_wheel_figure", "lookup_figure", "VERDICT_COLORS", "VISIONS",
           "colour_distance",
           "colliding_tick_labels", "keep_end_labels_inside"]
