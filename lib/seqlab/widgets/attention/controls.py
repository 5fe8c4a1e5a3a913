"""The attention explorer's controls: kind (if more than one), layer, head, an "all heads" toggle and the query token."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import ipywidgets as widgets

from seqlab.notebook import FIGURE_DPI
from seqlab.widgets.attention.compute import AttentionMap, HeadSummary, attention_map, check_view, describe_view
from seqlab.widgets.attention.draw import AttentionPlot, clip_token, draw_attention
from seqlab.widgets.base import Widget
from seqlab.widgets.live import PNGFigure

__all__ = ["AttentionExplorer"]


def _as_maps(attention, query_tokens, key_tokens, kind) -> dict[str, AttentionMap]:
    if isinstance(attention, AttentionMap):
        maps = [attention]
    elif isinstance(attention, Mapping):
        maps = list(attention.values())
        bad = [k for k, v in attention.items() if not isinstance(v, AttentionMap)]
        if bad:
            raise TypeError(f"a dict of attention must map kind -> AttentionMap (see attention_map and "
                            f"attention_from_model); {bad} are not")
    elif isinstance(attention, (list, tuple)) and attention and all(isinstance(a, AttentionMap) for a in attention):
        maps = list(attention)
    else:
        if query_tokens is None:
            raise ValueError("weights given as an array need their query_tokens (and key_tokens for cross-attention)")
        return {(m := attention_map(attention, query_tokens, key_tokens, kind=kind or "self-attention")).kind: m}
    if query_tokens is not None or key_tokens is not None:
        raise ValueError("tokens come with each AttentionMap; give query_tokens/key_tokens only with a bare array")
    if not maps:
        raise ValueError("no attention given: pass at least one AttentionMap")
    return {m.kind: m for m in maps}


class AttentionExplorer(Widget):
    """Widget: the kind of attention (if several), layer, head (or all heads) and query token.

    ``attention``: an :class:`AttentionMap`, a dict kind -> map (:func:`attention_from_model`), a list
    of maps, or an array with its ``query_tokens`` (and ``key_tokens``). A slider over one value is
    disabled, as is "all heads" for one head.
    """

    def __init__(self, attention, query_tokens: Sequence[str] | None = None, key_tokens: Sequence[str] | None = None,
                 *, kind: str | None = None, layer: int = 0, head: int = 0, all_heads: bool = False, token: int = 0,
                 top: int = 5, dpi: int = FIGURE_DPI):
        self.maps = _as_maps(attention, query_tokens, key_tokens, kind if not isinstance(attention, Mapping) else None)
        first = kind if kind is not None and kind in self.maps else next(iter(self.maps))
        if kind is not None and kind not in self.maps:
            raise ValueError(f"kind must be one of {list(self.maps)}, got {kind!r}")
        amap = self.maps[first]
        check_view(amap, layer, head, token)
        self.top = top
        self._plots: dict[tuple[str, bool], AttentionPlot] = {}
        self._summaries: dict[str, dict[int, Sequence[HeadSummary]]] = {k: {} for k in self.maps}
        wide = {"style": {"description_width": "initial"}, "continuous_update": True}
        self.kind = widgets.Dropdown(options=list(self.maps), value=first, description="attention",
                                     layout=widgets.Layout(width="330px"), style={"description_width": "initial"})
        self.layer = widgets.IntSlider(value=layer, min=0, max=max(amap.layers - 1, 0), description="layer",
                                       layout=widgets.Layout(width="230px"), **wide)
        self.head = widgets.IntSlider(value=head, min=0, max=max(amap.heads - 1, 0), description="head",
                                      layout=widgets.Layout(width="230px"), **wide)
        self.all_heads = widgets.ToggleButton(value=all_heads and amap.heads > 1, description="all heads",
                                              tooltip="all heads of the layer as a grid; the chosen head is framed",
                                              layout=widgets.Layout(width="100px"))
        self.token = widgets.SelectionSlider(options=self._token_options(amap), index=token, description="query token",
                                             layout=widgets.Layout(width="560px"), **wide)
        self._enable(amap)
        controls = {"layer": self.layer, "head": self.head, "all_heads": self.all_heads, "token": self.token}
        first_row: list = ["layer", "head", "all_heads"]
        if len(self.maps) > 1:
            controls = {"kind": self.kind, **controls}
            first_row = ["kind", *first_row]
            # registered before the LiveFigure's own observers: ranges follow the kind before the redraw
            self.kind.observe(self._on_kind, names="value")
        super().__init__(controls, rows=[first_row, ["token"]], dpi=dpi)

    @staticmethod
    def _token_options(amap: AttentionMap) -> list[tuple[str, int]]:
        return [(f"{i}: {clip_token(t, 16)}", i) for i, t in enumerate(amap.query_tokens)]

    def _enable(self, amap: AttentionMap) -> None:
        self.layer.disabled = amap.layers == 1
        self.head.disabled = self.all_heads.disabled = amap.heads == 1

    def _on_kind(self, change) -> None:
        """Kind switched: the sliders' ranges follow it."""
        amap = self.maps[change["new"]]
        with self.live.held(redraw=False):          # the LiveFigure's own observer redraws next
            self.layer.value = min(self.layer.value, amap.layers - 1)
            self.layer.max = amap.layers - 1
            self.head.value = min(self.head.value, amap.heads - 1)
            self.head.max = amap.heads - 1
            if amap.heads == 1:
                self.all_heads.value = False
            token = min(self.token.value, amap.n_queries - 1)
            self.token.options = self._token_options(amap)
            self.token.value = token
            self._enable(amap)

    @property
    def map(self) -> AttentionMap:
        """The attention shown now."""
        return self.maps[self.kind.value]

    def plot(self, kind: str, all_heads: bool) -> AttentionPlot:
        """The live figure of ``kind`` in one mode (built once)."""
        key = (kind, all_heads)
        if key not in self._plots:
            self._plots[key] = AttentionPlot(self.maps[kind], all_heads=all_heads, top=self.top, dpi=self.dpi,
                                             summaries=self._summaries[kind])
        return self._plots[key]

    def summaries(self, layer: int | None = None, kind: str | None = None) -> list[HeadSummary]:
        """The :class:`HeadSummary` of every head of ``layer`` (default: the shown kind and layer)."""
        kind = self.kind.value if kind is None else kind
        layer = self.layer.value if layer is None else layer
        return list(self.plot(kind, False).summaries(layer))

    # draw -------------------------------------------------------------------------------------------
    def figure(self, layer: int, head: int, all_heads: bool, token: int, kind: str | None = None) -> PNGFigure:
        amap = self.maps[kind if kind is not None else self.kind.value]
        return draw_attention(amap, layer, head, token, all_heads=all_heads, top=self.top, dpi=self.dpi)

    def describe(self, layer: int, head: int, all_heads: bool, token: int, kind: str | None = None) -> str:
        kind = kind if kind is not None else self.kind.value
        return describe_view(self.maps[kind], layer, head, token, all_heads=all_heads,
                             summaries=self.summaries(layer, kind))

    def render(self, layer: int, head: int, all_heads: bool, token: int, kind: str | None = None) -> bytes:
        plot = self.plot(kind if kind is not None else self.kind.value, all_heads)
        plot.update(layer, head, token)
        return plot.png()

