"""seq2seq-serve under load: requests/s and p50/p99 latency at 1, 8 and 32 concurrent
clients, with and without batching (``batching=true|false``).

Each client sends one sentence a request (``POST /translate``), the next as soon as
the answer comes, over its own keep-alive connection, for ``--seconds`` after a short
warm-up. The server runs as its own process (``python -m seq2seq.cli.serve``) on a
free port, once per mode, and is stopped with SIGTERM (it must exit 0)::

    python scripts/benchmarks/bench_serve.py outputs/train/RUN/checkpoints/best.pt
    python scripts/benchmarks/bench_serve.py best.pt --input test.de --clients 1 8 32 \
        --seconds 20

Sentences: ``--input FILE`` (one a line; a ``.jsonl`` corpus file: its column of the
checkpoint's source language), else the phrasebook's test split in that language.
Prints a Markdown table for docs/performance.md.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]


def sentences(checkpoint: Path, path: Path | None, limit: int = 500) -> list[str]:
    """``path``'s lines, or the checkpoint's phrasebook test sources."""
    if path is not None:
        lines = [x for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
        if path.suffix == ".jsonl":  # a corpus file: the source language's column
            lang = _source_language(checkpoint)
            lines = [json.loads(x)[lang] for x in lines]
        return lines[:limit]
    from seq2seq.decoding.translator import Translator
    from seq2seq.phrasebook.generator import generate_phrasebook

    data = Translator.from_checkpoint(checkpoint, device="cpu").config.data
    if data.name != "phrasebook":
        sys.exit("bench_serve.py: not a phrasebook model: give --input FILE")
    pb = data.phrasebook
    test = generate_phrasebook(pb.train_size, pb.validation_size, pb.test_size, pb.seed)
    column = "src" if data.src_lang == "en" else "tgt"
    return list(test["test"][column][:limit])


def _source_language(checkpoint: Path) -> str:
    from seq2seq.decoding.translator import Translator

    return Translator.from_checkpoint(checkpoint, device="cpu").config.data.src_lang


def start(checkpoint: Path, run_dir: Path, overrides: list[str]):
    """The server process and its port (read from its start line)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    args = [f"checkpoint={checkpoint}", "port=0", f"hydra.run.dir={run_dir}"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "seq2seq.cli.serve", *args, *overrides],
        env=env,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    lines = []
    for line in proc.stderr:
        lines.append(line)
        match = re.search(r"serving on http://127\.0\.0\.1:(\d+)/", line)
        if match:
            threading.Thread(target=proc.stderr.read, daemon=True).start()
            return proc, int(match.group(1))
    sys.exit(f"bench_serve.py: the server did not start:\n{''.join(lines)}")


def client(port: int, texts: list[str], start_at: int, until: float, out: list):
    """Requests one after another until ``until``; their latencies in ``out``."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    k = start_at
    while time.monotonic() < until:
        body = json.dumps({"texts": [texts[k % len(texts)]]})
        t0 = time.perf_counter()
        conn.request("POST", "/translate", body, {"Content-Type": "application/json"})
        answer = conn.getresponse()
        answer.read()
        if answer.status != 200:
            raise RuntimeError(f"HTTP {answer.status}")
        out.append(time.perf_counter() - t0)
        k += 1
    conn.close()


def load(port: int, texts: list[str], clients: int, seconds: float) -> dict:
    """``clients`` at once for ``seconds``: requests/s, p50 and p99 (ms)."""
    latencies: list[list[float]] = [[] for _ in range(clients)]
    t0 = time.monotonic()
    until = t0 + seconds
    threads = [
        threading.Thread(target=client, args=(port, texts, 7 * c, until, latencies[c]))
        for c in range(clients)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - t0
    flat = np.array([x for lat in latencies for x in lat]) * 1000
    return {
        "rps": len(flat) / elapsed,
        "p50": float(np.percentile(flat, 50)),
        "p99": float(np.percentile(flat, 99)),
        "n": len(flat),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", type=Path)
    parser.add_argument("--input", type=Path, default=None)
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--out", type=Path, default=Path("/tmp/bench_serve"))
    parser.add_argument(
        "overrides", nargs="*", help="seq2seq-serve settings, e.g. beam_size=5"
    )
    args = parser.parse_args()
    texts = sentences(args.checkpoint, args.input)
    rows = []
    for batching in (True, False):
        mode = f"batching={str(batching).lower()}"
        proc, port = start(
            args.checkpoint,
            args.out / f"batching_{batching}",
            [mode, "max_queue=1024", *args.overrides],
        )
        try:
            load(port, texts, max(args.clients), args.warmup)
            for clients in args.clients:
                rows.append(
                    (batching, clients, load(port, texts, clients, args.seconds))
                )
                r = rows[-1][2]
                print(
                    f"{mode} clients={clients}: {r['rps']:.1f} requests/s, "
                    f"p50 {r['p50']:.0f} ms, p99 {r['p99']:.0f} ms ({r['n']} requests)",
                    file=sys.stderr,
                )
        finally:
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(timeout=120)
        if code != 0:
            sys.exit(f"bench_serve.py: the server exited {code} on SIGTERM")
    print("| batching | clients | requests/s | × 1 client | p50 (ms) | p99 (ms) |")
    print("|---|---:|---:|---:|---:|---:|")
    for batching, clients, r in rows:
        one = next(x for b, c, x in rows if b == batching and c == min(args.clients))
        print(
            f"| {'on' if batching else 'off'} | {clients} | {r['rps']:.1f} | "
            f"{r['rps'] / one['rps']:.1f} | {r['p50']:.0f} | {r['p99']:.0f} |"
        )


if __name__ == "__main__":
    main()
