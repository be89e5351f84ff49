"""What the attention looked at: as numbers, pictures, links and a training signal.

``maps`` names the record (``AttentionMap``), ``extract`` makes maps by forced
decoding, ``words`` regroups pieces into words and ``views`` picks a layer or a head;
``links`` reads Pharaoh links and computes AER, ``error`` scores a model on gold
links, ``symmetrize``, ``lexicon`` and ``twoway`` combine two directions; ``guided``
is the guided-alignment loss, ``attribution`` gradient × input, ``occlusion`` draws
occlusion beside the attention and ``agreement`` compares the methods' argmaxes;
``scale`` is the one colour scale every picture draws with; ``export``, ``render``,
``terminal`` and ``viewer`` write files, heatmaps, text heatmaps and the HTML page,
``notebook`` the same view inline in Jupyter; ``report_metrics``, ``report`` and
``report_page`` make the corpus report (a split's sentences, their scores and
attention numbers, one page); ``pipeline`` is ``seq2seq-align``'s job. It imports
``decoding`` and the layers before it.
"""
