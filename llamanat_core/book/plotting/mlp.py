"""The feed-forward's figures (the SwiGLU chapter): the three functions and the factor each
applies to its input, and the SwiGLU gate, constructed and as trained models use it.
Every grid is built from integers divided by an integer, so each point is exactly
rounded on any CPU (a linspace kernel can put 1e-16 where 0 belongs)."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .style import TASK_COLORS, VERMILION, plain_ticks, use_book_style, variant_color

KIND_COLORS = {"relu": VERMILION, "gelu": variant_color("gelu_mlp"), "swiglu": variant_color("llama")}
"""ReLU, GELU (the `gelu_mlp` control's colour) and SwiGLU or SiLU (the reference's)."""


def activation_figure():
    """GELU and SiLU each against ReLU (dashed), from −5 to 5: the functions on top, the
    factor each multiplies its input by underneath (ReLU's a step, a switch)."""
    import matplotlib.pyplot as plt

    use_book_style()
    zz = torch.arange(-200, 201, dtype=torch.float64) / 40  # -5 to 5
    factors = {"gelu": (0.5 * (1 + torch.erf(zz / 2 ** 0.5)), "gelu: Φ(z)"),
               "silu": (torch.sigmoid(zz), "silu: σ(z)")}
    fig, axes = plt.subplots(2, 2, figsize=(9, 5.6), sharex=True, sharey="row", layout="constrained")
    for col, (name, f) in enumerate((("gelu", F.gelu), ("silu", F.silu))):
        top, bottom = axes[0, col], axes[1, col]
        color = KIND_COLORS["swiglu" if name == "silu" else name]
        top.plot(zz, F.relu(zz), color=KIND_COLORS["relu"], ls="--", label="relu")
        top.plot(zz, f(zz), color=color, label=name)
        top.set_title(f"{name} against relu")
        bottom.step(zz, (zz > 0).float(), where="post", color=KIND_COLORS["relu"], ls="--",
                    label="relu: step (switch)")
        bottom.plot(zz, factors[name][0], color=color, label=factors[name][1])
        bottom.set_xlabel("z")
        for ax in (top, bottom):
            ax.legend(loc="upper left")
    axes[0, 0].set_ylabel("f(z)")
    axes[1, 0].set_ylabel("the factor applied to z: f(z) / z")
    return fig


def gate_figure(bins: dict, kill_below: float):
    """Left, |silu(g) · u| over a grid of gate g and up u, with a line at `kill_below`;
    then one panel per task of `bins` (task -> `helpers.swiglu.gate_bins`): per gate bin
    the median |u| (what the unit would carry, dashed) and the median |silu(g) · u| (what
    it does carry, solid)."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import LogNorm
    from matplotlib.lines import Line2D

    use_book_style()
    fig, (ax1, *task_axes) = plt.subplots(1, 1 + len(bins), figsize=(11, 3.6), layout="constrained",
                                          gridspec_kw={"width_ratios": [1.25] + [1] * len(bins)})
    g_grid, u_grid = torch.meshgrid(torch.arange(-200, 81, dtype=torch.float64) / 20,  # -10 to 4
                                    torch.arange(-80, 81, dtype=torch.float64) / 10,  # -8 to 8
                                    indexing="xy")
    h_grid = F.silu(g_grid) * u_grid  # the SwiGLU unit as a function of its two inputs
    im = ax1.pcolormesh(g_grid, u_grid, h_grid.abs(), shading="auto", cmap="viridis",
                        norm=LogNorm(vmin=1e-3, vmax=float(h_grid.abs().max())))
    ax1.axvline(kill_below, color="white", ls="--", lw=1)
    ax1.set_xlabel("gate pre-activation g")
    ax1.set_ylabel("up pre-activation u")
    ax1.set_title("|silu(g) · u|, constructed")
    plain_ticks(fig.colorbar(im, ax=ax1, label="|hidden value|").ax, "y")
    for ax, (task, b) in zip(task_axes, bins.items()):
        mid = (b["gate from"] + b["gate to"]) / 2
        ax.plot(mid, b["median |up|"], marker="o", color=TASK_COLORS[task], ls="--")
        ax.plot(mid, b["median |hidden|"], marker="o", color=TASK_COLORS[task])
        ax.axvline(kill_below, color="0.35", ls=":", lw=0.9)
        ax.set_yscale("log")
        ax.set_xlabel("gate pre-activation g (bin centre)")
        ax.set_title(f"trained on {task}, seed 0")
    for ax in task_axes[1:]:
        ax.sharey(task_axes[0])
    task_axes[0].set_ylabel("median magnitude")
    for ax in task_axes:
        plain_ticks(ax, "y")
    fig.legend(handles=[Line2D([], [], color="0.35", marker="o", ls="--", label="median |u|"),
                        Line2D([], [], color="0.35", marker="o", label="median |silu(g) · u|")],
               loc="outside lower right", ncol=2, fontsize=8.5)
    fig.get_layout_engine().set(wspace=0.06)  # the colour bar's label and the next panel's apart
    return fig
