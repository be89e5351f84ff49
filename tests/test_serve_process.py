"""``seq2seq-serve`` as a process: it binds 127.0.0.1 and says so, and on SIGINT or
SIGTERM answers the request in flight, then exits 0."""

from __future__ import annotations

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


def start_server(checkpoint: Path, run_dir: Path, *overrides: str, wait_s: float = 120):
    """``python -m seq2seq.cli.serve`` on a free port; the process and its port
    (it must say where it serves within ``wait_s``)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
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
        match = re.search(r"serving on http://127\.0\.0\.1:(\d+)/", line)
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
