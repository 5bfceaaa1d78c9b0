/* The blocking copy floor (bench/compare peer floor-copy): each direction is a thread
 * blocked in read() of up to 256 KiB from its socket, then write() of all of it to the
 * other socket. Two copies per byte, but one call each way takes whatever has arrived. */
#include "floor.h"

#include <stdlib.h>
#include <unistd.h>

enum { BUFFER_BYTES = 256 << 10 };

static int pump(int from, int to) {
    char* buf = malloc(BUFFER_BYTES);
    int result = -1;
    if (buf == NULL) {
        return -1;
    }
    for (;;) {
        ssize_t n = read(from, buf, BUFFER_BYTES);
        if (n <= 0) {
            result = n == 0 ? 0 : -1;
            break;
        }
        for (ssize_t off = 0; off < n;) {
            ssize_t m = write(to, buf + off, (size_t)(n - off));
            if (m <= 0) {
                goto out;
            }
            off += m;
        }
    }
out:
    free(buf);
    return result;
}

int main(int argc, char** argv) {
    return floor_main(argc, argv, pump);
}
