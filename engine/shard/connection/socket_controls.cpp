// Socket controls on a connection's sockets (socket_controls.hpp), and the life cycle's
// part: the client's socket after its accept, a refused option logged.
#include "shard/connection/socket_controls.hpp"

#include "net/sockets.hpp"
#include "shard/connection/connections.hpp"
#include "shard/inspect/client_addresses.hpp"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

namespace uringfwd::engine {

OptionFailure set_options(ShardIo& io, Connection& conn, const ConnSocket& socket, Side side,
                          const std::vector<SocketOption>& options) {
    OptionFailure first;
    for (const SocketOption& option : options) {
        if (socket.fixed()) {
            io.setsockopt(conn.in_flight, conn.tag(Op::SocketControl, side), socket.ref(),
                          option.level, option.name, &option.value, sizeof(option.value));
            ++conn.socket_ops;
        } else if (::setsockopt(socket.fd(), option.level, option.name, &option.value,
                                sizeof(option.value)) != 0 &&
                   first.option == nullptr) {
            first = {&option, errno};
        }
    }
    return first;
}

void Connections::set_client_controls(Connection& conn) {
    const FamilyOptions& options = conn.route->route.client_options;
    if (options.inet4.empty()) // the same for both families: nothing asked
        return;
    // Only TCP sockets take them: a route may listen on a Unix path too.
    const int family = socket_local_of(conn).family();
    OptionFailure failed =
        set_options(shard_.io, conn, conn.client, Side::ToUpstream, options.of(family));
    if (failed.option != nullptr)
        socket_control_failed(conn, Side::ToUpstream, failed.option->what, failed.error);
}

void Connections::socket_control_failed(Connection& conn, Side side, std::string_view what,
                                        int error) {
    if (!socket_control_log_.allow(LogThrottle::Clock::now()))
        return;
    shard_.log.warn("route \"{}\": cannot set {} on the {} socket of client {} ({}); it goes "
                    "on without{}",
                    conn.route->route.name, what,
                    side == Side::ToUpstream ? "client's" : "upstream", client_name(conn),
                    std::strerror(error), suppressed_note(socket_control_log_.suppressed()));
}

} // namespace uringfwd::engine
