"""seq2seq-serve under load: requests/s and p50/p99 latency at 1, 8, 32 and 128
concurrent clients, with and without batching (``batching=true|false``); or a soak.

Each client sends one sentence a request (``POST /translate``), the next as soon as
the answer comes, over its own keep-alive connection, for ``--seconds`` after a short
warm-up, with the answer cache off (``cache_size=0``: each request a search). Both
servers (batching on and off) run at once, each its own process (``python -m
seq2seq.cli.serve``) on a free port, idle while the other is measured; each client
count is measured in ``--rounds`` (3) rounds that alternate the two, ``--seconds`` in
all, so that the machine's drift falls on both alike. Requests/s is the median of
the rounds, p50/p99 over all their requests, and the lone client's price is the
median of the rounds' paired ratios. The servers are stopped with SIGTERM (they must
exit 0)::

    python scripts/benchmarks/bench_serve.py outputs/train/RUN/checkpoints/best.pt
    python scripts/benchmarks/bench_serve.py best.pt --input test.de --clients 1 8 32 \
        --seconds 20

Sentences: ``--input FILE`` (one a line; a ``.jsonl`` corpus file: its column of the
checkpoint's source language), else the phrasebook's test split in that language.
Prints a Markdown table for docs/performance.md, and the lone client's price of
batching (on against off at the fewest clients; the target: at least 0.95).

``--soak [MINUTES]`` (10 when no number): one server (batching on), ``--soak-clients``
(32) clients sending a mix of valid (``/translate``, some ``/attention``), invalid
(4xx) and abandoned requests (the client hangs up before the answer), for MINUTES.
It prints the answers by status, p50/p99 of the valid ones, and the server's
resident memory after the warm-up (the first fifth, at most ``--soak-warmup`` s)
against the end; it exits 1 on any 5xx or a growth over 5 %.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
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
    flat = [x * 1000 for lat in latencies for x in lat]
    return {"rps": len(flat) / elapsed, "ms": flat}


def summary(rounds: list[dict]) -> dict:
    """Rounds of one setting: the median requests/s, p50 and p99 over all."""
    ms = np.array([x for r in rounds for x in r["ms"]])
    return {
        "rps": float(np.median([r["rps"] for r in rounds])),
        "p50": float(np.percentile(ms, 50)),
        "p99": float(np.percentile(ms, 99)),
        "n": len(ms),
    }


# ----------------------------------------------------------------------------- soak
INVALID = [  # (path, body, content type): each answered 4xx in one line
    ("/translate", b'{"texts": ["a"', "application/json"),  # 400 malformed JSON
    ("/translate", b'{"texts": ["a"], "model": "x.pt"}', "application/json"),  # 422
    ("/translate", b'{"texts": ["  "]}', "application/json"),  # 422 empty text
    ("/translate", b'{"texts": ["a"], "beam_size": 0}', "application/json"),  # 422
    ("/translate", b'{"texts": ["a"]}', "text/plain"),  # 415
    ("/nothing", b"{}", "application/json"),  # 404
]


def rss(pid: int) -> int:
    """The process's resident memory (bytes), from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def _abandon(port: int, body: bytes, rng: random.Random) -> None:
    """A request whose client hangs up before the answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        conn.sendall(
            b"POST /translate HTTP/1.1\r\nHost: soak\r\n"
            b"Content-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        time.sleep(rng.uniform(0, 0.02))


def soak_client(port: int, texts: list[str], seed: int, until: float, out: dict):
    """Mixed requests until ``until``: statuses and the valid ones' latencies."""
    rng = random.Random(seed)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    while time.monotonic() < until:
        draw = rng.random()
        text = texts[rng.randrange(len(texts))]
        if draw < 0.15:
            _abandon(port, json.dumps({"texts": [text]}).encode(), rng)
            out["statuses"]["abandoned"] += 1
            continue
        if draw < 0.30:
            path, body, kind = INVALID[rng.randrange(len(INVALID))]
        elif draw < 0.37:
            path, body, kind = (
                "/attention",
                json.dumps({"text": text}),
                "application/json",
            )
        else:
            path, body, kind = (
                "/translate",
                json.dumps({"texts": [text]}),
                "application/json",
            )
        t0 = time.perf_counter()
        try:
            conn.request("POST", path, body, {"Content-Type": kind})
            answer = conn.getresponse()
            answer.read()
        except (OSError, http.client.HTTPException) as err:
            out["statuses"][f"connection error ({type(err).__name__})"] += 1
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            continue
        out["statuses"][answer.status] += 1
        if answer.status == 200:
            out["latencies"].append(time.perf_counter() - t0)
        else:  # an error may leave the body unread: a fresh connection
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    conn.close()


def soak(
    port: int, pid: int, texts: list[str], clients: int, seconds: float, warmup: float
) -> dict:
    """``clients`` soak clients for ``seconds``; the server's RSS after ``warmup``
    seconds and at the end; statuses and p50/p99 (ms) of the valid requests."""
    outs = [{"statuses": Counter(), "latencies": []} for _ in range(clients)]
    until = time.monotonic() + seconds
    threads = [
        threading.Thread(target=soak_client, args=(port, texts, c, until, outs[c]))
        for c in range(clients)
    ]
    for t in threads:
        t.start()
    time.sleep(warmup)
    rss_warm = rss(pid)
    for t in threads:
        t.join()
    rss_end = rss(pid)
    flat = np.array([x for o in outs for x in o["latencies"]]) * 1000
    return {
        "statuses": sum((o["statuses"] for o in outs), Counter()),
        "p50": float(np.percentile(flat, 50)) if len(flat) else float("nan"),
        "p99": float(np.percentile(flat, 99)) if len(flat) else float("nan"),
        "rss_warm": rss_warm,
        "rss_end": rss_end,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", type=Path)
    parser.add_argument("--input", type=Path, default=None)
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32, 128])
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("/tmp/bench_serve"))
    parser.add_argument("--soak", type=float, nargs="?", const=10.0, default=None)
    parser.add_argument("--soak-clients", type=int, default=32)
    parser.add_argument("--soak-warmup", type=float, default=60.0)
    parser.add_argument(
        "overrides", nargs="*", help="seq2seq-serve settings, e.g. beam_size=5"
    )
    args = parser.parse_args()
    texts = sentences(args.checkpoint, args.input)
    if args.soak is not None:
        sys.exit(run_soak(args, texts))
    servers = {}
    try:
        for batching in (True, False):
            mode = f"batching={str(batching).lower()}"
            servers[batching] = start(
                args.checkpoint,
                args.out / f"batching_{batching}",
                [mode, "max_queue=1024", "cache_size=0", *args.overrides],
            )
            load(servers[batching][1], texts, max(args.clients), args.warmup)
        rounds: dict[tuple[bool, int], list[dict]] = {}
        for clients in args.clients:
            for r in range(args.rounds):
                for batching in (True, False) if r % 2 == 0 else (False, True):
                    port = servers[batching][1]
                    got = load(port, texts, clients, args.seconds / args.rounds)
                    rounds.setdefault((batching, clients), []).append(got)
            for batching in (True, False):
                row = summary(rounds[(batching, clients)])
                print(
                    f"batching={str(batching).lower()} clients={clients}: "
                    f"{row['rps']:.1f} requests/s, p50 {row['p50']:.0f} ms, "
                    f"p99 {row['p99']:.0f} ms ({row['n']} requests)",
                    file=sys.stderr,
                )
    finally:
        for proc, _ in servers.values():
            proc.send_signal(signal.SIGTERM)
        codes = [proc.wait(timeout=120) for proc, _ in servers.values()]
    if any(codes):
        sys.exit(f"bench_serve.py: a server exited {codes} on SIGTERM")
    rows = {key: summary(r) for key, r in rounds.items()}
    fewest = min(args.clients)
    print("| batching | clients | requests/s | × 1 client | p50 (ms) | p99 (ms) |")
    print("|---|---:|---:|---:|---:|---:|")
    for batching in (True, False):
        one = rows[(batching, fewest)]["rps"]
        for clients in args.clients:
            r = rows[(batching, clients)]
            print(
                f"| {'on' if batching else 'off'} | {clients} | {r['rps']:.1f} | "
                f"{r['rps'] / one:.1f} | {r['p50']:.0f} | {r['p99']:.0f} |"
            )
    paired = [
        on["rps"] / off["rps"]
        for on, off in zip(rounds[(True, fewest)], rounds[(False, fewest)], strict=True)
    ]
    print(
        f"\n{fewest} client(s), batching on against off, the median of "
        f"{len(paired)} paired rounds: {np.median(paired):.2f} (target >= 0.95; "
        f"rounds {', '.join(f'{x:.2f}' for x in paired)})"
    )


def run_soak(args: argparse.Namespace, texts: list[str]) -> int:
    """The soak against one server; its exit status (1: a 5xx or memory grew)."""
    proc, port = start(
        args.checkpoint, args.out / "soak", ["batching=true", *args.overrides]
    )
    try:
        report = soak(
            port,
            proc.pid,
            texts,
            clients=args.soak_clients,
            seconds=args.soak * 60,
            warmup=min(args.soak_warmup, args.soak * 60 / 5),
        )
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=120)
    statuses: Counter = report["statuses"]
    print("| answer | count |\n|---|---:|")
    for status, n in sorted(statuses.items(), key=lambda kv: str(kv[0])):
        print(f"| {status} | {n} |")
    growth = report["rss_end"] / report["rss_warm"] - 1
    print(
        f"\nvalid requests: p50 {report['p50']:.0f} ms, p99 {report['p99']:.0f} ms; "
        f"resident memory after warm-up {report['rss_warm'] / 2**20:.1f} MiB, at the "
        f"end {report['rss_end'] / 2**20:.1f} MiB ({growth:+.1%}; at most +5 %)"
    )
    errors = sum(n for s, n in statuses.items() if isinstance(s, int) and s >= 500)
    failed = []
    if errors:
        failed.append(f"{errors} answers 5xx")
    if growth > 0.05:
        failed.append(f"resident memory grew {growth:.1%}")
    if code != 0:
        failed.append(f"the server exited {code} on SIGTERM")
    if failed:
        print("bench_serve.py: soak failed: " + "; ".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    main()
