r"""Attention explorer: what each head of a trained model attends to, on one example.

Three parts, as for every course widget, one module each:

- :mod:`~seqlab.widgets.attention.compute` -- :func:`attention_map` checks and holds one kind of
  attention for one example (an :class:`AttentionMap`: weights ``(layers, heads, n_queries,
  n_keys)``, query and key tokens); :func:`attention_from_model` builds them from what seqlab's
  modules return for a batch; :func:`top_attended` lists what one query reads most;
  :func:`summarize_head` gives the numbers that help name what a head does and a guess at the name;
  :func:`describe_view` says what a view's picture shows, in words (alt text, screen readers).
- :mod:`~seqlab.widgets.attention.draw` -- :func:`draw_attention`: one head's matrix with the
  chosen query's row and what it attends to most, or all heads of a layer as a grid;
  :class:`AttentionPlot` is the same figure kept alive and redrawn in layers.
- :mod:`~seqlab.widgets.attention.controls` -- :class:`AttentionExplorer`: kind (if more than
  one), layer, head, an "all heads" toggle and the query token.

::

    out, weights = model(src, tgt, need_weights=True)            # seqlab.nn.Transformer
    AttentionExplorer(attention_from_model(weights, src_tokens, tgt_tokens, index=0))
"""

from seqlab.widgets.attention.compute import (KINDS, AttentionMap, HeadSummary, attention_from_model, attention_map,
                                              describe_view, head_shares, summarize_head, top_attended)
from seqlab.widgets.attention.controls import AttentionExplorer
from seqlab.widgets.attention.draw import AttentionPlot, draw_attention, head_shares_figure, mask_figure

__all__ = ["KINDS", "AttentionExplorer", "AttentionMap", "AttentionPlot", "HeadSummary", "attention_from_model",
           "attention_map", "describe_view", "draw_attention", "head_shares", "head_shares_figure", "mask_figure", "summarize_head",
           "top_attended"]
