"""``seq2seq-serve``'s library: a translation server with a live attention explorer.

``engine`` runs a ``Translator`` on requests (translations, n-best, attention,
attribution), ``batcher`` gathers concurrent requests into one search on one worker
thread, ``schemas`` says what a request may hold, ``guard`` refuses bodies before
they are parsed, ``app`` is the ASGI application (FastAPI) with the page at ``/``,
``server`` runs it with uvicorn; ``whatif`` checks the what-ifs (prefixes, knock-outs)
and builds their answers' parts; ``twoway`` reads each shown pair with a model trained
the other way (its attention, both directions' symmetrized word links);
``libretranslate`` answers LibreTranslate's API (its fields checked by
``libre_fields``), cutting texts into sentences with ``sentences`` and HTML into text
nodes with ``markup``; ``apidocs`` serves the API docs page without a CDN. As a
service: ``tracing`` (request ids, timings, counts), ``metrics`` (Prometheus),
``cache`` (recent answers), ``abandon`` (clients that leave), ``health``
(readiness), ``auth`` (API keys). It composes ``decoding`` and ``alignment``.
"""
