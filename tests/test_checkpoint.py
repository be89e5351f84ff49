import os
import pickle
import random

import numpy as np
import pytest
import torch

from seq2seq.model import checkpoint as ckpt
from seq2seq.model.checkpoint import (
    FORMAT,
    FORMAT_VERSION,
    CheckpointError,
    average_checkpoints,
    library_versions,
    load_checkpoint,
    save_checkpoint,
)
from seq2seq.training.runtime import rng_state, set_rng_state
from tests.full_disk import simulate_full_disk


def make_state(value: float = 1.0) -> dict:
    model = torch.nn.Linear(3, 2)
    torch.nn.init.constant_(model.weight, value)
    optimizer = torch.optim.Adam(model.parameters())
    model(torch.ones(1, 3)).sum().backward()
    optimizer.step()
    return {
        "model": model.state_dict(),
        "config": {"model": {"emb_dim": 8}, "betas": [0.9, 0.999], "x": None},
        "tokenizer": {"joint": b"\x00\xffsentencepiece model bytes"},
        "optimizer": optimizer.state_dict(),
        "step": 7,
        "epoch": 2,
        "rng": rng_state(),
        "sampler": {"epoch": 2, "position": 13},
        "best_metric": 12.5,
    }


def test_round_trip(tmp_path):
    path = tmp_path / "run" / "last.pt"
    state = make_state()
    save_checkpoint(path, state)
    loaded = load_checkpoint(path)
    assert loaded["format"] == FORMAT and loaded["format_version"] == FORMAT_VERSION
    assert loaded["tokenizer"]["joint"] == state["tokenizer"]["joint"]  # bytes survive
    assert loaded["config"] == state["config"]
    assert (loaded["step"], loaded["epoch"]) == (7, 2)
    assert loaded["sampler"] == state["sampler"]
    for name, tensor in state["model"].items():
        torch.testing.assert_close(loaded["model"][name], tensor)
    assert loaded["optimizer"]["state"][0]["step"] == 1
    assert set(loaded["versions"]) >= {"torch", "sacrebleu", "python", "seq2seq"}
    assert os.listdir(path.parent) == ["last.pt"]


def test_library_versions():
    versions = library_versions()
    assert versions["torch"] == torch.__version__
    assert all(isinstance(v, str) for v in versions.values())


@pytest.mark.parametrize("where", ["torch.save", "os.replace"])
def test_crash_during_save_keeps_previous(tmp_path, monkeypatch, where):
    path = tmp_path / "last.pt"
    save_checkpoint(path, make_state(1.0))

    def boom(*args, **kwargs):
        if where == "torch.save":  # write half a file, then die
            args[1].write(b"PK\x03\x04 half written")
        raise OSError("simulated crash")

    module = torch if where == "torch.save" else os
    monkeypatch.setattr(module, where.split(".")[1], boom)
    with pytest.raises(OSError, match="simulated crash"):
        save_checkpoint(path, make_state(2.0))
    monkeypatch.undo()
    assert os.listdir(tmp_path) == ["last.pt"]  # no stray temp file
    weight = load_checkpoint(path)["model"]["weight"]
    assert torch.all(weight < 1.5)  # still the first state (1.0 after one Adam step)


def test_full_disk_says_so_and_keeps_previous(tmp_path, monkeypatch):
    path = tmp_path / "last.pt"
    save_checkpoint(path, make_state(1.0))
    simulate_full_disk(monkeypatch, limit=512)
    with pytest.raises(CheckpointError, match="no space left on device") as info:
        save_checkpoint(path, make_state(2.0))
    assert "previous one is unchanged" in str(info.value)
    assert "unexpected pos" in str(info.value.__cause__)  # what torch itself says
    monkeypatch.undo()
    assert os.listdir(tmp_path) == ["last.pt"]  # the temporary file is gone
    assert torch.all(load_checkpoint(path)["model"]["weight"] < 1.5)


class Exploit:
    """Unpickling this would run a shell command."""

    def __reduce__(self):
        return (os.system, ("touch pwned",))


@pytest.mark.parametrize("how", ["torch.save", "pickle", "legacy torch.save"])
def test_malicious_pickle_is_refused_as_unsafe_without_running(
    tmp_path, monkeypatch, how
):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "evil.pt"
    state = {"format": FORMAT, "format_version": 1, "model": Exploit()}
    if how == "pickle":
        path.write_bytes(pickle.dumps(state))
    else:
        zipped = how == "torch.save"
        torch.save(state, path, _use_new_zipfile_serialization=zipped)
    with pytest.raises(CheckpointError, match=r"unsafe and was not loaded") as info:
        load_checkpoint(path)
    assert "system" in str(info.value) and "truncated" not in str(info.value)
    assert not (tmp_path / "pwned").exists()


def test_missing_file(tmp_path):
    with pytest.raises(CheckpointError, match="does not exist"):
        load_checkpoint(tmp_path / "nope.pt")


@pytest.mark.parametrize("keep", [0, 10, 0.5])
def test_truncated_file(tmp_path, keep):
    path = tmp_path / "best.pt"
    save_checkpoint(path, make_state())
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep) if keep < 1 else keep])
    with pytest.raises(CheckpointError, match=r"empty|truncated"):
        load_checkpoint(path)


def test_foreign_files(tmp_path):
    torch_file = tmp_path / "weights.pt"
    torch.save({"weight": torch.zeros(2)}, torch_file)
    with pytest.raises(CheckpointError, match="not a seq2seq checkpoint"):
        load_checkpoint(torch_file)
    text_file = tmp_path / "notes.pt"
    text_file.write_text("hello, I am not a checkpoint\n")
    with pytest.raises(CheckpointError, match="not a PyTorch checkpoint"):
        load_checkpoint(text_file)
    unsafe = tmp_path / "unsafe.pt"
    torch.save({"format": FORMAT, "obj": torch.nn.Linear(1, 1)}, unsafe)
    with pytest.raises(CheckpointError, match="weights_only"):
        load_checkpoint(unsafe)


def test_newer_format_version(tmp_path):
    path = tmp_path / "future.pt"
    save_checkpoint(path, {"format_version": FORMAT_VERSION + 1, "model": {}})
    with pytest.raises(CheckpointError, match="newer"):
        load_checkpoint(path)


def test_save_rejects_other_format(tmp_path):
    with pytest.raises(ValueError, match="format"):
        save_checkpoint(tmp_path / "x.pt", {"format": "other"})


def draws() -> tuple:
    return (
        [random.random() for _ in range(3)],
        np.random.rand(3).tolist(),
        np.random.randn(1).tolist(),
        torch.rand(3).tolist(),
    )


def test_rng_round_trip_through_a_checkpoint(tmp_path):
    random.seed(1)
    np.random.seed(2)
    torch.manual_seed(3)
    np.random.randn(1)  # leave a cached gaussian in NumPy's state
    path = tmp_path / "rng.pt"
    save_checkpoint(path, {"rng": rng_state()})
    expected = draws()
    draws()  # move every generator on
    set_rng_state(load_checkpoint(path)["rng"])
    assert draws() == expected


def test_set_rng_state_warns_on_cuda_mismatch(monkeypatch, caplog):
    state = rng_state()
    state["cuda"] = [torch.get_rng_state()] * 2
    monkeypatch.setattr(ckpt.torch.cuda, "is_available", lambda: False)
    set_rng_state(state)
    assert "CUDA RNG states for 2 devices" in caplog.text


def test_average_checkpoints(tmp_path):
    paths = []
    for k, value in enumerate([1.0, 2.0, 6.0]):
        state = make_state()
        state["model"] = {
            "w": torch.full((2, 2), value),
            "half": torch.full((2,), value, dtype=torch.float16),
            "count": torch.tensor(k),
        }
        paths.append(save_checkpoint(tmp_path / f"{k}.pt", state))
    avg = average_checkpoints(paths)
    torch.testing.assert_close(avg["w"], torch.full((2, 2), 3.0))
    assert avg["half"].dtype == torch.float16 and float(avg["half"][0]) == 3.0
    assert int(avg["count"]) == 2
    with pytest.raises(ValueError):
        average_checkpoints([])


def test_unsafe_values_fail_at_save_time(tmp_path):
    path = tmp_path / "bad.pt"
    with pytest.raises(TypeError, match=r"state\['step'\] is a numpy.int64"):
        save_checkpoint(path, {"step": np.int64(3)})
    assert not list(tmp_path.iterdir())
