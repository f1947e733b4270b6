"""The papers `fabricsim reproduce` reruns: one module per paper, named by the paper's key.

A paper's module (`mrc.py`) defines `EXPERIMENTS`, the experiments of its
figures in the order they run; `framework.py` runs them and writes the
comparison with the paper. Adding a paper: its scenario files under
scenarios/<key>/, a module `<key>.py` beside `mrc.py` (a `-` in the key is
`_` in the module's name), and its line in `PAPERS`. A paper's module is imported only when the paper runs, which keeps
polars out of the `fabricsim` command's start.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .framework import Experiment

__all__ = ["PAPERS", "paper_experiments"]

# Paper key (the argument of `fabricsim reproduce`) -> the paper's text.
PAPERS: dict[str, str] = {
    "mrc": "mrc-srv6-multiplane.txt",
    "spectrum-x": "spectrum-x.txt",
    "pro": "pro-deterministic-lb.txt",
    "hpn": "alibaba-hpn.txt",
    "shift": "shift-rdma-failover.txt",
    "scale": "the flow model: calibrated against the packet model, then spectrum-x.txt s6.6, "
    "mrc-srv6-multiplane.txt and alibaba-hpn.txt at full-cluster scale",
}


def paper_experiments(paper: str) -> tuple[Experiment, ...]:
    """The experiments of a registered paper, in the order they run."""
    if paper not in PAPERS:
        raise KeyError(f"no paper named {paper!r}; known: {', '.join(PAPERS)}")
    # A module is named by the paper's key, `-` as `_` (spectrum-x: spectrum_x.py).
    return tuple(import_module(f"{__name__}.{paper.replace('-', '_')}").EXPERIMENTS)
