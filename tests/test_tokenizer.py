from seq2seq.data.tokenizer import BOS_ID, EOS_ID, PAD_ID, UNK_ID, Tokenizer

SRC = [
    f"der {c} Hund läuft schnell über die Wiese Nummer {i}"
    for i, c in enumerate("abcdefgh")
]
TGT = [
    f"the {c} dog runs fast across the meadow number {i}"
    for i, c in enumerate("abcdefgh")
]


def test_special_ids_are_fixed():
    assert (PAD_ID, UNK_ID, BOS_ID, EOS_ID) == (0, 1, 2, 3)
    tok = Tokenizer.train(SRC, TGT, vocab_size=60)
    assert tok.src_pieces([PAD_ID, UNK_ID, BOS_ID, EOS_ID]) == [
        "<pad>",
        "<unk>",
        "<s>",
        "</s>",
    ]


def test_joint_round_trip_and_shared_vocabulary():
    tok = Tokenizer.train(SRC, TGT, vocab_size=60, joint=True)
    assert tok.joint and tok.src_vocab_size == tok.tgt_vocab_size
    ids = tok.encode_src(SRC)
    assert all(EOS_ID not in x and BOS_ID not in x for x in ids)
    assert [tok.decode_src(x) for x in ids] == SRC
    assert [tok.decode_tgt(x) for x in tok.encode_tgt(TGT)] == TGT


def test_separate_models_have_their_own_vocabularies():
    tok = Tokenizer.train(SRC, TGT, vocab_size=50, joint=False)
    assert not tok.joint
    assert tok.src_pieces(tok.encode_src(["Hund"])[0]) != tok.tgt_pieces(
        tok.encode_tgt(["Hund"])[0]
    )
    assert tok.decode_tgt(tok.encode_tgt(TGT[:1])[0]) == TGT[0]
    assert set(tok.to_bytes()) == {"src", "tgt"}


def test_decode_drops_specials_and_stops_at_eos():
    tok = Tokenizer.train(SRC, TGT, vocab_size=60)
    ids = tok.encode_tgt(["the dog"])[0]
    assert tok.decode_tgt([BOS_ID, *ids, EOS_ID, *ids, PAD_ID]) == "the dog"


def test_vocab_larger_than_corpus_allows_does_not_crash():
    for model_type in ("unigram", "bpe"):
        tok = Tokenizer.train(
            ["a b c", "hello"], ["x y"], vocab_size=8000, model_type=model_type
        )
        assert 4 < tok.src_vocab_size < 8000
        assert tok.decode_src(tok.encode_src(["hello"])[0]) == "hello"


def test_bytes_round_trip_and_determinism():
    for joint in (True, False):
        tok = Tokenizer.train(SRC, TGT, vocab_size=50, joint=joint, seed=3)
        again = Tokenizer.train(SRC, TGT, vocab_size=50, joint=joint, seed=3)
        assert tok.to_bytes() == again.to_bytes()
        loaded = Tokenizer.from_bytes(tok.to_bytes())
        assert loaded.joint == joint
        assert loaded.encode_src(SRC) == tok.encode_src(SRC)
        assert loaded.encode_tgt(TGT) == tok.encode_tgt(TGT)


def test_training_writes_nothing_to_cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Tokenizer.train(SRC, TGT, vocab_size=50)
    assert list(tmp_path.iterdir()) == []


def test_a_vocabulary_larger_than_the_text_supports_is_said(caplog):
    texts = ["the small blue chair .", "a red chair .", "the blue car ."] * 5
    tokenizer = Tokenizer.train(texts, texts, vocab_size=100000)
    reached = tokenizer.src_vocab_size
    assert reached < 100
    assert (
        f"vocabulary size 100000 asked, but the training text supports only "
        f"{reached} pieces: using {reached}" in caplog.text
    )


def test_few_and_many_sentences_encode_alike():
    """One call per sentence (a few) and SentencePiece's pooled list call (many)
    give the same ids, on both sides."""
    from seq2seq.data.tokenizer import POOLED_FROM

    tok = Tokenizer.train(SRC, TGT, vocab_size=60, joint=False)
    many = [SRC[i % len(SRC)] + f" {i}" for i in range(POOLED_FROM + 5)]
    pooled = tok.encode_src(many)
    assert [tok.encode_src([s])[0] for s in many] == pooled
    assert tok.encode_src(many[:3]) == pooled[:3]
    targets = [TGT[i % len(TGT)] for i in range(POOLED_FROM)]
    assert tok.encode_tgt(targets)[:4] == tok.encode_tgt(targets[:4])
    assert tok.encode_src([]) == []
