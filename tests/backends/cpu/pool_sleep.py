"""Waiting until the pool's workers are asleep, for the tests that count wake-ups.

``og_sleepers`` counts a worker from just before its futex wait until just after it returns,
so a worker woken by the previous job but not yet given a core still counts as asleep; the
next job then finds it awake and needs no wake-up. ``PROBE`` (appended to every hooked
runtime by ``conftest.hooked_runtime``) also asks the kernel: each counted worker must be in
state ``S`` (in its futex wait), not ``R`` (woken and waiting to run)."""

import ctypes
import time

import pytest

PROBE = r"""
#include <stdio.h>
#include <string.h>
/* 1 when every worker of the pool sleeps in its futex wait (counted in og_sleepers and in
   state S in /proc), 0 otherwise. */
int og_test_workers_asleep(void) {
  int workers = __atomic_load_n(&og_workers, __ATOMIC_ACQUIRE);
  if (__atomic_load_n(&og_sleepers, __ATOMIC_SEQ_CST) < workers) return 0;
  for (int slot = 0; slot < workers; ++slot) {
    char path[64], stat[512];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat",
             __atomic_load_n(&og_info[slot].tid, __ATOMIC_ACQUIRE));
    FILE* file = fopen(path, "r");
    if (!file) return 0;
    size_t got = fread(stat, 1, sizeof stat - 1, file);
    fclose(file);
    stat[got] = 0;
    const char* name_end = strrchr(stat, ')');  /* the state follows the thread's name */
    if (!name_end || strncmp(name_end, ") S", 3)) return 0;
  }
  return 1;
}
"""


def wait_asleep(pool: ctypes.CDLL) -> None:
    """Return once every worker of ``pool`` sleeps in its futex wait (at most 10 s)."""
    for _ in range(10_000):
        if pool.og_test_workers_asleep():
            return
        time.sleep(0.001)
    pytest.fail("the pool's workers never went to sleep")
