// An upstream that says who it is: on every connection it sends its one-byte name, then
// echoes until the client ends. Routing tests read the name to see which pool member a
// connection reached.
#pragma once

#include "tests/support/connection_server.hpp"
#include "tests/support/deadline.hpp"
#include "tests/support/sockets.hpp"
#include "tests/support/unique_fd.hpp"

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace uringfwd::test {

class NamedServer {
public:
    // Listens on `where` (default 127.0.0.1, any port).
    explicit NamedServer(char name, const std::optional<Endpoint>& where = std::nullopt);
    const Endpoint& endpoint() const { return server_.endpoint(); }
    char name() const { return name_; }
    uint64_t accepted() const { return server_.accepted(); }
    uint64_t open_connections() const { return open_->load(); }

private:
    char name_;
    std::shared_ptr<std::atomic<uint64_t>> open_ = std::make_shared<std::atomic<uint64_t>>(0);
    ConnectionServer server_;
};

// Connects to `to` (from `source`, an IPv4 address such as "127.0.3.7", when given)
// and reads the upstream's name; nullopt if the connection failed or ended first.
// The connection is handed back in `keep` when given, else closed.
std::optional<char> name_through(const Endpoint& to, const Deadline& deadline,
                                 const std::string& source = {}, UniqueFd* keep = nullptr);

} // namespace uringfwd::test
