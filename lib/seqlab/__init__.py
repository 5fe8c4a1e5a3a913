"""seqlab: the helper package of the course "from recurrent networks to Transformers".

Importing seqlab has no side effects: it downloads nothing, trains nothing, prints nothing.
Subpackages: ``seqlab.data`` (corpora, vocabularies, batching, synthetic tasks, downloads),
``seqlab.train`` (the shared training loop), ``seqlab.device`` (CPU/CUDA choice),
``seqlab.nn`` (from-scratch torch.nn twins and building blocks), ``seqlab.models`` (task models built
from them), ``seqlab.widgets`` (interactive figures), ``seqlab.exercises`` (the notebooks' checkers)
and ``seqlab.experiments`` (the runs their "predict, then measure" exercises judge).
"""

from seqlab.device import get_device, seed_everything

__version__ = "0.1.0"
__all__ = ["get_device", "seed_everything", "__version__"]
