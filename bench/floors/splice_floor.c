/* The blocking splice floor (bench/compare peer floor-splice): each direction is a thread
 * blocked in splice() from its socket into a 1 MiB pipe, then from the pipe into the
 * other socket; the arriving data wakes it directly, with no event loop in between. One
 * call takes whatever the socket has, up to the pipe's size (the 2009 netdev thread "tcp:
 * splice as many packets as possible at once" is why the count of calls and wake-ups,
 * not the bytes, sets the cost). */
#define _GNU_SOURCE
#include "floor.h"

#include <fcntl.h>
#include <unistd.h>

enum { PIPE_BYTES = 1 << 20 };

static int pump(int from, int to) {
    int p[2], result = -1;
    if (pipe2(p, O_CLOEXEC) != 0) {
        return -1;
    }
    /* Best effort: above /proc/sys/fs/pipe-max-size only root may go (fcntl(2)). */
    fcntl(p[1], F_SETPIPE_SZ, PIPE_BYTES);
    for (;;) {
        ssize_t n = splice(from, NULL, p[1], NULL, PIPE_BYTES, SPLICE_F_MOVE);
        if (n <= 0) {
            result = n == 0 ? 0 : -1;
            break;
        }
        while (n > 0) {
            ssize_t m = splice(p[0], NULL, to, NULL, (size_t)n, SPLICE_F_MOVE);
            if (m <= 0) {
                goto out;
            }
            n -= m;
        }
    }
out:
    close(p[0]);
    close(p[1]);
    return result;
}

int main(int argc, char** argv) {
    return floor_main(argc, argv, pump);
}
