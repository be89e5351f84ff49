"""``seq2seq-serve`` as a process: it binds 127.0.0.1 and says so, and on SIGINT or
SIGTERM answers the request in flight, then exits 0; another host needs a key (or
``allow_anonymous``), which it then asks of every API request over a real socket,
with request ids, readiness, metrics and a client that leaves dropped."""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def start_server(
    checkpoint: Path, run_dir: Path, *overrides: str, wait_s: float = 120, env=None
):
    """``python -m seq2seq.cli.serve`` on a free port; the process and its port
    (it must say where it serves within ``wait_s``)."""
    env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "seq2seq.cli.serve",
            f"checkpoint={checkpoint}",
            "port=0",
            f"hydra.run.dir={run_dir}",
            *overrides,
        ],
        cwd=run_dir.parent,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + wait_s
    lines = []
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line and proc.poll() is not None:
            break
        lines.append(line)
        match = re.search(r"serving on http://[0-9.]+:(\d+)/", line)
        if match:
            return proc, int(match.group(1)), line
    proc.kill()
    raise RuntimeError("the server did not start:\n" + "".join(lines))


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["TERM", "INT"])
def test_a_stop_signal_answers_the_request_in_flight_and_exits_0(
    tiny_checkpoint, tmp_path, stop
):
    proc, port, line = start_server(tiny_checkpoint, tmp_path / "run")
    assert "only this machine can connect" in line
    body = json.dumps({"texts": ["Tom cooks this egg ."]}).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        conn.sendall(
            b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
            + f"\r\nContent-Length: {len(body)}\r\n\r\n".encode()
            + body[:10]
        )
        time.sleep(0.5)  # the request is in flight: its body half sent
        proc.send_signal(stop)
        time.sleep(0.5)
        conn.sendall(body[10:])
        answer = b""
        while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
            chunk = conn.recv(65536)
            if not chunk:
                break
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 200"), answer
    assert b'"translations"' in answer
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert f"stopped by {stop.name}" in err and "Traceback" not in err
    with pytest.raises(OSError):  # nothing listens any more
        socket.create_connection(("127.0.0.1", port), timeout=5).close()


def test_serving_other_machines_without_a_key_is_refused_in_one_line(
    tiny_checkpoint, tmp_path
):
    env = {k: v for k, v in os.environ.items() if k != "SEQ2SEQ_API_KEY"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "seq2seq.cli.serve",
            f"checkpoint={tiny_checkpoint}",
            "host=0.0.0.0",
            f"hydra.run.dir={tmp_path / 'run'}",
        ],
        cwd=tmp_path,
        env={**env, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == (
        "seq2seq-serve: error: host=0.0.0.0 serves other machines: give a key "
        "(api_key=KEY, or the environment's SEQ2SEQ_API_KEY) or allow_anonymous=true"
    )


def test_a_checkpoint_that_fails_on_the_model_thread_is_one_line_and_exit_2(tmp_path):
    """The model is loaded on its own thread (``batcher.model_thread``): a file
    that is no checkpoint still ends the command in one line, exit 2, without
    leaving the thread to hold the process."""
    bad = tmp_path / "best.pt"
    bad.write_text("not a checkpoint")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "seq2seq.cli.serve",
            f"checkpoint={bad}",
            f"hydra.run.dir={tmp_path / 'run'}",
        ],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"seq2seq-serve: error: checkpoint {bad} (16 bytes) ")
    assert "is not a PyTorch checkpoint" in line


def _ask(port, method, path, body=None, headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    data = None if body is None else json.dumps(body)
    heads = {"Content-Type": "application/json", **(headers or {})}
    conn.request(method, path, data, heads)
    res = conn.getresponse()
    return res.status, dict(res.getheaders()), res.read().decode()


def test_a_keyed_server_beyond_localhost_ids_ready_metrics_and_leavers(
    tiny_checkpoint, tmp_path
):
    proc, port, line = start_server(
        tiny_checkpoint,
        tmp_path / "run",
        "host=0.0.0.0",
        env={"SEQ2SEQ_API_KEY": "s3cret"},
    )
    key = {"Authorization": "Bearer s3cret"}
    try:
        assert "can connect, with the API key" in line
        assert _ask(port, "GET", "/ready")[0] == 200  # probes need no key
        status, heads, text = _ask(port, "POST", "/translate", {"texts": ["a"]})
        assert status == 401 and heads["www-authenticate"] == "Bearer", text
        assert "\n" not in text and heads["x-request-id"]
        status, heads, _ = _ask(
            port,
            "POST",
            "/translate",
            {"texts": ["Tom cooks this egg ."]},
            {**key, "X-Request-Id": "proc-1"},
        )
        assert status == 200 and heads["x-request-id"] == "proc-1"
        assert "compute;dur=" in heads["server-timing"]
        # A keeps the model busy; B's client sends its request and leaves
        texts = [" ".join(["Tom cooks this egg and the red car ."] * 3)] * 32
        slow = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        body = json.dumps({"texts": texts, "beam_size": 32, "nbest": 10})
        slow.request(
            "POST", "/translate", body, {"Content-Type": "application/json", **key}
        )
        time.sleep(0.05)
        with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
            leave = json.dumps({"texts": ["the cat sleeps"]}).encode()
            conn.sendall(
                b"POST /translate HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer s3cret"
                + b"\r\nContent-Type: application/json\r\n"
                + f"Content-Length: {len(leave)}\r\n\r\n".encode()
                + leave
            )
            time.sleep(0.05)
        assert slow.getresponse().status == 200
        status, _, text = _ask(port, "GET", "/metrics", headers=key)
        assert status == 200
        assert "seq2seq_serve_abandoned_total 1.0" in text, text
        assert 'route="/translate",status="499"' in text
        assert _ask(port, "GET", "/metrics")[0] == 401
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "Traceback" not in err, err
