"""The model, and apart from it what makes it run fast.

The model: ``attention`` (score functions, masked softmax), ``encoder`` (bi-GRU and
bridge), ``self_attention`` (Transformer blocks over its states), ``decoder_state``
(what a decoder hands on), ``decoder`` (what the decoder styles share) and one
module per style, ``bahdanau``, ``luong`` and ``rnmt``; ``deep_gru`` (layer norm,
deep transition, residual stacks), ``output_layer`` and ``loss``; ``seq2seq`` puts
them together (``build_model``).

Where and how fast it runs, each speed-up held equal to the model by a test:
``device`` (device and precision), ``precision`` (autocast's casts once per batch),
``loop_padding`` (the decoder's step loop padded to a few shapes), ``stepped_gru``
(an ``nn.GRU`` stepped by hand), ``deep_gru_loop`` (the ``DeepGRU``'s loop with a
hand-written backward), ``compiled`` (``torch.compile``), ``shape_buckets`` (bf16
matmuls padded to shapes already built), ``dropout`` (cheap CPU masks).

Its file: ``checkpoint`` (save, load, average) and ``pickles`` (what a safe load
accepts). It imports ``config`` and ``data``.
"""
