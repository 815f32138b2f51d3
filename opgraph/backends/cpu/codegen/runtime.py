"""The native runtime every generated module links against: a work-claiming thread pool.

``og_parallel(fn, T, A, total, grain, threads)`` runs ``fn(T, A, begin, end)`` over blocks
of ``[0, total)``. No block belongs to a thread: every participant (the caller is one) claims
blocks one at a time with a compare-and-swap, so work that a descheduled thread has not
started is done by whoever is running, and the caller waits only for blocks that are being
computed at that moment (a block in progress cannot be taken over: it is writing its part of
the result). That wait spins for about two of the caller's blocks, yields the core for as long
again (a preempted worker queued on it runs), then sleeps on a futex: a block that takes that
much longer than the caller's own is held by a descheduled worker, and a sleeping caller
leaves its core idle, so the scheduler can move that worker (or whatever preempted it) onto it
at once, where yielding would keep the core busy until the worker's turn comes on its own
(on a shared machine, a scheduler slice of milliseconds).

* **Blocks and homes.** The range is cut into up to 64 blocks per thread (each at least
  ``grain`` long). Participant ``p`` has a *home*: the ``p``-th contiguous run of blocks. It
  claims from its home first (the same thread touches the same data from call to call: a
  GEMV's weight columns stay in its L2), then from the other homes in turn. Each home is one
  64-bit word ``generation << 32 | next << 16 | end`` on its own cache line, so a claim is one
  CAS on a line the claimer usually owns, and a late worker can never claim a block of a newer
  job (the generation would not match).
* **Participants.** A woken worker joins the job with a CAS on ``generation | joined | limit``,
  which gives it its participant index (``og_worker_index()``, always below the job's thread
  count: kernels index per-thread scratch with it). A worker that never joins costs nothing.
* **Idle workers** spin for the next job a few times as long as the last job took (40 to 200
  us: consecutive steps follow each other closely and a futex wake-up costs tens of
  microseconds), then sleep on a futex. The job's length runs from its publication, not
  from the worker's join (2026-11-26, H89): a worker that joined late ran a small share, a
  patience from that share put it to sleep before the next job, where it joined late
  again. (Up to 1 ms before 2026-11-26: beside other processes, a worker spinning while the
  caller was descheduled burnt 0.9 ms of CPU per 3.4 ms MLP call, taken from the caller's
  own share of the machine.) A spinner that notices it
  was preempted (a gap in its clock) sleeps at once: another thread wants that core, perhaps
  the caller.
* **Waking sleepers.** Publishing a job wakes nobody: spinning workers see it at once, and the
  caller wakes sleeping ones after its first block only when the blocks left would take it
  longer than a wake-up (about 50 µs at its first block's pace; ``og_set_wake_worth``). A job
  of fewer than 4 blocks per thread (a BLAS product split once per thread: the caller's first
  block is its whole share) wakes them when it is published, as every job did before. A
  worker woken for less arrives when the caller has finished and costs it a system call: the
  W3 MLP batch 1 (two jobs of 8 blocks per 35 µs call) had its worker run 3 of 16 blocks
  while burning 17-31 µs of CPU per call on a loaded machine. Two exceptions (2026-11-26,
  H68): a job whose range function's last run says its blocks are worth a wake-up wakes
  sleepers when it is published (``og_pace``: each function's ticks per unit of range at
  the caller's first block; the W3 MLP batch 256's products are 8 blocks of 160-240 µs, and
  a worker asleep when one was published joined after the caller's first block, which then
  ran 5 of the 8); and a job not worth one still wakes them when none was woken for ~1 ms
  and no spinning worker found itself descheduled in the last ~10 ms (a *re-wake*,
  ``og_set_rewake``): a worker put to sleep once would otherwise never come back for a
  stream of small jobs that it joins while spinning.
* **Where workers run.** A worker that joins a job on the CPU the caller published it from
  narrows its affinity to the CPUs it was created with, less that one (``og_move_off``;
  again at every join, so it follows a caller that moves): the two would share one core
  while another process has the other, and once there nothing moves the worker off (W2 on
  2 cores beside one busy loop: one core's worth for caller and worker together, no faster
  than one thread; Linux may wake a thread on its waker's CPU when none is idle, and its
  load balancer leaves a 2:1 placement of three threads on two cores alone). And a caller
  whose wait outlasts its spin and yield moves the workers holding unfinished blocks onto
  its own CPU before it sleeps there (``og_hand_over``): they are descheduled behind another
  process, and the CPU the caller leaves idle is where they run at once (the scheduler does
  not move a task that ran a moment ago). Such a worker moves back off that CPU as soon
  as its blocks are done, then sleeps. ``og_set_placement`` switches either rule
  off (measurements compare them). A worker never runs outside the mask it was created with.
* A caller that finds the pool busy (another Python thread is running a job) runs its range
  serially.
* **A host's OpenMP team.** ``og_set_team(GOMP_parallel)`` (``backends/cpu/host_team.py``,
  when a frontend declares its framework's libgomp: ``opgraph.runtime.host_threads``) makes
  later jobs run on that OpenMP team instead of the pool's workers: the same homes and
  claims, the caller participant 0 and the team's other threads joining as workers do; the
  team's closing barrier is the wait. Two pools that both spin for work take the cores from
  each other on a machine with few cores; one team used in turn does not. But that barrier
  waits for every team thread, so a descheduled one delays the caller: when it held the
  caller longer than the job's own work (and over ~100 µs), the next 64 jobs run on the own
  workers (other processes want the cores, and there the own pool measured faster).

``og_pool_counters`` and the *block clock* (``og_set_block_clock``, ``og_block_times``) count
what the pool did; ``runtime_counters.py`` documents them and reads them from Python.

Test builds (``-DOG_TEST_HOOKS``, never the library the backend loads) add
``og_test_stall(point, usec)``: the next pool worker that reaches ``point`` (1: joined, before
its first claim; 2: holding a claimed block, before running it; 3: after its first block)
stops there for ``usec`` microseconds, or until ``og_test_release()`` when ``usec < 0``.
"""

SOURCE = r"""
#define _GNU_SOURCE
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

typedef int (*og_range_fn)(void* const*, char*, long, long);

#define OG_MAX_THREADS 64
#define OG_BLOCKS_PER_THREAD 64
#define OG_MAX_BLOCKS 4096  /* block indices fit the 16-bit fields of a claim word */

/* A claim word: generation << 32 | next << 16 | end. */
#define OG_WORD(gen, next, end) \
  ((uint64_t)(gen) << 32 | (uint64_t)(next) << 16 | (uint64_t)(end))
#define OG_GEN(w) ((uint32_t)((w) >> 32))
#define OG_NEXT(w) ((long)((w) >> 16 & 0xffff))
#define OG_END(w) ((long)((w) & 0xffff))

/* ``ran``: blocks run by the workers that were this participant (og_pool_counters); on the
   line its owner already writes for every claim, so counting costs no extra traffic. */
/* ``holder``: while participant p runs a block, 1 + the pool slot of its worker (og_hand_over);
   ``handed``: 1 + the CPU the waiting caller moved that worker onto (og_hand_over). */
typedef struct {
  _Alignas(64) _Atomic uint64_t word;
  _Atomic long ran;
  _Atomic int holder, handed;
} og_home;

typedef struct {
  /* Written by the caller before it publishes the job; read by a worker only after it has
     claimed a block (the job cannot change while one of its blocks is unfinished). */
  og_range_fn fn;
  void* const* T;
  char* A;
  long total, chunk, nblocks;
  uint32_t gen;  /* the job's generation (read by a host team's threads, og_team_body) */
  uint64_t caller_done;  /* on a host team: when the caller ran out of blocks to claim */
  int woken;  /* the caller woke sleeping workers for this job when it published it */
  int caller_cpu;  /* where the caller published the job (sched_getcpu) */
  uint64_t published;  /* when the caller published it (og_ticks): a worker's patience */
  _Alignas(64) _Atomic uint64_t joined;   /* generation | participants | limit */
  _Alignas(64) _Atomic uint32_t finished; /* blocks done: the waiting caller's futex word */
  _Atomic int waiting;
  _Atomic int err;
  og_home home[OG_MAX_THREADS];
} og_job;

static og_job og_the_job;
static _Atomic uint32_t og_generation;  /* the workers' futex word */
static uint32_t og_last_gen;             /* the last job's generation (written under og_busy) */
static _Atomic int og_sleepers;
static _Atomic int og_busy;
static int og_workers;
static pthread_mutex_t og_grow = PTHREAD_MUTEX_INITIALIZER;

static __thread int og_self;  /* participant index in the running job: 0 for callers */
static __thread int og_slot = -1;  /* this pool worker's slot in og_info (-1: not a worker) */

/* The pool's workers: thread id and the CPU mask each had when it was created (its home
   mask; og_move_off and og_hand_over only ever narrow it to a subset). */
typedef struct { _Atomic int tid; cpu_set_t mask; uint32_t start; } og_thread_info;
static og_thread_info og_info[OG_MAX_THREADS];
static __thread int og_calling;  /* this thread called og_parallel and runs a host team */

/* The host's OpenMP team (og_set_team): libgomp's GOMP_parallel(fn, data, threads, flags),
   or 0 for the pool's own workers. */
typedef void (*og_team_fn)(void (*)(void*), void*, unsigned, unsigned);
static og_team_fn og_team;
static _Atomic int og_team_rest;  /* jobs for the own workers after a late team (og_run_on_team) */
#define OG_TEAM_LATE 250000ull  /* about 100 microseconds of closing barrier: a late thread */
#define OG_TEAM_REST 64

/* Counters since the library was loaded (og_pool_counters; the workers' blocks are counted
   in their homes). Tests read them to check that a product really is split between threads
   and which scheduling rule acted. */
enum {
  OG_N_JOBS, OG_N_SERIAL, OG_N_CALLER_BLOCKS, OG_N_TEAM_JOBS, OG_N_WAKES, OG_N_TEAM_LATE,
  OG_N_WAIT_TICKS, OG_N_WAIT_SLEEPS, OG_N_COLOCATED, OG_N_MOVES, OG_N_HANDOFFS, OG_N_PACED_WAKES,
  OG_N_REWAKES, OG_N_SLEEP_TICKS, OG_N_COUNTERS
};
static _Atomic long og_counters[OG_N_COUNTERS];
static void og_count(int which, long n) {
  __atomic_fetch_add(&og_counters[which], n, __ATOMIC_RELAXED);
}

/* The block clock (og_set_block_clock; off by default: two thread CPU clock reads per run):
   CPU time spent inside range functions, callers' and other participants' apart, and the
   runs timed (a serial og_parallel is one caller run). See the module docstring. */
static _Atomic int og_clock_on;
static _Atomic long og_clock[4];

void og_set_block_clock(long on) { __atomic_store_n(&og_clock_on, on != 0, __ATOMIC_RELAXED); }

/* out[0..3] = callers' CPU nanoseconds in range functions, their runs timed; the same for
   the other participants (pool workers or a host team's threads). */
void og_block_times(long* out) {
  for (int i = 0; i < 4; ++i) out[i] = __atomic_load_n(&og_clock[i], __ATOMIC_RELAXED);
}

static long og_thread_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (long)t.tv_sec * 1000000000L + t.tv_nsec;
}

/* fn over [lo, hi), on the block clock when it is on (``other``: not a caller); not again
   inside a timed run (a nested og_parallel, run serially). */
static __thread int og_timing;
static int og_run_range(og_range_fn fn, void* const* T, char* A, long lo, long hi, int other) {
  if (og_timing || !__atomic_load_n(&og_clock_on, __ATOMIC_RELAXED)) return fn(T, A, lo, hi);
  long t0 = og_thread_ns();
  og_timing = 1;
  int r = fn(T, A, lo, hi);
  og_timing = 0;
  __atomic_fetch_add(&og_clock[2 * other], og_thread_ns() - t0, __ATOMIC_RELAXED);
  __atomic_fetch_add(&og_clock[2 * other + 1], 1, __ATOMIC_RELAXED);
  return r;
}

/* Where workers run (og_set_placement): bit 0, a worker that joins a job on the caller's CPU
   moves off it (og_move_off); bit 1, a caller whose wait outlasts its spin moves the workers
   holding unfinished blocks onto its own CPU before it sleeps (og_hand_over). */
#define OG_PLACE_APART 1
#define OG_PLACE_HAND_OVER 2
static _Atomic int og_placement = OG_PLACE_APART | OG_PLACE_HAND_OVER;

/* Set the placement rules (bits as above; a negative value restores the default, both):
   measurements compare them. */
void og_set_placement(long rules) {
  __atomic_store_n(&og_placement, rules < 0 ? OG_PLACE_APART | OG_PLACE_HAND_OVER : (int)rules,
                   __ATOMIC_RELAXED);
}

#if defined(__x86_64__) || defined(__i386__)
static void og_relax(void) { __builtin_ia32_pause(); }
static uint64_t og_ticks(void) { return __builtin_ia32_rdtsc(); }
#else
static void og_relax(void) {}
static uint64_t og_ticks(void) {  /* nanoseconds: about the same scale as x86 TSC ticks */
  struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}
#endif

#define OG_MIN_SPIN 100000ull    /* TSC ticks: about 40 microseconds */
#define OG_MAX_SPIN 500000ull    /* about 200 microseconds */
#define OG_MIN_WAIT 25000ull     /* about 10 microseconds */
#define OG_MAX_WAIT 500000ull    /* about 200 microseconds */
#define OG_PREEMPTED 50000ull    /* a gap this long in a spin loop: the thread was descheduled */
#define OG_WAKE_WORTH 125000ull  /* about 50 microseconds: work left that pays a futex wake-up */
#define OG_COARSE_BLOCKS 4       /* fewer blocks per thread: sleeping workers are woken at once */
static _Atomic uint64_t og_wake_worth = OG_WAKE_WORTH;

/* A caller whose jobs are each too small to pay a wake-up still wakes sleeping workers when
   none was woken for about 1 ms (og_wake_if_worth): a worker put to sleep once (preempted
   for a moment, or idle between bursts) would otherwise never come back for a stream of
   small jobs that it would join while spinning (the W3 MLP batch 1: two jobs of ~16 µs per
   call). Only on a calm machine: when no spinning worker of the pool found itself
   descheduled in the last ~10 ms (og_preempted_at). Beside other processes a woken worker is
   soon preempted holding a block the caller then waits for (branch h66-rewake, load 4-6:
   two threads 1.04-1.20x the one-thread time ungated, against 0.92-1.00x without re-wakes). */
#define OG_REWAKE 2500000ull
#define OG_CALM 25000000ull
static _Atomic uint64_t og_rewake_every = OG_REWAKE, og_calm_for = OG_CALM;
static _Atomic uint64_t og_last_wake, og_preempted_at;

/* Which of the wake-up rules of 2026-11-26 (H68) act (og_set_wake_rules): bit 0, a job worth a
   wake-up by its function's last pace wakes sleepers when published (og_paced_worth); bit 1,
   re-wakes for small jobs (og_wake_if_worth). */
#define OG_WAKE_PACED 1
#define OG_WAKE_REWAKE 2
static _Atomic int og_wake_rules = OG_WAKE_PACED | OG_WAKE_REWAKE;

/* Set the wake-up rules (bits as above; a negative value restores the default, both):
   measurements compare them. */
void og_set_wake_rules(long rules) {
  __atomic_store_n(&og_wake_rules, rules < 0 ? OG_WAKE_PACED | OG_WAKE_REWAKE : (int)rules,
                   __ATOMIC_RELAXED);
}

/* Set how often (TSC ticks) a caller wakes sleeping workers for jobs not worth a wake-up,
   and for how long after a spinning worker found itself descheduled it does not; negative
   values restore the defaults (tests and measurements set them). */
void og_set_rewake(long every, long calm) {
  __atomic_store_n(&og_rewake_every, every < 0 ? OG_REWAKE : (uint64_t)every, __ATOMIC_RELAXED);
  __atomic_store_n(&og_calm_for, calm < 0 ? OG_CALM : (uint64_t)calm, __ATOMIC_RELAXED);
}

/* The pace of each range function's last job (og_pace): TSC ticks per unit of range of the
   caller's first block, times 256, keyed by the function's address. Written only by callers
   holding og_busy. A job whose function's last pace says its blocks are worth a wake-up
   wakes sleeping workers when it is published instead of after the caller's first block:
   the W3 MLP batch 256's products are 8 blocks of 160-240 µs, and a worker asleep when one
   was published joined only after the caller's first block, so the caller ran 5 of the 8. */
#define OG_PACES 64
typedef struct { og_range_fn fn; uint64_t unit_ticks; } og_pace_entry;
static og_pace_entry og_paces[OG_PACES];
static og_pace_entry* og_pace(og_range_fn fn) {
  return &og_paces[((uintptr_t)fn >> 4) % OG_PACES];
}

/* Set the work left (TSC ticks at the caller's pace) for which a caller wakes sleeping
   workers; 0 wakes them for every job (measurements compare the two). */
void og_set_wake_worth(long ticks) {
  __atomic_store_n(&og_wake_worth, (uint64_t)(ticks < 0 ? 0 : ticks), __ATOMIC_RELAXED);
}

static void og_futex_wait(_Atomic uint32_t* word, uint32_t value) {
  syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, value, 0, 0, 0);
}

static void og_futex_wake(_Atomic uint32_t* word, int count) {
  syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, count, 0, 0, 0);
}

#ifdef OG_TEST_HOOKS
static _Atomic int og_test_point, og_test_stalled_count, og_test_released;
static _Atomic long og_test_usec;
static _Atomic uint64_t og_test_patience;  /* the spin a worker chose after its last job */

void og_test_stall(int point, long usec) {
  __atomic_store_n(&og_test_usec, usec, __ATOMIC_SEQ_CST);
  __atomic_store_n(&og_test_released, 0, __ATOMIC_SEQ_CST);
  __atomic_store_n(&og_test_point, point, __ATOMIC_SEQ_CST);
}
void og_test_release(void) { __atomic_store_n(&og_test_released, 1, __ATOMIC_SEQ_CST); }
int og_test_stalled(void) { return __atomic_load_n(&og_test_stalled_count, __ATOMIC_SEQ_CST); }

static void og_test_hook(int point) {
  int armed = point;
  if (og_self == 0 || !__atomic_compare_exchange_n(&og_test_point, &armed, 0, 0,
                                                   __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
    return;  /* callers never stall; a stall is armed for one worker */
  __atomic_fetch_add(&og_test_stalled_count, 1, __ATOMIC_SEQ_CST);
  long usec = __atomic_load_n(&og_test_usec, __ATOMIC_SEQ_CST);
  struct timespec ms = {0, 1000000};
  if (usec < 0) {
    while (!__atomic_load_n(&og_test_released, __ATOMIC_SEQ_CST)) nanosleep(&ms, 0);
  } else {
    struct timespec t = {usec / 1000000, usec % 1000000 * 1000};
    nanosleep(&t, 0);
  }
  __atomic_fetch_sub(&og_test_stalled_count, 1, __ATOMIC_SEQ_CST);
}
#define OG_HOOK(point) og_test_hook(point)
#else
#define OG_HOOK(point) ((void)0)
#endif

/* out[0..14] = jobs shared out, calls of og_parallel run serially, blocks run by callers,
   blocks run by the other participants (pool workers or a host team's threads), of the jobs
   shared out those run on a host team, futex wake-ups of sleeping workers, host-team jobs
   whose closing barrier waited for a late thread, TSC ticks callers waited for blocks in
   progress, of those waits the ones that slept, worker joins on the caller's CPU, moves
   of workers off the caller's CPU, workers a waiting caller moved onto its CPU, and of the
   wake-ups those made when a job was published because its function's last pace was worth
   one (og_paced_worth) and those made for jobs not worth one (re-wakes, og_wake_if_worth; a
   job's counts are complete when its og_parallel returns), and of the ticks callers waited
   those of the waits that slept (their whole length, spin and yield included). */
void og_pool_counters(long* out) {
  for (int i = 0; i < 3; ++i) out[i] = __atomic_load_n(&og_counters[i], __ATOMIC_RELAXED);
  out[3] = 0;
  for (int p = 1; p < OG_MAX_THREADS; ++p)
    out[3] += __atomic_load_n(&og_the_job.home[p].ran, __ATOMIC_RELAXED);
  for (int i = 3; i < OG_N_COUNTERS; ++i)
    out[i + 1] = __atomic_load_n(&og_counters[i], __ATOMIC_RELAXED);
}

/* Narrow pool worker ``slot`` to the CPUs of its home mask for which ``keep(cpu, arg)``
   holds (the worker itself, or a caller handing its CPU over); 1 when the mask changed. */
static int og_narrow(int slot, int (*keep)(int, int), int arg) {
  int tid = __atomic_load_n(&og_info[slot].tid, __ATOMIC_ACQUIRE);  /* then its mask is set */
  if (!tid) return 0;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &og_info[slot].mask) && keep(cpu, arg)) CPU_SET(cpu, &set);
  return CPU_COUNT(&set) && !sched_setaffinity(tid, sizeof set, &set);
}
static int og_other_cpu(int cpu, int avoid) { return cpu != avoid; }
static int og_same_cpu(int cpu, int want) { return cpu == want; }

/* A worker that joined a job on the caller's CPU: the two would share one core while another
   may have none of theirs (on a 2-core machine beside a busy process: one core for the job
   instead of one and a half). Move off it, to the rest of this worker's home mask; the rule
   applies again at every join, so the worker follows a caller that moves, and when a
   worker handed the caller's CPU (og_hand_over) has finished its blocks. */
static void og_move_off(int cpu) {
  if (__atomic_load_n(&og_placement, __ATOMIC_RELAXED) & OG_PLACE_APART &&
      og_narrow(og_slot, og_other_cpu, cpu))
    og_count(OG_N_MOVES, 1);
}

/* The caller's wait outlasted its spin: the workers still holding blocks of this job are
   descheduled (they share a core with another process, the caller's being its own). Move
   them onto the caller's CPU, which the caller is about to leave idle by sleeping: they run
   there at once instead of after the other process's slice. Each moves back off that CPU
   as soon as its blocks are done (og_move_off), and sleeps. */
static void og_hand_over(og_job* job, int homes) {
  if (!(__atomic_load_n(&og_placement, __ATOMIC_RELAXED) & OG_PLACE_HAND_OVER)) return;
  int cpu = sched_getcpu();
  for (int p = 1; p < homes && cpu >= 0; ++p) {
    int holder = __atomic_load_n(&job->home[p].holder, __ATOMIC_ACQUIRE);
    if (!holder) continue;
    __atomic_store_n(&job->home[p].handed, cpu + 1, __ATOMIC_RELEASE);
    if (og_narrow(holder - 1, og_same_cpu, cpu)) og_count(OG_N_HANDOFFS, 1);
  }
}

/* Run the blocks of later jobs on a host's OpenMP team: ``gomp_parallel`` is the address of
   GOMP_parallel in the libgomp already loaded in the process (0: back to the own workers). */
void og_set_team(void* gomp_parallel) {
  og_team_rest = 0;
  __atomic_store_n(&og_team, (og_team_fn)gomp_parallel, __ATOMIC_RELEASE);
}

/* Whether jobs run on a host team (og_set_team). */
int og_team_set(void) { return __atomic_load_n(&og_team, __ATOMIC_ACQUIRE) != 0; }

/* The calling thread's participant index in the running job (< the job's thread count):
   kernels use it to pick their private slice of a scratch buffer. */
int og_worker_index(void) { return og_self; }

/* Take the next block of one home (-1 when it has none left for this generation). */
static long og_claim_from(og_home* home, uint32_t gen) {
  uint64_t w = __atomic_load_n(&home->word, __ATOMIC_ACQUIRE);
  while (OG_GEN(w) == gen && OG_NEXT(w) < OG_END(w))
    if (__atomic_compare_exchange_n(&home->word, &w, w + (1ull << 16), 1, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE))
      return OG_NEXT(w);
  return -1;
}

/* This participant's home first, then the others in turn: no block waits for its owner. */
static long og_claim(og_job* job, uint32_t gen, int self, int homes) {
  for (int i = 0; i < homes; ++i) {
    long block = og_claim_from(&job->home[(self + i) % homes], gen);
    if (block >= 0) return block;
  }
  return -1;
}

static void og_wake_if_worth(og_job* job, uint32_t gen, int homes, uint64_t block_ticks);

/* Run blocks until none is left to claim; returns how many this thread ran. The caller
   (``self`` 0, not on a host team) wakes sleeping workers after its first block only when
   the blocks left are worth a wake-up (og_wake_if_worth). */
static long og_work(og_job* job, uint32_t gen, int self, int homes) {
  long ran = 0;
  uint64_t started = self || og_calling ? 0 : og_ticks();
  for (long block; (block = og_claim(job, gen, self, homes)) >= 0; ++ran) {
    if (started && ran == 1) og_wake_if_worth(job, gen, homes, og_ticks() - started);
    if (self && og_slot >= 0)
      __atomic_store_n(&job->home[self].holder, og_slot + 1, __ATOMIC_RELEASE);
    OG_HOOK(2);
    /* The job is fixed while this block is unfinished: read it now, not after. */
    long lo = block * job->chunk, hi = lo + job->chunk, nblocks = job->nblocks;
    if (hi > job->total) hi = job->total;
    int r = og_run_range(job->fn, job->T, job->A, lo, hi, self != 0);
    if (self) __atomic_store_n(&job->home[self].holder, 0, __ATOMIC_RELEASE);
    if (r) __atomic_fetch_or(&job->err, r, __ATOMIC_RELAXED);
    /* counted before the block is marked finished: complete when og_parallel returns */
    if (self) __atomic_fetch_add(&job->home[self].ran, 1, __ATOMIC_RELAXED);
    uint32_t done = __atomic_add_fetch(&job->finished, 1, __ATOMIC_SEQ_CST);
    if (done == (uint32_t)nblocks && __atomic_load_n(&job->waiting, __ATOMIC_SEQ_CST))
      og_futex_wake(&job->finished, 1);
    OG_HOOK(3);
  }
  return ran;
}

/* Join generation ``gen``: this thread's participant index, or -1 (another job, or full). */
static int og_join(og_job* job, uint32_t gen, int* homes) {
  uint64_t w = __atomic_load_n(&job->joined, __ATOMIC_ACQUIRE);
  while (OG_GEN(w) == gen && OG_NEXT(w) < OG_END(w)) {
    if (__atomic_compare_exchange_n(&job->joined, &w, w + (1ull << 16), 1, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE)) {
      *homes = (int)OG_END(w);
      return (int)OG_NEXT(w);
    }
  }
  return -1;
}

/* Spin while the generation is ``seen`` (at most ``*patience`` ticks, less once preempted),
   then sleep on the futex; returns the new generation. */
static uint32_t og_await(uint32_t seen, uint64_t* patience) {
  for (;;) {
    uint64_t t0 = og_ticks(), last = t0;
    for (;;) {
      uint32_t gen = __atomic_load_n(&og_generation, __ATOMIC_ACQUIRE);
      if (gen != seen) return gen;
      uint64_t t = og_ticks();
      if (t - last > OG_PREEMPTED) {  /* core contended */
        *patience = OG_MIN_SPIN;
        __atomic_store_n(&og_preempted_at, t, __ATOMIC_RELAXED);
        break;
      }
      if (t - t0 > *patience) break;
      last = t;
      og_relax();
    }
    __atomic_fetch_add(&og_sleepers, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&og_generation, __ATOMIC_SEQ_CST) == seen)
      og_futex_wait(&og_generation, seen);
    __atomic_fetch_sub(&og_sleepers, 1, __ATOMIC_SEQ_CST);
  }
}

static void* og_worker(void* slot) {
  og_slot = (int)(uintptr_t)slot;
  og_thread_info* info = &og_info[og_slot];
  uint32_t seen = info->start;  /* the generation before this thread existed */
  if (pthread_getaffinity_np(pthread_self(), sizeof info->mask, &info->mask)) CPU_ZERO(&info->mask);
  __atomic_store_n(&info->tid, (int)syscall(SYS_gettid), __ATOMIC_RELEASE);
  uint64_t patience = OG_MIN_SPIN;
  for (;;) {
    uint32_t gen = seen = og_await(seen, &patience);
    int homes, self = og_join(&og_the_job, gen, &homes);
    if (self < 0) continue;
    og_home* home = &og_the_job.home[self];
    uint64_t published = og_the_job.published;  /* this job's, or (rarely) a later one's */
    __atomic_store_n(&home->handed, 0, __ATOMIC_RELAXED);
    OG_HOOK(1);
    og_self = self;
    int cpu = sched_getcpu();
    if (cpu >= 0 && cpu == og_the_job.caller_cpu) {
      og_count(OG_N_COLOCATED, 1);
      og_move_off(cpu);
    }
    og_work(&og_the_job, gen, self, homes);
    /* the job's length as the caller saw it (from its publication), not this worker's share
       of it: a worker that joined late ran little, and a patience from its share would put
       it to sleep before the next job, where it joins late again (2026-11-26, H89) */
    uint64_t took = og_ticks() - published;
    patience = 4 * took;
    if (patience < OG_MIN_SPIN) patience = OG_MIN_SPIN;
    if (patience > OG_MAX_SPIN) patience = OG_MAX_SPIN;
    /* handed onto the caller's CPU, which the caller wants back now: off it, then sleep */
    int handed = __atomic_exchange_n(&home->handed, 0, __ATOMIC_ACQ_REL);
    if (handed) {
      og_move_off(handed - 1);
      patience = 0;
    }
#ifdef OG_TEST_HOOKS
    __atomic_store_n(&og_test_patience, patience, __ATOMIC_SEQ_CST);
#endif
  }
  return 0;
}

/* One host team thread's part of a job: the caller is participant 0 (its home first), the
   team's other threads join as the pool's workers do. The team's closing barrier is the wait:
   a thread finishes the blocks it claimed before it reaches it. */
static void og_team_body(void* data) {
  og_job* job = data;
  int homes = (int)OG_END(__atomic_load_n(&job->joined, __ATOMIC_ACQUIRE)), self = 0;
  if (!og_calling && (self = og_join(job, job->gen, &homes)) < 0) return;
  int outer = og_self;
  og_self = self;
  long ran = og_work(job, job->gen, self, homes);
  og_self = outer;
  if (og_calling) {
    job->caller_done = og_ticks();
    og_count(OG_N_CALLER_BLOCKS, ran);
  }
}

static void og_ensure_workers(int wanted, uint32_t gen) {
  if (wanted > OG_MAX_THREADS - 1) wanted = OG_MAX_THREADS - 1;
  if (__atomic_load_n(&og_workers, __ATOMIC_ACQUIRE) >= wanted) return;
  pthread_mutex_lock(&og_grow);
  while (og_workers < wanted) {
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    og_info[og_workers].start = gen;
    int failed = pthread_create(&t, &attr, og_worker, (void*)(uintptr_t)og_workers);
    pthread_attr_destroy(&attr);
    if (failed) break;  /* fewer workers: the caller does their blocks */
    __atomic_store_n(&og_workers, og_workers + 1, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&og_grow);
}

/* Wait for the blocks other threads are running. Spin about as long as two of the caller's
   own blocks took; then yield the core as long again (a preempted worker queued on it runs);
   then sleep: the worker is descheduled, and an idle core is where the scheduler puts it
   (module docstring). */
static void og_wait_done(og_job* job, uint32_t nblocks, int homes, uint64_t spin) {
  uint64_t t0 = og_ticks();
  while (__atomic_load_n(&job->finished, __ATOMIC_ACQUIRE) != nblocks) {
    uint64_t waited = og_ticks() - t0;
    if (waited > 2 * spin) {
      __atomic_store_n(&job->waiting, 1, __ATOMIC_SEQ_CST);
      og_count(OG_N_WAIT_SLEEPS, 1);
      og_hand_over(job, homes);
      for (uint32_t f; (f = __atomic_load_n(&job->finished, __ATOMIC_SEQ_CST)) != nblocks;)
        og_futex_wait(&job->finished, f);
      og_count(OG_N_SLEEP_TICKS, (long)(og_ticks() - t0));
      break;
    }
    if (waited > spin) sched_yield(); else og_relax();
  }
  og_count(OG_N_WAIT_TICKS, (long)(og_ticks() - t0));
}

/* Set up generation ``gen``: participant p's home is the p-th run of blocks. */
static void og_homes(og_job* job, uint32_t gen, int threads) {
  job->gen = gen;
  for (int p = 0; p < threads; ++p)
    __atomic_store_n(&job->home[p].word,
                     OG_WORD(gen, job->nblocks * p / threads, job->nblocks * (p + 1) / threads),
                     __ATOMIC_RELEASE);
  __atomic_store_n(&job->joined, OG_WORD(gen, 1, threads), __ATOMIC_RELEASE);  /* caller: 0 */
}

/* Wake up to ``count`` sleeping workers for the job just published. */
static void og_wake_workers(int count) {
  __atomic_store_n(&og_last_wake, og_ticks(), __ATOMIC_RELAXED);
  og_count(OG_N_WAKES, 1);
  og_futex_wake(&og_generation, count);
}

/* Whether the units of ``job`` after the caller's first block are worth a wake-up at the pace
   its function ran last time (og_pace; 0 when that is not known). */
static int og_paced_worth(const og_job* job) {
  const og_pace_entry* pace = og_pace(job->fn);
  if (!(__atomic_load_n(&og_wake_rules, __ATOMIC_RELAXED) & OG_WAKE_PACED)) return 0;
  if (pace->fn != job->fn || !pace->unit_ticks) return 0;
  uint64_t left = (uint64_t)(job->total - job->chunk);
  uint64_t worth = __atomic_load_n(&og_wake_worth, __ATOMIC_RELAXED);
  if (left > UINT64_MAX / pace->unit_ticks) return 1;
  return (left * pace->unit_ticks >> 8) >= worth;
}

/* Publish generation ``gen`` to the pool's workers: spinning ones join at once; sleeping ones
   are woken by the caller after its first block, if at all (og_wake_if_worth), except for a
   job of a few large blocks (a BLAS product split once per thread), where the caller's first
   block is a whole share, and a job whose function's last pace says it is worth a wake-up
   (og_paced_worth): those wake now. */
static void og_publish(og_job* job, uint32_t gen, int threads) {
  job->caller_cpu = sched_getcpu();
  job->woken = 0;
  job->published = og_ticks();
  og_homes(job, gen, threads);
  __atomic_store_n(&og_generation, gen, __ATOMIC_SEQ_CST);
  if (!__atomic_load_n(&og_sleepers, __ATOMIC_SEQ_CST)) return;
  int coarse = job->nblocks < OG_COARSE_BLOCKS * threads;
  if (coarse || og_paced_worth(job)) {
    job->woken = 1;
    if (!coarse) og_count(OG_N_PACED_WAKES, 1);
    og_wake_workers(threads - 1);
  }
}

/* Wake sleeping workers when the blocks of generation ``gen`` not claimed yet would take the
   caller (at its first block's pace) longer than a wake-up: a worker woken for less arrives
   when the caller has finished, and its wake-up costs the caller a system call. A job left
   to the caller is still claimable by any worker that wakes or spins meanwhile; and when
   no worker was woken for og_rewake_every on a calm machine, the caller wakes them even for
   such a job (a re-wake: the worker, once up, spins into the next jobs). Also records the
   pace of the job's function (og_pace). */
static void og_wake_if_worth(og_job* job, uint32_t gen, int homes, uint64_t block_ticks) {
  long units = job->chunk < job->total ? job->chunk : job->total;
  og_pace_entry* pace = og_pace(job->fn);
  pace->fn = job->fn;
  pace->unit_ticks = (block_ticks << 8) / (uint64_t)units;
  if (job->woken || !__atomic_load_n(&og_sleepers, __ATOMIC_SEQ_CST)) return;
  long left = 0;
  for (int p = 0; p < homes; ++p) {
    uint64_t w = __atomic_load_n(&job->home[p].word, __ATOMIC_ACQUIRE);
    if (OG_GEN(w) == gen && OG_NEXT(w) < OG_END(w)) left += OG_END(w) - OG_NEXT(w);
  }
  if (!left) return;
  if ((uint64_t)left * block_ticks >= __atomic_load_n(&og_wake_worth, __ATOMIC_RELAXED)) {
    og_wake_workers(homes - 1);
    return;
  }
  uint64_t now = og_ticks();
  if (__atomic_load_n(&og_wake_rules, __ATOMIC_RELAXED) & OG_WAKE_REWAKE &&
      now - __atomic_load_n(&og_last_wake, __ATOMIC_RELAXED) >=
          __atomic_load_n(&og_rewake_every, __ATOMIC_RELAXED) &&
      now - __atomic_load_n(&og_preempted_at, __ATOMIC_RELAXED) >=
          __atomic_load_n(&og_calm_for, __ATOMIC_RELAXED)) {
    og_count(OG_N_REWAKES, 1);
    og_wake_workers(homes - 1);
  }
}

/* Run a set-up job on the host's team (og_set_team); returns its error. */
static int og_run_on_team(og_team_fn team, og_job* job, uint32_t gen, int threads) {
  og_count(OG_N_TEAM_JOBS, 1);
  og_homes(job, gen, threads);
  og_calling = 1;
  uint64_t started = og_ticks();
  job->caller_done = started;
  team(og_team_body, job, (unsigned)threads, 0);
  og_calling = 0;
  /* The closing barrier waits for every team thread, run or not: one that held the caller
     there for longer than the job's own work was descheduled (other processes want the
     cores), and then the own pool, which never waits for a thread that has not joined, runs
     the next OG_TEAM_REST jobs. */
  uint64_t barrier = og_ticks() - job->caller_done, work = job->caller_done - started;
  if (barrier > OG_TEAM_LATE && barrier > work) {
    og_team_rest = OG_TEAM_REST;
    og_count(OG_N_TEAM_LATE, 1);
  }
  int err = __atomic_load_n(&job->err, __ATOMIC_RELAXED);
  __atomic_store_n(&og_busy, 0, __ATOMIC_RELEASE);
  return err;
}

int og_parallel(og_range_fn fn, void* const* T, char* A, long total, long grain, int threads) {
  if (total <= 0) return 0;
  if (grain < 1) grain = 1;
  if (threads > OG_MAX_THREADS) threads = OG_MAX_THREADS;
  long nblocks = (total + grain - 1) / grain, most = (long)OG_BLOCKS_PER_THREAD * threads;
  if (most > OG_MAX_BLOCKS) most = OG_MAX_BLOCKS;
  if (nblocks > most) nblocks = most;
  if (threads <= 1 || nblocks <= 1 || __atomic_exchange_n(&og_busy, 1, __ATOMIC_ACQUIRE)) {
    og_count(OG_N_SERIAL, 1);
    return og_run_range(fn, T, A, 0, total, 0);
  }
  og_count(OG_N_JOBS, 1);
  long chunk = (total + nblocks - 1) / nblocks;
  if (chunk % 16 && chunk > 16) chunk += 16 - chunk % 16;  /* whole vectors per block */
  nblocks = (total + chunk - 1) / chunk;
  if (threads > nblocks) threads = (int)nblocks;
  /* a new generation for every job, host team or own workers: no late thread of an earlier
     job can claim a block of this one */
  uint32_t gen = ++og_last_gen;
  og_job* job = &og_the_job;
  job->fn = fn; job->T = T; job->A = A;
  job->total = total; job->chunk = chunk; job->nblocks = nblocks;
  __atomic_store_n(&job->finished, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&job->waiting, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&job->err, 0, __ATOMIC_RELAXED);
  og_team_fn team = __atomic_load_n(&og_team, __ATOMIC_ACQUIRE);
  if (team && !og_team_rest) return og_run_on_team(team, job, gen, threads);
  if (team) --og_team_rest;
  og_ensure_workers(threads - 1, __atomic_load_n(&og_generation, __ATOMIC_RELAXED));
  og_publish(job, gen, threads);
  uint64_t started = og_ticks();
  long ran = og_work(job, gen, 0, threads);
  og_count(OG_N_CALLER_BLOCKS, ran);
  uint64_t spin = ran ? 2 * (og_ticks() - started) / ran : OG_MAX_WAIT;
  if (spin < OG_MIN_WAIT) spin = OG_MIN_WAIT;
  if (spin > OG_MAX_WAIT) spin = OG_MAX_WAIT;
  og_wait_done(job, (uint32_t)nblocks, threads, spin);
  int err = __atomic_load_n(&job->err, __ATOMIC_RELAXED);
  __atomic_store_n(&og_busy, 0, __ATOMIC_RELEASE);
  return err;
}
"""


#: The declaration generated modules use.
DECLARATION = (
    "typedef int (*og_range_fn)(void* const*, char*, long, long);\n"
    "extern int og_parallel(og_range_fn, void* const*, char*, long, long, int);\n"
    "extern int og_worker_index(void);"
)
