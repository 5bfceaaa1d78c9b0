/* The shared half of bench/compare's two floor forwarders (splice_floor.c, copy_floor.c):
 * listen on 127.0.0.1, and for each client connect the upstream on 127.0.0.1 and run
 * two threads, one per direction, each blocked in the program's own pump(). Only the
 * pump differs between the two floors. */
#ifndef FLOOR_H
#define FLOOR_H

/* Moves bytes from `from` to `to` until end of file or an error, blocking in the kernel.
 * Returns 0 on end of file from `from`, -1 on an error either side. */
typedef int (*floor_pump)(int from, int to);

/* usage: NAME LISTEN_PORT UPSTREAM_PORT. Serves until killed; returns 2 on bad usage,
 * 1 when it cannot listen. */
int floor_main(int argc, char** argv, floor_pump pump);

#endif
