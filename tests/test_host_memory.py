"""What a training step frees stays for the next (``runtime.keep_freed_memory``)."""

from __future__ import annotations

import platform
import subprocess
import sys
import textwrap

import pytest

from seq2seq.training import runtime

# Allocates 192 MB in 8 MB blocks, writes them and frees them, five times, and prints
# the page faults of the last three: memory kept by the heap is reused without a fault.
# Blocks from malloc itself (torch's CPU tensors come from it too): no small
# allocation of Python's lands between them to change what the heap can trim.
STEPS = textwrap.dedent(
    """
    import ctypes, resource, sys
    from seq2seq.training.runtime import keep_freed_memory
    if sys.argv[1] == "keep":
        assert keep_freed_memory()
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    block = 8 * 2**20
    def step():
        blocks = [libc.malloc(block) for _ in range(24)]
        for b in blocks:
            ctypes.memset(b, 1, block)
        for b in blocks:
            libc.free(b)
    step(); step()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    step(); step(); step()
    print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    """
)


def _faults(mode: str) -> int:
    env = {"PATH": "/usr/bin:/bin"}  # none of the user's MALLOC_* variables
    out = subprocess.run(
        [sys.executable, "-c", STEPS, mode],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=120,
    )
    return int(out.stdout.split()[-1])


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's malloc only")
def test_freed_memory_is_reused_without_page_faults():
    # glibc's default hands the 192 MB back at every step and faults it in again
    # at the next, 4 KB a fault: 49,000 a step
    assert _faults("default") > 100_000
    assert _faults("keep") < 1_000


def test_the_users_malloc_settings_hold(monkeypatch):
    calls = []
    for name in (*runtime.MALLOC_VARIABLES, "GLIBC_TUNABLES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(platform, "libc_ver", lambda: ("glibc", "2.36"))
    monkeypatch.setattr(
        runtime.ctypes, "CDLL", lambda name: type("C", (), {"mallopt": calls.append})
    )
    for name, value in (
        ("MALLOC_TRIM_THRESHOLD_", "0"),
        ("MALLOC_MMAP_THRESHOLD_", "131072"),
        ("GLIBC_TUNABLES", "glibc.malloc.trim_threshold=0"),
    ):
        with monkeypatch.context() as env:
            env.setenv(name, value)
            assert runtime.keep_freed_memory() is False
    assert calls == []


def test_nothing_is_set_outside_glibc(monkeypatch):
    monkeypatch.setattr(platform, "libc_ver", lambda: ("", ""))
    assert runtime.keep_freed_memory() is False
