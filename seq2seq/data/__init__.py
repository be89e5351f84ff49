"""The corpus and its ids: where the pairs come from and how they become batches.

``columns`` names the splits and cleans a source's columns; ``files`` reads local
files and ``hub`` Hugging Face datasets, ``corpus`` chooses the source (the built-in
``seq2seq.phrasebook`` among them) and ``links_file`` reads word links from a file;
``tokenizer`` is SentencePiece, ``pieces`` groups its pieces into words; ``splits``
holds a split's texts and ids (``EncodedSplit``), ``store`` the prepared cache's
memory-mapped arrays, and ``prepare`` builds that cache once; ``batching`` makes the
batches (``Batch``) with a token-bucket sampler, ``sampling`` and ``lattice`` sample
subword segmentations of the training batches. It imports only the ``config`` layer.
"""
