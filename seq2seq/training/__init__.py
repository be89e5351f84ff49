"""``seq2seq-train``'s library: the training loop and everything around it.

``trainer`` is the loop, ``objective`` a micro-batch's loss, ``limits`` when to
stop, ``progress`` what a run has reached, ``resume`` what a checkpoint must match to
go on, ``validation`` the scores and pictures of a validation, ``optim`` the
optimizers and schedules, ``ema`` the weights' moving average, ``runtime`` seeds,
threads, signals and the compile toolchain, ``distributed`` torchrun/DDP,
``tracking`` TensorBoard and the progress bar; ``pipeline`` is the whole job. It
imports every layer but ``cli``.
"""
