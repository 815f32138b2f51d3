"""The native runtime every generated module links against: a work-claiming thread pool.

``og_parallel(fn, T, A, total, grain, threads)`` runs ``fn(T, A, begin, end)`` over chunks
of ``[0, total)``. The caller publishes the job and claims chunks itself; pool threads that
are awake claim the rest. The caller waits only for chunks that were claimed, never for a
thread that has not started, so a descheduled worker (a loaded machine, oversubscription)
costs nothing: the caller does its share. OpenMP's fork/join barrier waits for every thread
of the team, which under load turns a 0.3 ms kernel into 20 ms. Workers spin briefly
waiting for the next job, then sleep on a futex. A caller that finds the pool busy (another
Python thread is running a job) runs its range serially.

Chunks are claimed with one compare-and-swap on ``(generation << 32) | claimed-chunk mask``,
so a worker that wakes late can never claim a chunk of a newer job by mistake. Each
participant prefers its own chunks (its index modulo the thread count), so the same thread
touches the same data from call to call (a GEMV's weight columns stay in its L2).
"""

SOURCE = r"""
#define _GNU_SOURCE
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef int (*og_range_fn)(void* const*, char*, long, long);

typedef struct {
  og_range_fn fn;
  void* const* T;
  char* A;
  long total, chunk, nchunks;
  int threads;  /* participants 0 .. threads-1: the caller is 0 */
  _Atomic uint64_t state;   /* generation << 32 | bit mask of claimed chunks (32 at most) */
  _Atomic long done;
  _Atomic int err;
} og_job;

#define OG_SLOTS 64
#define OG_MAX_THREADS 64
static og_job og_ring[OG_SLOTS];
static _Atomic uint32_t og_generation;  /* also the futex word */
static _Atomic int og_sleepers;
static _Atomic int og_busy;
static int og_workers;
static pthread_mutex_t og_grow = PTHREAD_MUTEX_INITIALIZER;

static __thread int og_self;  /* this thread's participant index: 0 for callers */

#if defined(__x86_64__) || defined(__i386__)
static void og_relax(void) { __builtin_ia32_pause(); }
static uint64_t og_ticks(void) { return __builtin_ia32_rdtsc(); }
#else
#include <time.h>
static void og_relax(void) {}
static uint64_t og_ticks(void) {  /* nanoseconds: about the same scale as x86 TSC ticks */
  struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}
#endif

/* The calling thread's participant index in the running job (< the job's thread count):
   kernels use it to pick their private slice of a scratch buffer. */
int og_worker_index(void) { return og_self; }

/* Claim a chunk: this participant's own chunks first (p, p + threads, ...), so that a thread
   works on the same data call after call (cache affinity), then any free one. */
static long og_claim(og_job* job, uint32_t gen) {
  for (;;) {
    uint64_t s = __atomic_load_n(&job->state, __ATOMIC_ACQUIRE);
    if ((uint32_t)(s >> 32) != gen) return -1;
    uint32_t taken = (uint32_t)s;
    long pick = -1;
    for (long c = og_self; c < job->nchunks; c += job->threads)
      if (!(taken >> c & 1u)) { pick = c; break; }
    for (long c = 0; pick < 0 && c < job->nchunks; ++c)
      if (!(taken >> c & 1u)) pick = c;
    if (pick < 0) return -1;
    if (__atomic_compare_exchange_n(&job->state, &s, s | (1ull << pick), 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE))
      return pick;
  }
}

static void og_work(og_job* job, uint32_t gen) {
  for (long next; (next = og_claim(job, gen)) >= 0;) {
    long b = next * job->chunk, e = b + job->chunk;
    if (e > job->total) e = job->total;
    int r = job->fn(job->T, job->A, b, e);
    if (r) __atomic_fetch_or(&job->err, r, __ATOMIC_RELAXED);
    __atomic_fetch_add(&job->done, 1, __ATOMIC_RELEASE);
  }
}

#define OG_MIN_SPIN 100000ull   /* TSC ticks: about 40 microseconds */
#define OG_MAX_SPIN 2500000ull  /* about a millisecond */

static void* og_worker(void* index) {
  og_self = (int)(long)index;
  uint64_t patience = OG_MIN_SPIN;
  uint32_t seen = __atomic_load_n(&og_generation, __ATOMIC_ACQUIRE);
  for (;;) {
    uint32_t gen = __atomic_load_n(&og_generation, __ATOMIC_ACQUIRE);
    /* Spin for the next job before sleeping: steps follow each other closely, and the
       caller may still be finishing its share of this job, so spin a few times as long as
       the last job took here (within bounds): a futex wake-up costs tens of microseconds. */
    uint64_t t0 = og_ticks();
    while (gen == seen && og_ticks() - t0 < patience) {
      og_relax();
      gen = __atomic_load_n(&og_generation, __ATOMIC_ACQUIRE);
    }
    if (gen == seen) {
      __atomic_fetch_add(&og_sleepers, 1, __ATOMIC_SEQ_CST);
      gen = __atomic_load_n(&og_generation, __ATOMIC_SEQ_CST);
      if (gen == seen) syscall(SYS_futex, &og_generation, FUTEX_WAIT_PRIVATE, seen, 0, 0, 0);
      __atomic_fetch_sub(&og_sleepers, 1, __ATOMIC_SEQ_CST);
      continue;
    }
    seen = gen;
    og_job* job = &og_ring[gen % OG_SLOTS];
    uint64_t started = og_ticks();
    if (og_self < job->threads) og_work(job, gen);  /* a stale read only skips a job */
    uint64_t took = og_ticks() - started;
    patience = 4 * took;
    if (patience < OG_MIN_SPIN) patience = OG_MIN_SPIN;
    if (patience > OG_MAX_SPIN) patience = OG_MAX_SPIN;
  }
  return 0;
}

static void og_ensure_workers(int wanted) {
  if (wanted > OG_MAX_THREADS) wanted = OG_MAX_THREADS;
  if (__atomic_load_n(&og_workers, __ATOMIC_ACQUIRE) >= wanted) return;
  pthread_mutex_lock(&og_grow);
  while (og_workers < wanted) {
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &attr, og_worker, (void*)(long)(og_workers + 1)) != 0) {
      pthread_attr_destroy(&attr);
      break;
    }
    pthread_attr_destroy(&attr);
    __atomic_store_n(&og_workers, og_workers + 1, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&og_grow);
}

int og_parallel(og_range_fn fn, void* const* T, char* A, long total, long grain, int threads) {
  if (total <= 0) return 0;
  if (grain < 1) grain = 1;
  long nchunks = (total + grain - 1) / grain;
  long most = 4L * threads;
  if (most > 32) most = 32;
  if (nchunks > most) nchunks = most;
  if (threads <= 1 || nchunks <= 1 || __atomic_exchange_n(&og_busy, 1, __ATOMIC_ACQUIRE))
    return fn(T, A, 0, total);
  og_ensure_workers(threads - 1);
  long chunk = (total + nchunks - 1) / nchunks;
  if (chunk % 16 && chunk > 16) chunk += 16 - chunk % 16;  /* whole vectors per chunk */
  nchunks = (total + chunk - 1) / chunk;
  uint32_t gen = __atomic_load_n(&og_generation, __ATOMIC_RELAXED) + 1;
  og_job* job = &og_ring[gen % OG_SLOTS];
  job->fn = fn; job->T = T; job->A = A;
  job->total = total; job->chunk = chunk; job->nchunks = nchunks; job->threads = threads;
  __atomic_store_n(&job->done, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&job->err, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&job->state, (uint64_t)gen << 32, __ATOMIC_RELEASE);
  __atomic_store_n(&og_generation, gen, __ATOMIC_SEQ_CST);
  if (__atomic_load_n(&og_sleepers, __ATOMIC_SEQ_CST))
    syscall(SYS_futex, &og_generation, FUTEX_WAKE_PRIVATE, threads - 1, 0, 0, 0);
  og_work(job, gen);
  for (long spin = 0; __atomic_load_n(&job->done, __ATOMIC_ACQUIRE) < nchunks; ++spin) {
    if (spin < 4096) og_relax(); else sched_yield();  /* a claimed chunk's thread was preempted */
  }
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
