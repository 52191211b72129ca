"""Pattern-directed model generation: per-pass generators, the fuzz corpus, and its replay data.

Importing this package registers every generator family in GENERATORS.
"""

from ditox_ci.fuzz import chains, fusions, graphs, nops, shapes
from ditox_ci.fuzz.base import GENERATORS, GeneratedModel, Generator, generate, register
from ditox_ci.fuzz.corpus import generate_within, write_corpus

FAMILIES = tuple(
    module.__name__.rsplit(".", 1)[-1] for module in (chains, fusions, graphs, nops, shapes)
)

__all__ = ["FAMILIES", "GENERATORS", "GeneratedModel", "Generator", "generate", "generate_within",
           "register", "write_corpus"]
