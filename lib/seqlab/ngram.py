"""An n-gram language model, from scratch, for characters or word tokens (notebook 1): :class:`NGramLM`.

Symbols become ids ``0 .. V-1`` and an m-gram one int64 code in base V, so counting is ``np.unique``
and looking up is ``np.searchsorted``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

SMOOTHINGS = ("kneser-ney", "add-k", "none")


@dataclass(frozen=True)
class _Table:
    """The counts of one order m, sorted by code for binary search."""

    grams: np.ndarray         # (G,) int64 codes of the distinct m-grams, sorted
    counts: np.ndarray        # (G,) float64 count of each (raw, or continuation count below order n)
    contexts: np.ndarray      # (H,) int64 codes of the distinct (m-1)-gram contexts, sorted
    context_total: np.ndarray  # (H,) float64 c_m(h .), summed over followers
    context_types: np.ndarray  # (H,) float64 N_m(h .), the number of distinct followers
    discount: float


def _lookup(keys: np.ndarray, values: np.ndarray, query: np.ndarray) -> np.ndarray:
    """values[i] where keys[i] == query, else 0 (keys sorted ascending)."""
    if len(keys) == 0:
        return np.zeros(len(query), dtype=np.float64)
    pos = np.searchsorted(keys, query)
    pos = np.minimum(pos, len(keys) - 1)
    found = keys[pos] == query
    return np.where(found, values[pos], 0.0)


def _table(grams: np.ndarray, counts: np.ndarray, vocab_size: int, discount: float | None) -> _Table:
    """Context sums and discount for an order whose distinct (sorted) m-gram codes and counts are given."""
    keep = counts > 0
    grams, counts = grams[keep], counts[keep].astype(np.float64)
    contexts, first, types = np.unique(grams // vocab_size, return_index=True, return_counts=True)
    total = np.add.reduceat(counts, first) if len(counts) else np.zeros(0)
    if discount is None:  # Ney et al. (1994): D = n1 / (n1 + 2 n2), kept inside (0, 1]
        n1, n2 = int(np.sum(counts == 1)), int(np.sum(counts == 2))
        discount = n1 / (n1 + 2 * n2) if n1 > 0 else 0.5
        discount = float(min(max(discount, 0.05), 1.0))
    return _Table(grams, counts, contexts, total, types.astype(np.float64), discount)


class NGramLM:
    """A smoothed n-gram language model over characters (fit on a ``str``) or tokens (a list of str).

    ``n``: the model conditions on the previous ``n - 1`` symbols (1 = unigram). ``smoothing``:

    - ``"kneser-ney"`` (default): interpolated Kneser-Ney, not backed off: the lower order is always
      mixed in, with weight ``D_m N_m(h .) / c_m(h .)``; ``h'`` is ``h`` without its first symbol::

          p_m(w | h) = max(c_m(h w) - D_m, 0) / c_m(h .)  +  D_m N_m(h .) / c_m(h .) * p_{m-1}(w | h')
          p_0(w) = 1 / V

      ``c_m(h .) = sum_w c_m(h w)``; ``N_m(h .)`` is the number of distinct followers of ``h``. ``c_n`` is
      the raw count; below order n, ``c_m(h w)`` is the continuation count, the number of distinct
      symbols seen before ``h w``. A context unseen at order m passes ``p_{m-1}`` through.
      ``discount=None`` estimates ``D_m = n1 / (n1 + 2 n2)`` per order (``n1``, ``n2``: m-grams seen
      once, twice), kept in [0.05, 1]; a number fixes it.
    - ``"add-k"``: ``(c(h w) + k) / (c(h .) + k V)`` at order n, ``k`` the pseudo-count (1: Laplace).
    - ``"none"``: the maximum-likelihood estimate; scoring an unseen n-gram raises a ValueError naming it.

    The first ``n - 1`` symbols of a scored text use the shorter history they have, unless ``context=``
    supplies what came before. ``vocab`` (a list or a :class:`seqlab.data.Vocab`; default: the training
    data's distinct symbols) can hold symbols training never shows.

    Usage: ``lm = NGramLM(5).fit(train_text)``, then ``lm.perplexity(text)``,
    ``lm.next_distribution("to be or no")``, ``lm.sample(200, seed=0)``.
    """

    def __init__(self, n: int, smoothing: str = "kneser-ney", *, k: float = 1.0,
                 discount: float | None = None, vocab: Sequence[str] | None = None):
        if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 1:
            raise ValueError(f"n must be an integer >= 1 (1 = unigram, 2 = bigram, ...), got {n!r}")
        if smoothing not in SMOOTHINGS:
            raise ValueError(f"smoothing must be one of {SMOOTHINGS}, got {smoothing!r}")
        if smoothing == "add-k" and not k > 0:
            raise ValueError(f"add-k smoothing needs k > 0, got k={k!r} (k = 0 is smoothing='none')")
        if discount is not None and not 0 < discount <= 1:
            raise ValueError(f"the Kneser-Ney discount must lie in (0, 1], got {discount!r}")
        self.n, self.smoothing, self.k, self.discount = int(n), smoothing, float(k), discount
        vocab = getattr(vocab, "itos", vocab)  # a seqlab Vocab, or a plain sequence of symbols
        self._given_vocab = None if vocab is None else list(vocab)
        self.vocab: list[str] = []
        self.stoi: dict[str, int] = {}
        self.char_level = True
        self._tables: dict[int, _Table] = {}

    def __repr__(self) -> str:
        state = f"V={len(self.vocab)}" if self.vocab else "not fitted"
        extra = f", k={self.k:g}" if self.smoothing == "add-k" else ""
        return f"NGramLM(n={self.n}, smoothing={self.smoothing!r}{extra}, {state})"

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    # -- symbols <-> ids --------------------------------------------------------------------------
    def _encode(self, data: str | Sequence[str], what: str) -> np.ndarray:
        if isinstance(data, str) and self.char_level:
            if not data:
                return np.zeros(0, dtype=np.int64)
            points = np.frombuffer(data.encode("utf-32-le"), dtype=np.uint32)
            table = self._codepoint_table
            inside = points < len(table)
            ids = np.full(len(points), -1, dtype=np.int64)
            ids[inside] = table[points[inside]]
        else:
            if isinstance(data, str):
                raise TypeError(f"this model was fitted on tokens, so {what} must be a list of tokens, not a string")
            tokens = list(data)
            ids = np.array([self.stoi.get(t, -1) for t in tokens], dtype=np.int64)
        if np.any(ids < 0):
            i = int(np.argmax(ids < 0))
            symbol = data[i]
            raise ValueError(f"{what} contains {symbol!r} (position {i}), which is not in this model's "
                             f"vocabulary of {self.vocab_size} symbols; pass vocab= to NGramLM with every "
                             f"symbol you will score (e.g. the characters of train + validation text)")
        return ids

    def _decode(self, ids: Sequence[int]) -> str | list[str]:
        symbols = [self.vocab[i] for i in ids]
        return "".join(symbols) if self.char_level else symbols

    # -- training -------------------------------------------------------------------------------
    def fit(self, data: str | Sequence[str]) -> NGramLM:
        """Count the n-grams of ``data`` (a string for characters, a list of tokens for words); returns self."""
        if isinstance(data, str):
            self.char_level = True
        else:
            data = list(data)
            if not all(isinstance(t, str) for t in data):
                raise TypeError("fit expects a string (character model) or a sequence of str tokens")
            self.char_level = False
        if len(data) == 0:
            raise ValueError("cannot fit an n-gram model on empty data")
        symbols = sorted(set(data)) if self._given_vocab is None else self._given_vocab
        if len(set(symbols)) != len(symbols):
            raise ValueError("vocab must not repeat a symbol")
        if self.char_level and any(len(s) != 1 for s in symbols):
            raise ValueError("a character model's vocab must hold single characters")
        self.vocab = list(symbols)
        self.stoi = {s: i for i, s in enumerate(self.vocab)}
        V = len(self.vocab)
        if V ** self.n >= 2 ** 62:
            raise ValueError(f"n={self.n} with {V} symbols does not fit the 64-bit n-gram codes; use a smaller n")
        if self.char_level:
            table = np.full(max(ord(c) for c in self.vocab) + 1, -1, dtype=np.int64)
            table[[ord(c) for c in self.vocab]] = np.arange(V)
            self._codepoint_table = table
        ids = self._encode(data, "the training data")
        if len(ids) < self.n:
            raise ValueError(f"an order-{self.n} model needs at least {self.n} training symbols, got {len(ids)}")

        # Codes of all n-grams: code_m[t] = code_{m-1}[t] * V + ids[t + m - 1] (start-aligned).
        codes = ids.copy()
        for m in range(2, self.n + 1):
            codes = codes[:-1] * V + ids[m - 1:]
        grams, counts = np.unique(codes, return_counts=True)
        self._tables = {self.n: _table(grams, counts.astype(np.float64), V, self.discount)}
        if self.smoothing != "kneser-ney":
            # Raw counts at every order, for the first n - 1 symbols of a text (shorter history).
            codes = ids.copy()
            for m in range(1, self.n):
                if m > 1:
                    codes = codes[:-1] * V + ids[m - 1:]
                grams, counts = np.unique(codes, return_counts=True)
                self._tables[m] = _table(grams, counts.astype(np.float64), V, self.discount)
        else:
            # Lower orders: continuation counts N(. g) = number of distinct (m+1)-grams ending in g.
            # The text's first m-gram has no left neighbour and gets continuation count 0.
            for m in range(self.n - 1, 0, -1):
                suffixes = self._tables[m + 1].grams % V ** m
                lower, cont = np.unique(suffixes, return_counts=True)
                self._tables[m] = _table(lower, cont.astype(np.float64), V, self.discount)
        self.n_train = len(ids)
        return self

    def _check_fitted(self) -> None:
        if not self._tables:
            raise RuntimeError("this NGramLM is not fitted yet; call .fit(training_text) first")

    # -- probabilities ------------------------------------------------------------------------
    def _probs(self, windows: np.ndarray) -> np.ndarray:
        """p(last | the ones before) for each row of ``windows`` (N, n) of ids, -1 = no symbol there."""
        V, n = self.vocab_size, self.n
        w = windows[:, -1]
        if self.smoothing != "kneser-ney":
            # Each row uses the longest history it has: order m = n - (number of missing symbols).
            order = n - np.sum(windows < 0, axis=1)
            p = np.zeros(len(w))
            for m in np.unique(order):
                rows = order == m
                t = self._tables[int(m)]
                gram = np.zeros(int(rows.sum()), dtype=np.int64)
                for j in range(n - m, n):
                    gram = gram * V + windows[rows, j]
                c_hw = _lookup(t.grams, t.counts, gram)
                c_h = _lookup(t.contexts, t.context_total, gram // V)
                if self.smoothing == "add-k":
                    p[rows] = (c_hw + self.k) / (c_h + self.k * V)
                else:  # maximum likelihood; an unseen context gives 0 (reported by the caller)
                    p[rows] = np.where(c_h > 0, c_hw / np.maximum(c_h, 1.0), 0.0)
            return p
        p = np.full(len(w), 1.0 / V)  # p_0: uniform
        gram = w.copy()
        ok = np.ones(len(w), dtype=bool)
        for m in range(1, n + 1):
            if m > 1:
                left = windows[:, n - m]
                ok &= left >= 0
                gram = np.maximum(left, 0) * V ** (m - 1) + gram
            t = self._tables[m]
            c_h = np.where(ok, _lookup(t.contexts, t.context_total, gram // V), 0.0)
            seen = c_h > 0
            if not np.any(seen):
                continue
            c_hw = _lookup(t.grams, t.counts, gram[seen])
            types = _lookup(t.contexts, t.context_types, gram[seen] // V)
            D, tot = t.discount, c_h[seen]
            p[seen] = np.maximum(c_hw - D, 0.0) / tot + D * types / tot * p[seen]
        return p

    def _windows(self, ids: np.ndarray, context_ids: np.ndarray) -> np.ndarray:
        history = context_ids[-(self.n - 1):] if self.n > 1 else context_ids[:0]
        pad = np.full(self.n - 1 - len(history), -1, dtype=np.int64)
        full = np.concatenate([pad, history, ids])
        return np.lib.stride_tricks.sliding_window_view(full, self.n)

    def log_probs(self, text: str | Sequence[str], context: str | Sequence[str] = "") -> np.ndarray:
        """Natural-log probability of each symbol of ``text`` given its history, shape (T,); ``context`` gives history, unscored."""
        self._check_fitted()
        ids = self._encode(text, "the text")
        if len(ids) == 0:
            raise ValueError("cannot score an empty text (its perplexity is undefined)")
        ctx = self._encode(context, "the context") if len(context) else np.zeros(0, dtype=np.int64)
        p = self._probs(self._windows(ids, ctx))
        if np.any(p <= 0):
            i = int(np.argmax(p <= 0))
            start = max(0, i - self.n + 1)
            seq = text if self.char_level else list(text)
            raise ValueError(f"the {self.n}-gram {seq[start:i + 1]!r} at position {i} has probability 0 "
                             f"under smoothing='none' (it never occurs in training), so the perplexity is "
                             f"infinite; use smoothing='kneser-ney' or 'add-k'")
        return np.log(p)

    def log_prob(self, text: str | Sequence[str], context: str | Sequence[str] = "") -> float:
        """log p(text) = sum_t log p(x_t | x_{t-n+1} .. x_{t-1}), in nats (the chain rule in log space)."""
        return float(np.sum(self.log_probs(text, context)))

    def perplexity(self, text: str | Sequence[str], context: str | Sequence[str] = "") -> float:
        """exp(-(1/T) sum_t log p(x_t | x_{t-n+1} .. x_{t-1})) over the T symbols of ``text``."""
        return float(np.exp(-np.mean(self.log_probs(text, context))))

    def _next_probs(self, history: Sequence[int]) -> np.ndarray:
        """p(w | history) for every id w, from a list of ids (only the last n - 1 are used)."""
        V, n = self.vocab_size, self.n
        history = [int(i) for i in history][-(n - 1):] if n > 1 else []
        row = np.array([-1] * (n - 1 - len(history)) + history, dtype=np.int64)
        windows = np.concatenate([np.tile(row, (V, 1)), np.arange(V, dtype=np.int64)[:, None]], axis=1)
        return self._probs(windows)

    def next_distribution(self, context: str | Sequence[str] = "") -> np.ndarray:
        """p(w | the last n - 1 symbols of ``context``) for every w in ``self.vocab``, shape (V,)."""
        self._check_fitted()
        ctx = self._encode(context, "the context") if len(context) else np.zeros(0, dtype=np.int64)
        return self._next_probs(ctx.tolist())

    def count(self, gram: str | Sequence[str]) -> int:
        """How often the n-gram ``gram`` (exactly n symbols) occurs in the training data."""
        self._check_fitted()
        ids = self._encode(gram, "the n-gram")
        if len(ids) != self.n:
            raise ValueError(f"count expects an n-gram of exactly n={self.n} symbols, got {len(ids)}")
        code = 0
        for i in ids:
            code = code * self.vocab_size + int(i)
        t = self._tables[self.n]
        return int(_lookup(t.grams, t.counts, np.array([code], dtype=np.int64))[0])

    def seen_fraction(self, text: str | Sequence[str]) -> float:
        """The fraction of the n-grams of ``text`` that occur in training."""
        self._check_fitted()
        ids = self._encode(text, "the text")
        if len(ids) < self.n:
            raise ValueError(f"the text has {len(ids)} symbols, fewer than n={self.n}: it holds no n-gram")
        codes = ids[: len(ids) - self.n + 1].copy()
        for m in range(2, self.n + 1):
            codes = codes * self.vocab_size + ids[m - 1: len(ids) - self.n + m]
        t = self._tables[self.n]
        return float(np.mean(_lookup(t.grams, t.counts, codes) > 0))

    @property
    def n_contexts(self) -> int:
        """How many distinct (n-1)-symbol contexts training showed (one for a unigram model)."""
        self._check_fitted()
        return len(self._tables[self.n].contexts)

    # -- generation -----------------------------------------------------------------------------
    def sample(self, length: int, seed: int = 0, prompt: str | Sequence[str] = "") -> str | list[str]:
        """``length`` symbols drawn after ``prompt`` from :meth:`next_distribution` (a string or a token list); seeded."""
        self._check_fitted()
        if length < 0:
            raise ValueError(f"length must be >= 0, got {length}")
        rng = np.random.default_rng(seed)
        history = self._encode(prompt, "the prompt").tolist() if len(prompt) else []
        out: list[int] = []
        for _ in range(length):
            p = self._next_probs(history + out)
            if p.sum() == 0:  # an unseen context under maximum likelihood
                ctx = (history + out)[-(self.n - 1):]
                raise ValueError(f"the context {self._decode(ctx)!r} never occurs in training, so "
                                 f"smoothing='none' has no next-symbol distribution; use another smoothing")
            out.append(int(rng.choice(self.vocab_size, p=p / p.sum())))
        return self._decode(out)
