"""The gate explorer's compute part: one pass of a character model over a text, recorded; arrays in, arrays out."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import torch

from seqlab.modes import evaluating

if TYPE_CHECKING:
    from seqlab.data import Vocab

__all__ = ["DEFAULT_GATE", "GATES", "QUANTITIES", "SATURATED", "GateRecord", "UnitSearch", "chars_since",
           "describe_gates", "gate_record", "strongest_unit", "unit_correlations", "visible_char"]

# cell type -> the gates a user can pick (in torch's weight order), and the default one
GATES: dict[str, tuple[str, ...]] = {"lstm": ("i", "f", "g", "o"), "gru": ("r", "z", "n"), "rnn": ("a",)}
DEFAULT_GATE = {"lstm": "f", "gru": "z", "rnn": "a"}

# name -> (symbol, description, kind); kind 'sigmoid' is drawn 0..1 with a sequential map,
# 'tanh' is in (-1, 1) and 'signed' is unbounded, both with a diverging map centred at 0
QUANTITIES: dict[str, tuple[str, str, str]] = {
    "i": ("i_t", "input gate", "sigmoid"),
    "f": ("f_t", "forget gate", "sigmoid"),
    "g": ("g_t", "candidate c̃_t", "tanh"),
    "o": ("o_t", "output gate", "sigmoid"),
    "c": ("c_t", "cell state", "signed"),
    "r": ("r_t", "reset gate", "sigmoid"),
    "z": ("z_t", "update gate", "sigmoid"),
    "n": ("n_t", "candidate h̃_t", "tanh"),
    "a": ("a_t", "pre-activation", "signed"),
    "h": ("h_t", "hidden state", "tanh"),
}
SATURATED = 0.05   # a sigmoid gate below 0.05 or above 0.95 (a tanh beyond ±0.95) is saturated: shut or wide open
VISIBLE = {" ": "␣", "\n": "↵", "\t": "⇥", "\r": "␍"}  # characters that would be blank as labels


def visible_char(ch: str) -> str:
    """``ch`` as a label: a space, line break, tab or carriage return as a visible sign."""
    return VISIBLE.get(ch, ch)


@dataclass(frozen=True)
class GateRecord:
    """One pass of a character model over a text, inside its recurrent layer.

    ``values[name]`` is ``(T, H)`` float32 for every traced name (LSTM ``i f g o c h``, GRU ``r z n h``,
    RNN ``a h``); row ``t`` is the step that read ``chars[t]``, from a zero state. ``top_next[t]``: the
    three likeliest next characters after ``chars[: t + 1]`` with their probabilities.
    """

    chars: tuple[str, ...]
    cell: str                                   # 'lstm', 'gru' or 'rnn'
    mode: str                                   # the trace's mode: 'LSTM', 'GRU', 'RNN_TANH', 'RNN_RELU'
    values: dict[str, np.ndarray]               # name -> (T, H)
    layer: int = 0
    direction: str = "forward"
    top_next: tuple[tuple[tuple[str, float], ...], ...] = field(default=(), repr=False)

    @property
    def text(self) -> str:
        return "".join(self.chars)

    @property
    def steps(self) -> int:
        return len(self.chars)

    @property
    def hidden_size(self) -> int:
        return int(self.values["h"].shape[1])

    @property
    def gates(self) -> tuple[str, ...]:
        return GATES[self.cell]

    def __getitem__(self, name: str) -> np.ndarray:
        return self.values[name]


@torch.no_grad()
def gate_record(model: torch.nn.Module, vocab: Vocab, text: str, *, layer: int = 0,
                direction: str = "forward") -> GateRecord:
    """Run ``model`` (a :class:`~seqlab.models.charlm.CharLM`) once over ``text`` in eval mode,
    without gradients, and record its gates. ``vocab`` maps characters to ids."""
    from seqlab.nn.recurrent import RecurrentBase

    if not isinstance(text, str):
        raise TypeError(f"text must be a string, got {type(text).__name__}")
    if not text:
        raise ValueError("text is empty: give at least one character to run the model over")
    missing = sorted(set(text) - set(vocab.stoi))
    if missing:
        shown = ", ".join(repr(ch) for ch in missing[:10]) + (" ..." if len(missing) > 10 else "")
        raise ValueError(f"text has {len(missing)} character(s) outside the model's vocabulary of "
                         f"{len(vocab)}: {shown}; remove or replace them")
    rnn = getattr(model, "rnn", None)
    if not isinstance(rnn, RecurrentBase):
        what = type(rnn).__name__ if rnn is not None else f"{type(model).__name__} without an .rnn layer"
        raise TypeError(f"the model's recurrent layer ({what}) records no gate trace; build the model with "
                        "seqlab's RNN/LSTM/GRU (e.g. CharLM(config), not reference=True)")
    if not 0 <= layer < rnn.num_layers:
        raise ValueError(f"layer must be in 0..{rnn.num_layers - 1}, got {layer}")
    if direction not in ("forward", "reverse") or (direction == "reverse" and not rnn.bidirectional):
        allowed = "'forward' or 'reverse'" if rnn.bidirectional else "'forward' (the model is not bidirectional)"
        raise ValueError(f"direction must be {allowed}, got {direction!r}")

    with evaluating(model):                                           # dropout off; each module's mode restored
        device = next(model.parameters()).device
        ids = vocab.encode(text).to(device)[None]                     # (1, T)
        _, _, trace = rnn(model.embed(ids), return_trace=True)
        logits = model.head(trace.layers[-1]["forward"]["h"]) if not rnn.bidirectional else None

    values = {name: trace.get(name, layer, direction)[0].float().cpu().numpy()   # (T, H)
              for name in trace.names}
    top_next: tuple = ()
    if logits is not None:
        probs, top = torch.softmax(logits[0].float(), dim=-1).topk(min(3, logits.shape[-1]), dim=-1)
        top_next = tuple(tuple((vocab.itos[int(i)], float(p)) for p, i in zip(ps, ids_))
                         for ps, ids_ in zip(probs.cpu(), top.cpu()))
    cell = {"LSTM": "lstm", "GRU": "gru"}.get(trace.mode, "rnn")
    return GateRecord(tuple(text), cell, trace.mode, values, layer, direction, top_next)



def describe_gates(record: GateRecord, gate: str, units: tuple[int, int], step: int, mark: int | None = None) -> str:
    """The gate explorer's picture of a view in words (its alt text): ``gate`` over units ``start <= u < stop``,
    its saturation, and the marked unit's value at ``step`` and where it saturates."""
    start, stop = units
    symbol, description, kind = QUANTITIES[gate]
    values = record[gate][:, start:stop]                                            # (T, units)
    panels = [f"{symbol} ({description})"] + (["c_t (cell state)"] if record.cell == "lstm" else []) + ["h_t"]
    shown = mark if mark is not None and start <= mark < stop else None
    outlined = f" and unit {shown}'s row" if shown is not None else ""
    text = (f"Heatmaps of {record.mode.replace('_', ' ')} layer {record.layer}, the {record.steps} characters of "
            f"the text across and units {start}–{stop - 1} down: {', '.join(panels)}; the column of step t = {step} "
            f"(reading {visible_char(record.chars[step])!r}){outlined} outlined. Over these units {symbol} runs from "
            f"{values.min():.2f} to {values.max():.2f}, mean {values.mean():.2f}")
    if kind == "signed":
        text += "."
    else:
        low, high = (SATURATED, 1 - SATURATED) if kind == "sigmoid" else (-1 + SATURATED, 1 - SATURATED)
        saturated = np.mean((values < low) | (values > high))
        share = f"{saturated:.0%} of its cells are" if saturated else "no cell is"
        text += f"; {share} below {low:g} or above {high:g}."
    if shown is not None:
        unit = record[gate][:, shown]
        text += f" Unit {shown}: {symbol} = {unit[step]:.2f} at this step"
        if kind != "signed":
            parts = []
            for word, bound, where in (("below", low, unit < low), ("above", high, unit > high)):
                chars = [visible_char(record.chars[t]) for t in np.flatnonzero(where)]
                common = sorted(set(chars), key=lambda ch: (-chars.count(ch), ch))[:3]
                if chars:
                    parts.append(f"{word} {bound:g} at {len(chars)} of {record.steps} steps (reading "
                                 + ", ".join(f"{ch!r} ×{chars.count(ch)}" for ch in common) + ")")
            text += ", " + (" and ".join(parts) if parts else f"never below {low:g} or above {high:g}")
        text += "."
    return text


# --------------------------------------------------------------------------------------------
# Which unit follows a pattern of the text?
# --------------------------------------------------------------------------------------------

def chars_since(chars: str | tuple[str, ...], mark: str = "\n") -> np.ndarray:
    r"""``(T,)`` float64: characters read since the last ``mark`` (0 at a mark; from the start before
    the first). With ``mark="\n"``: the position in the line."""
    if not isinstance(mark, str) or len(mark) != 1:
        raise ValueError(f"mark must be one character, got {mark!r}")
    counts = np.zeros(len(chars))
    count = 0
    for t, ch in enumerate(chars):
        count = 0 if ch == mark else count + 1
        counts[t] = count
    return counts


def unit_correlations(values: np.ndarray, signal: np.ndarray) -> np.ndarray:
    """``(H,)``: Pearson's correlation of each column of ``values`` ``(T, H)`` with ``signal`` ``(T,)``,
    float64; 0 for a constant column."""
    values, signal = np.asarray(values, dtype=np.float64), np.asarray(signal, dtype=np.float64)
    if values.ndim != 2 or signal.shape != values.shape[:1]:
        raise ValueError(f"values should be (T, H) and signal (T,) with the same T, got {values.shape} and "
                         f"{signal.shape}")
    if signal.std() == 0:
        raise ValueError("signal is constant over the text: there is nothing to correlate with")
    centred = values - values.mean(0)                                    # (T, H)
    s = signal - signal.mean()                                           # (T,)
    norms = np.linalg.norm(centred, axis=0) * np.linalg.norm(s)          # (H,)
    return np.divide(s @ centred, norms, out=np.zeros(values.shape[1]), where=norms > 0)


@dataclass(frozen=True)
class UnitSearch:
    """The result of :func:`strongest_unit`: every unit's correlation with the signal."""

    name: str                        # the quantity searched: 'c', 'h', or a gate
    correlations: np.ndarray         # (H,) float64

    @property
    def ranking(self) -> np.ndarray:
        """Units by decreasing |correlation| (ties: the lower unit first)."""
        return np.argsort(-np.abs(self.correlations), kind="stable")

    @property
    def unit(self) -> int:
        return int(self.ranking[0])

    @property
    def correlation(self) -> float:
        return float(self.correlations[self.unit])

    @property
    def runner_up(self) -> int:
        return int(self.ranking[1])

    @property
    def runner_up_correlation(self) -> float:
        return float(self.correlations[self.runner_up])

    @property
    def margin(self) -> float:
        """The best unit's |correlation| minus the runner-up's."""
        return abs(self.correlation) - abs(self.runner_up_correlation)


def strongest_unit(record: GateRecord, signal: np.ndarray, name: str = "c") -> UnitSearch:
    """The unit whose ``name`` (``'c'``, ``'h'`` or a gate) correlates most, in size, with ``signal``
    ``(T,)`` over ``record``'s text; with the runner-up."""
    if name not in record.values:
        raise ValueError(f"name must be one of {sorted(record.values)} for this {record.cell.upper()}, got {name!r}")
    if np.shape(signal) != (record.steps,):
        raise ValueError(f"signal should have one value per character, shape ({record.steps},), got "
                         f"{np.shape(signal)}")
    return UnitSearch(name, unit_correlations(record[name], signal))
