"""Attention explorer: what each head of a trained model attends to, on one example.

Parts: ``compute`` (:func:`attention_map`, :func:`attention_from_model`, head summaries, alt text),
``draw`` (:func:`draw_attention`, :class:`AttentionPlot`), ``controls`` (:class:`AttentionExplorer`)::

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
