/*
 * clockshift: an LD_PRELOAD shim that shifts the wall clock of one process.
 *
 * The fault suite compiles it with `gcc -shared -fPIC` and starts a redis-server with
 * LD_PRELOAD pointing at it, so that the node's clock can jump while the node runs. Redis
 * computes key expiry from the wall clock (gettimeofday), so a forward jump makes keys
 * expire early; the suite checks that with PTTL and EXISTS before it relies on it.
 *
 * The shift, in nanoseconds, is the first 8 bytes (a native-endian int64) of the file named by
 * REDLEASE_CLOCK_SHIFT_FILE, mapped shared: the suite changes it with one 8-byte write and
 * the process sees the jump at its next clock read. Without the variable (or the file) the
 * clock is not shifted.
 *
 * Only the wall clock is shifted (CLOCK_REALTIME and its coarse variant, gettimeofday,
 * time): a real clock jump (an NTP step, an operator's `date -s`) moves the wall clock, never
 * CLOCK_MONOTONIC.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static const volatile int64_t *shift_ns;
static int (*real_clock_gettime)(clockid_t, struct timespec *);

__attribute__((constructor)) static void clockshift_init(void) {
    const char *path = getenv("REDLEASE_CLOCK_SHIFT_FILE");
    if (path == NULL) {
        return;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return;
    }
    void *p = mmap(NULL, sizeof(int64_t), PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (p != MAP_FAILED) {
        shift_ns = p;
    }
}

static int64_t current_shift(void) {
    return shift_ns == NULL ? 0 : __atomic_load_n(shift_ns, __ATOMIC_RELAXED);
}

/* The real clock: libc's (through the vDSO) once resolved, the system call before that. */
static int read_clock(clockid_t id, struct timespec *ts) {
    if (real_clock_gettime == NULL) {
        real_clock_gettime = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "clock_gettime");
    }
    if (real_clock_gettime == NULL) {
        return (int)syscall(SYS_clock_gettime, id, ts);
    }
    return real_clock_gettime(id, ts);
}

static void add_ns(struct timespec *ts, int64_t ns) {
    int64_t total = (int64_t)ts->tv_nsec + ns % 1000000000;
    ts->tv_sec += (time_t)(ns / 1000000000 + total / 1000000000);
    total %= 1000000000;
    if (total < 0) {
        total += 1000000000;
        ts->tv_sec -= 1;
    }
    ts->tv_nsec = (long)total;
}

static int shifted_realtime(struct timespec *ts) {
    int rc = read_clock(CLOCK_REALTIME, ts);
    if (rc == 0) {
        add_ns(ts, current_shift());
    }
    return rc;
}

/* Exported under the libc names; the C names differ so that the prototypes in the system
 * headers (which vary between glibc versions) do not clash with these definitions. */
int clockshift_clock_gettime(clockid_t id, struct timespec *ts) __asm__("clock_gettime");
int clockshift_gettimeofday(struct timeval *tv, void *tz) __asm__("gettimeofday");
time_t clockshift_time(time_t *out) __asm__("time");

int clockshift_clock_gettime(clockid_t id, struct timespec *ts) {
    int rc = read_clock(id, ts);
    if (rc == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE)) {
        add_ns(ts, current_shift());
    }
    return rc;
}

int clockshift_gettimeofday(struct timeval *tv, void *tz) {
    (void)tz;
    if (tv == NULL) {
        return 0;
    }
    struct timespec ts;
    int rc = shifted_realtime(&ts);
    if (rc == 0) {
        tv->tv_sec = ts.tv_sec;
        tv->tv_usec = (suseconds_t)(ts.tv_nsec / 1000);
    }
    return rc;
}

time_t clockshift_time(time_t *out) {
    struct timespec ts;
    if (shifted_realtime(&ts) != 0) {
        return (time_t)-1;
    }
    if (out != NULL) {
        *out = ts.tv_sec;
    }
    return ts.tv_sec;
}
