"""What the native runtime's pool did, read from Python (the C side is ``runtime.SOURCE``).

``og_pool_counters(long out[15])`` reads counts kept since the library was loaded: jobs
shared out, ``og_parallel`` calls run serially (one block, one thread, or the pool busy), blocks
run by callers, blocks run by the other participants (a worker adds one per block on its
home's cache line, which it writes for every claim anyway, before marking the block finished:
a job's counts are complete when ``og_parallel`` returns), jobs run on a host team,
wake-ups of sleeping workers, host-team jobs that waited for a late team thread, the time
callers waited for blocks in progress and how often they slept doing so, worker joins on
the caller's CPU and the moves off it, hand-overs, and of the wake-ups the paced ones and the
re-wakes, and of the waiting the waits that slept. Tests use them to check that a
kernel really is split between threads, where, and which placement rule acted
(``runtime_counters`` reads them).

``og_set_block_clock(1)`` starts the *block clock* (off by default: two thread CPU clock
reads per block): ``og_block_times(long out[4])`` then sums the CPU time threads spend inside
range functions, callers' and the other participants' apart (``block_times``). A
measurement compares those sums on one and on two threads: a thread that runs its share of the
work slower beside another (shared caches, memory) shows there, time spent in the pool
(claiming, spinning, waiting) does not.
"""

import ctypes
from typing import NamedTuple


class PoolCounters(NamedTuple):
    """``og_pool_counters``: counts since the runtime library was loaded."""

    jobs: int  #: jobs shared out
    serial: int  #: og_parallel calls run serially (one block, one thread, or the pool busy)
    caller_blocks: int  #: blocks run by callers
    worker_blocks: int  #: blocks run by the other participants (pool workers or a host team)
    team_jobs: int  #: of the jobs shared out, those run on a host OpenMP team (og_set_team)
    wakes: int  #: futex wake-ups of sleeping workers (og_wake_if_worth)
    team_late: int  #: host-team jobs whose closing barrier waited for a late thread
    wait_ticks: int  #: TSC ticks callers waited for blocks in progress (2.6 GHz here)
    wait_sleeps: int  #: caller waits that slept on the futex
    colocated: int  #: worker joins on the caller's CPU
    moves: int  #: workers that moved off the caller's CPU (joined there, or handed it)
    handoffs: int  #: workers a waiting caller moved onto its own CPU (og_hand_over)
    paced_wakes: int  #: of the wake-ups, those made when a job was published for its pace
    rewakes: int  #: of the wake-ups, those for jobs not worth one (none for ~1 ms, calm)
    sleep_ticks: int  #: of wait_ticks, those of the waits that slept (their whole length)


def runtime_counters(library: ctypes.CDLL) -> PoolCounters:
    """``og_pool_counters`` of a loaded runtime library (``Toolchain.runtime()``)."""
    out = (ctypes.c_long * len(PoolCounters._fields))()
    library.og_pool_counters(out)
    return PoolCounters(*out)


class BlockTimes(NamedTuple):
    """``og_block_times``: the block clock's sums since the library was loaded."""

    caller_ns: int  #: CPU time callers spent in range functions (serial runs included)
    caller_runs: int  #: caller runs timed (blocks, and serial og_parallel calls)
    other_ns: int  #: CPU time the other participants spent in range functions
    other_runs: int  #: their blocks timed


def block_times(library: ctypes.CDLL) -> BlockTimes:
    """``og_block_times`` of a loaded runtime library; zeros unless ``og_set_block_clock(1)``
    was called before the jobs (``library.og_set_block_clock.argtypes = [ctypes.c_long]``)."""
    out = (ctypes.c_long * len(BlockTimes._fields))()
    library.og_block_times(out)
    return BlockTimes(*out)
