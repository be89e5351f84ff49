"""The phrasebook: a built-in English–French corpus with gold word alignments,
generated from a seeded grammar (``generator``) over a small lexicon (``lexicon``).

It sits beside the data pipeline, not in it: ``data/corpus.py`` reads it like any
other source. Its content is a function of its sizes, its seed and
``GENERATOR_VERSION``, which keys the prepared cache: bump the version whenever a
change to the grammar or the lexicon changes a generated pair (a comment or a
refactoring that generates the same pairs leaves every prepared cache valid;
``tests/test_phrasebook.py`` pins a few pairs so such a change is noticed).
"""

from seq2seq.phrasebook.generator import (
    generate_phrasebook,
    phrasebook_columns,
    reverse_columns,
    transpose_links,
)

GENERATOR_VERSION = 1

__all__ = [
    "GENERATOR_VERSION",
    "generate_phrasebook",
    "phrasebook_columns",
    "reverse_columns",
    "transpose_links",
]
