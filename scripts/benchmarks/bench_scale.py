"""The data path at WMT scale: prepare, start-up and memory on synthetic corpora.

For each size, a deterministic synthetic corpus with WMT14 en-de's shape
(``scripts/synthetic_corpus.py``: Zipfian word types, log-normal sentence lengths) is
written under ``--workdir`` (reused when present), then measured in fresh processes:

- ``seq2seq-prepare`` (``tokenizer.vocab_size``, default 32,000): wall time, peak RSS,
  peak private memory (RssAnon) and the cache's size on disk;
- a cache hit: ``seq2seq-prepare`` again, 5 times (medians of the seconds it reports
  and of the whole command);
- one epoch's batch planning on the prepared lengths (median of 3, in this process);
- the data path's own memory: mapping the cache and planning an epoch in a process
  with torch imported and no model, for one rank, and summed over two ranks that
  each plan their share;
- ``seq2seq-train model=tiny`` on the prepared cache for ``--steps`` steps, one rank
  and two gloo ranks under ``torchrun``: seconds from launch to the log line of the
  first step, peak RSS, and peak private memory (RssAnon) and PSS summed over the
  ranks. PSS splits each shared page (the memory-mapped cache, the libraries)
  between the processes that map it: what the ranks cost together.

Memory is sampled from ``/proc`` every 0.1 s for the whole process tree. Run alone on
the machine (``flock``), as each figure is wall time or memory:

    flock /tmp/seq2seq-cpu.lock python scripts/benchmarks/bench_scale.py \\
        --sizes 500000,1500000,4500000
    python scripts/benchmarks/bench_scale.py --sizes 4500000 --hits-only   # that cache
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

# synthetic_corpus.py sits one level up, in scripts/
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from synthetic_corpus import write_corpus

FIRST_STEP = "first step of this process done"


def tree(pid: int) -> list[int]:
    """``pid`` and its descendants."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += children.get(p, [])
    return out


def memory_of(pid: int) -> dict[str, int]:
    """VmRSS, RssAnon (kB, from status) and Pss (kB, from smaps_rollup)."""
    out = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "RssAnon"):
                out[key] = int(value.split()[0])
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                out["Pss"] = int(line.split()[1])
    except (OSError, ValueError):
        pass
    return out


class Watch:
    """Peaks of a process tree's memory, sampled in a thread. ``rss``: the largest
    single process's RSS; ``anon`` / ``pss``: the largest sum over the python
    processes of the tree (torchrun's launcher included)."""

    def __init__(self, pid: int, period: float = 0.1) -> None:
        self.pid, self.period = pid, period
        self.rss = self.anon = self.pss = 0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        pids, looked = [self.pid], 0.0
        while not self.done.is_set():
            if time.monotonic() - looked > 1.0:  # new ranks appear; a scan costs
                pids, looked = tree(self.pid), time.monotonic()
            mems = [memory_of(p) for p in pids]
            if mems:
                self.rss = max(self.rss, *(m.get("VmRSS", 0) for m in mems))
                self.anon = max(self.anon, sum(m.get("RssAnon", 0) for m in mems))
                self.pss = max(self.pss, sum(m.get("Pss", 0) for m in mems))
            self.done.wait(self.period)

    def stop(self) -> dict[str, float]:
        self.done.set()
        self.thread.join()
        return {
            "peak_rss_mb": self.rss / 1024,
            "peak_anon_mb": self.anon / 1024,
            "peak_pss_mb": self.pss / 1024,
        }


def run(command: list[str], log: Path, marker: str | None = None) -> dict:
    """Run ``command`` with its output in ``log``; wall time, time to ``marker``'s
    first appearance on its output, and memory peaks."""
    start = time.perf_counter()
    with open(log, "w") as out:
        proc = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        watch = Watch(proc.pid)
        first = None
        for line in proc.stdout:
            out.write(line)
            if marker and first is None and marker in line:
                first = time.perf_counter() - start
        code = proc.wait()
    result = {"seconds": time.perf_counter() - start, **watch.stop()}
    if code != 0:
        raise SystemExit(f"{' '.join(command)} failed ({code}); see {log}")
    if marker:
        result["first_step_s"] = first
    return result


def du_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 1e6


def data_args(corpus: Path, cache: Path, vocab: int) -> list[str]:
    return [
        "data=local",
        f"data.local_dir={corpus}",
        "data.src_lang=en",
        "data.tgt_lang=de",
        f"data.cache_dir={cache}",
        f"tokenizer.vocab_size={vocab}",
    ]


def run_on_cache(code: str, corpus: Path, cache: Path, vocab: int) -> str:
    """Standard output of ``code`` run in a fresh Python process whose arguments are
    the prepare command's overrides for this corpus and cache."""
    out = subprocess.run(
        [sys.executable, "-c", code, *data_args(corpus, cache, vocab)],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout


def hit_seconds(
    corpus: Path, cache: Path, vocab: int, logs: Path, runs: int = 5
) -> dict[str, float]:
    """A cache hit, ``runs`` times in fresh processes (medians): the seconds
    ``seq2seq-prepare`` reports (finding the key, checking and mapping the cache,
    the printed batch statistics) and the whole command's (Python and imports too)."""
    said, whole = [], []
    for k in range(runs):
        result = run(
            ["seq2seq-prepare", *data_args(corpus, cache, vocab)],
            logs / f"hit_{k}.log",
        )
        text = (logs / f"hit_{k}.log").read_text()
        found = re.search(r"loaded from the cache in ([\d.]+) s", text)
        if found is None:
            raise SystemExit(f"no cache hit: see {logs / f'hit_{k}.log'}")
        said.append(float(found.group(1)))
        whole.append(result["seconds"])
    return {"hit_s": statistics.median(said), "hit_command_s": statistics.median(whole)}


def plan_seconds(corpus: Path, cache: Path, vocab: int, batch_tokens: int) -> float:
    """Median wall time of planning one epoch (3 epochs) on the prepared lengths."""
    code = (
        "import sys, time, statistics\n"
        "from hydra import compose, initialize_config_dir\n"
        "from seq2seq.config import CONFIG_DIR, register_configs\n"
        "register_configs()\n"
        "from seq2seq.data.batching import TokenBucketSampler\n"
        "from seq2seq.data.prepare import prepare_data, resolve_cache_root\n"
        "with initialize_config_dir(str(CONFIG_DIR), version_base=None):\n"
        "    cfg = compose('prepare', sys.argv[1:])\n"
        "root = resolve_cache_root(cfg.data.cache_dir)\n"
        "data = prepare_data(cfg.data, cfg.tokenizer, root)\n"
        "assert data.cached\n"
        "train = data.splits['train']\n"
        "times = []\n"
        "for epoch in range(3):\n"
        "    start = time.perf_counter()\n"
        "    sampler = TokenBucketSampler(train.src_lengths(), train.tgt_lengths(),\n"
        f"        {batch_tokens}, seed=1, sort_by='target')\n"
        "    sampler.set_epoch(epoch)\n"
        "    n = len(sampler.epoch_batches())\n"
        "    times.append(time.perf_counter() - start)\n"
        "print(statistics.median(times))\n"
    )
    return float(run_on_cache(code, corpus, cache, vocab).strip().splitlines()[-1])


def data_memory(
    corpus: Path, cache: Path, vocab: int, batch_tokens: int, ranks: int = 1
) -> dict:
    """What the data path itself costs a training process: private memory (RssAnon)
    and mapped-file memory (RssFile) added by mapping the prepared cache, planning an
    epoch and collating 20 batches, after torch is imported (no model). With
    ``ranks`` > 1: the private memory summed over the ranks' processes, each
    planning its own share (``data_anon_mb_ranks``)."""
    if ranks > 1:
        shares = [
            _data_memory(corpus, cache, vocab, batch_tokens, ranks, r)[0]
            for r in range(ranks)
        ]
        return {"data_anon_mb_ranks": sum(shares)}
    anon, mapped = _data_memory(corpus, cache, vocab, batch_tokens, 1, 0)
    return {"data_anon_mb": anon, "data_file_mb": mapped}


def _data_memory(
    corpus: Path, cache: Path, vocab: int, batch_tokens: int, ranks: int, rank: int
) -> tuple[float, float]:
    code = (
        "import re, sys\n"
        "from pathlib import Path\n"
        "def mem():\n"
        "    d = dict(re.findall(r'(\\w+):\\s+(\\d+) kB', "
        "Path('/proc/self/status').read_text()))\n"
        "    return int(d['RssAnon']) / 1024, int(d['RssFile']) / 1024\n"
        "import torch\n"
        "from hydra import compose, initialize_config_dir\n"
        "from seq2seq.config import CONFIG_DIR, register_configs\n"
        "from seq2seq.data.batching import make_loader\n"
        "from seq2seq.data.prepare import prepare_data, resolve_cache_root\n"
        "register_configs()\n"
        "with initialize_config_dir(str(CONFIG_DIR), version_base=None):\n"
        "    cfg = compose('prepare', sys.argv[1:])\n"
        "anon0, file0 = mem()\n"
        "root = resolve_cache_root(cfg.data.cache_dir)\n"
        "data = prepare_data(cfg.data, cfg.tokenizer, root)\n"
        "assert data.cached\n"
        f"loader = make_loader(data.splits['train'], {batch_tokens}, shuffle=True, "
        f"seed=1, sort_by='target', num_replicas={ranks}, rank={rank})\n"
        "batches = iter(loader)\n"
        "for _ in range(20):\n"
        "    next(batches)\n"
        "anon1, file1 = mem()\n"
        "print(anon1 - anon0, file1 - file0)\n"
    )
    anon, mapped = map(float, run_on_cache(code, corpus, cache, vocab).split())
    return anon, mapped


def train_command(corpus, cache, vocab, steps, run_dir, ranks) -> list[str]:
    args = [
        *data_args(corpus, cache, vocab),
        "model=tiny",
        f"trainer.max_steps={steps}",
        "trainer.valid_every=1000000",
        "trainer.valid_max_sentences=100",
        "trainer.device=cpu",
        "trainer.progress=false",
        "evaluate_test=false",
        f"hydra.run.dir={run_dir}",
    ]
    if ranks == 1:
        return ["seq2seq-train", *args]
    return [
        "torchrun",
        "--standalone",
        f"--nproc_per_node={ranks}",
        "--no-python",
        "seq2seq-train",
        "trainer.threads=1",
        *args,
    ]


def measure(size: int, args: argparse.Namespace) -> dict:
    work = Path(args.workdir)
    corpus = work / f"synth_{size}"
    if not (corpus / "test.jsonl").is_file():
        write_corpus(corpus, size)
    cache = work / f"cache_{size}"
    if not (args.keep_cache or args.planning_only or args.hits_only):
        shutil.rmtree(cache, ignore_errors=True)
    logs = work / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    row = {"pairs": size, "corpus_mb": du_mb(corpus)}
    if args.hits_only:  # on the cache a full run left
        row.update(hit_seconds(corpus, cache, args.vocab, logs))
        return row
    if args.planning_only:  # on the cache a full run left
        row["plan_s"] = plan_seconds(corpus, cache, args.vocab, args.batch_tokens)
        row.update(data_memory(corpus, cache, args.vocab, args.batch_tokens))
        row.update(data_memory(corpus, cache, args.vocab, args.batch_tokens, 2))
        return row
    prep = run(
        ["seq2seq-prepare", *data_args(corpus, cache, args.vocab)],
        logs / f"prepare_{size}.log",
    )
    row["prepare"] = prep
    row["cache_mb"] = du_mb(cache)
    row.update(hit_seconds(corpus, cache, args.vocab, logs))
    row["plan_s"] = plan_seconds(corpus, cache, args.vocab, args.batch_tokens)
    row.update(data_memory(corpus, cache, args.vocab, args.batch_tokens))
    row.update(data_memory(corpus, cache, args.vocab, args.batch_tokens, 2))
    for ranks in args.ranks:
        run_dir = work / f"run_{size}_{ranks}"
        shutil.rmtree(run_dir, ignore_errors=True)
        command = train_command(corpus, cache, args.vocab, args.steps, run_dir, ranks)
        row[f"train_{ranks}"] = run(
            command, logs / f"train_{size}_{ranks}.log", FIRST_STEP
        )
    return row


def table(rows: list[dict], ranks: list[int]) -> str:
    head = (
        "| pairs | corpus MB | prepare s | prepare peak RSS MB | cache MB |"
        " cache hit s (command s) | plan s |"
        " data path: private MB, mapped MB, 2 ranks' private MB |"
        + "".join(
            f" {r} rank{'s' if r > 1 else ''}: first step s, peak RSS MB, "
            "private MB, PSS MB |"
            for r in ranks
        )
    )
    lines = [head, "|" + "---|" * (8 + len(ranks))]
    for row in rows:
        cells = [
            f"{row['pairs']:,}",
            f"{row['corpus_mb']:.0f}",
            f"{row['prepare']['seconds']:.0f}",
            f"{row['prepare']['peak_rss_mb']:.0f}",
            f"{row['cache_mb']:.0f}",
            f"{row['hit_s']:.2f} ({row['hit_command_s']:.1f})",
            f"{row['plan_s']:.2f}",
            f"{row['data_anon_mb']:.0f}, {row['data_file_mb']:.0f}, "
            f"{row['data_anon_mb_ranks']:.0f}",
        ]
        for r in ranks:
            t = row[f"train_{r}"]
            cells.append(
                f"{t['first_step_s']:.1f}, {t['peak_rss_mb']:.0f}, "
                f"{t['peak_anon_mb']:.0f}, {t['peak_pss_mb']:.0f}"
            )
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def growth(rows: list[dict]) -> str:
    """Per added pair between the smallest and the largest size."""
    if len(rows) < 2:
        return ""
    a, b = rows[0], rows[-1]
    pairs = b["pairs"] - a["pairs"]
    seconds = (b["prepare"]["seconds"] - a["prepare"]["seconds"]) / pairs * 1e6
    rss = (b["prepare"]["peak_rss_mb"] - a["prepare"]["peak_rss_mb"]) / pairs * 1e6
    cache = (b["cache_mb"] - a["cache_mb"]) / pairs * 1e6
    return (
        f"growth per million pairs ({a['pairs']:,} → {b['pairs']:,}): prepare "
        f"{seconds:.1f} s, prepare peak RSS {rss:.0f} MB, cache {cache:.0f} MB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="500000,1500000,4500000")
    parser.add_argument("--workdir", default="/tmp/seq2seq-scale")
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--ranks", default="1,2")
    parser.add_argument("--batch-tokens", type=int, default=4096)
    parser.add_argument(
        "--keep-cache", action="store_true", help="reuse a prepared cache (for trying)"
    )
    parser.add_argument(
        "--planning-only",
        action="store_true",
        help="only the planning time and the data path's memory, on the caches of "
        "an earlier run",
    )
    parser.add_argument(
        "--hits-only",
        action="store_true",
        help="only the cache hit's time, on the caches of an earlier run",
    )
    parser.add_argument("--json", type=Path, help="also write the raw figures here")
    args = parser.parse_args()
    args.ranks = [int(r) for r in args.ranks.split(",")]
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        rows.append(measure(size, args))
        print(json.dumps(rows[-1]), flush=True)
    if not (args.planning_only or args.hits_only):
        print(table(rows, args.ranks))
        print(growth(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
