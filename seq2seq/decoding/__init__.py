"""A trained model at work: searches, scores and the ``Translator``.

``settings`` makes the decoding settings and the output limit, ``search`` holds
greedy and beam search, ``ensemble`` decodes models of one vocabulary as one,
``maps`` turns forced attention into maps (``AttentionMap``), ``scores`` is
sacreBLEU, ``translator`` bundles a model with all it needs (the Python API), and
``distill`` decodes a whole split in resumable chunks (sequence-level distillation).
The what-ifs: ``prefix`` (target prefixes the searches continue), ``knockout``
(source words and heads knocked out), ``forced`` (forced passes under them, each
step's distribution, occlusion) and ``whatif`` (those on a ``Translator``).
The search's speed machinery: ``shortcuts`` (the step a search runs, with fewer
FLOPs), ``vocab`` (the vocabulary projection in bf16 or int8) and ``quantized`` (the
int8 kernels). It imports ``config``, ``data`` and ``model``.
"""
