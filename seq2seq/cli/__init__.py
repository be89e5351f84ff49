"""The commands: where a command line becomes library calls, and a user's mistake a
one-line message with exit status 2.

``app`` is the Hydra entry and the error boundary, ``checks`` the decoding commands'
shared rules; ``prepare``, ``train``, ``evaluate``, ``translate``, ``distill``,
``align``, ``average`` and ``serve`` are the commands (``pyproject.toml``'s console
scripts): each checks its settings, reads its config, builds objects and calls the
library. Nothing imports a command.
"""
