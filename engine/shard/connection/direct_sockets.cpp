// A connection's sockets in slots of the shard's registered file table (direct
// descriptors, docs/kernel.md §11): the upstream socket created through the ring,
// options set through it, and slots closed through it (the upstream socket's creation
// completes in UpstreamConnector::on_socket()). A slot is no fd: nothing here
// may call a socket syscall on it.
#include "shard/connection/direct_sockets.hpp"
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

void no_delay(ShardIo& io, Connection& conn, const ConnSocket& socket) {
    if (!socket.fixed()) {
        set_no_delay(socket.fd());
        return;
    }
    // Ahead of any data in submission order, and a setsockopt runs inline when
    // submitted (io_uring/cmd_net.c: no -EAGAIN path), so no byte leaves unflagged.
    io.setsockopt(conn.in_flight, conn.tag(Op::SocketOpt), socket.ref(), IPPROTO_TCP, TCP_NODELAY,
                  &kOne, sizeof(kOne));
    ++conn.socket_ops;
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

void close_slot(ShardIo& io, Connection& conn, ConnSocket& socket, bool reset) {
    int slot = socket.release_slot();
    io.close_direct(conn.in_flight, conn.tag(Op::CloseFile), uring::FileRef::direct(slot), reset);
    conn.socket_ops += reset ? 2 : 1;
    drop(io.counters().direct_slots);
}

bool Connections::close_slots(Connection& conn, bool reset) {
    bool any = false;
    for (ConnSocket* socket : {&conn.client, &conn.upstream}) {
        if (socket->fixed()) {
            close_slot(shard_.io, conn, *socket, reset);
            any = true;
        }
    }
    return any;
}

} // namespace uringfwd::engine
