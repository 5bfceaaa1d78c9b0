/* See floor.h. The accept loop, one upstream connect per client, two detached threads
 * per connection; the last of the two to finish closes both sockets. Nothing here is
 * tuned: the point of a floor is that it does the least a user-space forwarder can do. */
#define _GNU_SOURCE
#include "floor.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

struct conn {
    int client, upstream;
    atomic_int threads_left;
    floor_pump pump;
};

struct direction {
    struct conn* conn;
    int from, to;
};

static void* run_direction(void* arg) {
    struct direction* d = arg;
    struct conn* c = d->conn;
    if (c->pump(d->from, d->to) == 0) {
        shutdown(d->to, SHUT_WR); /* pass the half-close on; the other way may go on */
    } else {
        /* An error: end both ways, so the other thread's blocking call returns too. */
        shutdown(d->from, SHUT_RDWR);
        shutdown(d->to, SHUT_RDWR);
    }
    free(d);
    if (atomic_fetch_sub(&c->threads_left, 1) == 1) {
        close(c->client);
        close(c->upstream);
        free(c);
    }
    return NULL;
}

static struct sockaddr_in loopback(int port) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
}

static void start_direction(struct conn* c, int from, int to) {
    struct direction* d = malloc(sizeof *d);
    pthread_t t;
    pthread_attr_t attr;
    d->conn = c, d->from = from, d->to = to;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &attr, run_direction, d) != 0) {
        abort(); /* a benchmark peer that cannot make threads is broken, not slow */
    }
    pthread_attr_destroy(&attr);
}

int floor_main(int argc, char** argv, floor_pump pump) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s LISTEN_PORT UPSTREAM_PORT (both on 127.0.0.1)\n", argv[0]);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN); /* a write to a closed peer is an EPIPE error, not death */
    struct sockaddr_in listen_at = loopback(atoi(argv[1])), upstream = loopback(atoi(argv[2]));
    int one = 1, l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(l, (struct sockaddr*)&listen_at, sizeof listen_at) != 0 || listen(l, 4096) != 0) {
        perror("listen");
        return 1;
    }
    for (;;) {
        int client = accept4(l, NULL, NULL, SOCK_CLOEXEC);
        /* ECONNABORTED: that client gave up. EMFILE: bench/compare raises the limit. */
        if (client < 0) {
            continue;
        }
        int up = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (up < 0 || connect(up, (struct sockaddr*)&upstream, sizeof upstream) != 0) {
            close(client);
            if (up >= 0) {
                close(up);
            }
            continue;
        }
        /* As HAProxy and uring-fwd do: small request/response rounds are not held back
         * by Nagle's algorithm waiting for a delayed ACK. */
        setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        setsockopt(up, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        struct conn* c = malloc(sizeof *c);
        c->client = client, c->upstream = up, c->pump = pump;
        atomic_init(&c->threads_left, 2);
        start_direction(c, client, up);
        start_direction(c, up, client);
    }
}
