// A connection's sockets in slots of the shard's registered file table (direct
// descriptors, docs/kernel.md §11): the upstream socket created through the ring,
// options set through it, and slots closed through it. A slot is no fd: nothing here
// may call a socket syscall on it.
#include "net/sockets.hpp"
#include "shard/connection/connections.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace uringfwd::engine {

namespace {
// Read by the kernel when the setsockopt runs, which may be after this call returns:
// a constant, never a local.
const int kOne = 1;

std::string suppressed(uint64_t count) {
    return suppressed_note(count);
}
} // namespace

void Connections::no_delay(Connection& conn, const ConnSocket& socket) {
    if (!socket.fixed()) {
        set_no_delay(socket.fd());
        return;
    }
    // Ahead of any data in submission order, and a setsockopt runs inline when
    // submitted (io_uring/cmd_net.c: no -EAGAIN path), so no byte leaves unflagged.
    shard_.io.setsockopt(conn.in_flight, conn.tag(Op::SocketOpt), socket.ref(), IPPROTO_TCP,
                         TCP_NODELAY, &kOne, sizeof(kOne));
    ++conn.socket_ops;
}

void Connections::on_socket(Connection& conn, int result) {
    if (result >= 0) {
        conn.upstream.set_slot(result);
        bump(shard_.io.counters().direct_slots);
        if (conn.phase != Phase::Closing) // else finalize() closes the slot
            start_connect(conn);
        return;
    }
    if (conn.phase == Phase::Closing)
        return;
    bump(shard_.io.counters().upstream_failures);
    if (result == -ENFILE) {
        table_full("upstream socket");
    } else if (upstream_failure_log_.allow(LogThrottle::Clock::now())) {
        shard_.log.warn("cannot open a socket to upstream {} ({}); resetting client {}{}",
                        conn.attempt.connect_name, std::strerror(-result), client_name(conn),
                        suppressed(upstream_failure_log_.suppressed()));
    }
    conn.record.close_error = result;
    close(conn, CloseReason::LocalError);
}

void Connections::on_half_close(Connection& conn, Side side, int result) {
    if (result >= 0) {
        ::shutdown(result, SHUT_WR);
        ::close(result);
        return;
    }
    // No fd to be had (EMFILE): through the ring then, on an io-wq worker.
    Direction& dir = conn.dir(side);
    if (dir.dst.fixed && conn.phase != Phase::Closing) {
        shard_.io.shutdown(conn.in_flight, conn.tag(Op::SocketOpt, side), dir.dst, SHUT_WR);
        ++conn.socket_ops;
    }
}

void Connections::table_full(const char* what) {
    bump(shard_.io.counters().direct_table_full);
    if (table_full_log_.allow(LogThrottle::Clock::now()))
        shard_.log.warn("{}: the shard's registered file table is full ({} slots, "
                        "[engine] direct_table_size); resetting the client, the others are "
                        "served{}",
                        what, shard_.io.ring().file_table_slots(),
                        suppressed(table_full_log_.suppressed()));
}

void Connections::close_slot(Connection& conn, ConnSocket& socket, bool reset) {
    int slot = socket.release_slot();
    shard_.io.close_direct(conn.in_flight, conn.tag(Op::CloseFile), uring::FileRef::direct(slot),
                           reset);
    conn.socket_ops += reset ? 2 : 1;
    drop(shard_.io.counters().direct_slots);
}

bool Connections::close_slots(Connection& conn, bool reset) {
    bool any = false;
    for (ConnSocket* socket : {&conn.client, &conn.upstream}) {
        if (socket->fixed()) {
            close_slot(conn, *socket, reset);
            any = true;
        }
    }
    return any;
}

} // namespace uringfwd::engine
