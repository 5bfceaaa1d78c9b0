#include "tests/support/named_server.hpp"
#include "tests/support/pool_members.hpp"

#include "tests/support/socket_io.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cstring>

namespace uringfwd::test {

NamedServer::NamedServer(char name, const std::optional<Endpoint>& where)
    : name_(name),
      server_(
          where ? listen_on(*where) : listen_loopback(Family::Inet4),
          [name, open = open_](UniqueFd conn, int cancel_fd) {
              ++*open;
              const Deadline deadline{std::chrono::milliseconds{60000}};
              if (send_text(conn.get(), std::string(1, name), deadline).status == IoStatus::Ok) {
                  // Echo until the client ends or the server stops.
                  std::array<char, 4096> buf{};
                  for (;;) {
                      pollfd fds[2] = {{conn.get(), POLLIN, 0}, {cancel_fd, POLLIN, 0}};
                      if (::poll(fds, 2, deadline.poll_timeout_ms()) <= 0 || fds[1].revents != 0)
                          break;
                      ssize_t n = ::recv(conn.get(), buf.data(), buf.size(), MSG_DONTWAIT);
                      if (n < 0 && errno == EAGAIN)
                          continue;
                      if (n <= 0 || ::send(conn.get(), buf.data(), static_cast<std::size_t>(n),
                                           MSG_NOSIGNAL) != n)
                          break;
                  }
              }
              --*open;
          }) {}

std::optional<char> name_through(const Endpoint& to, const Deadline& deadline,
                                 const std::string& source, UniqueFd* keep) {
    UniqueFd fd;
    if (source.empty()) {
        if (try_connect(to, std::chrono::milliseconds{deadline.poll_timeout_ms()}, fd) != 0)
            return std::nullopt;
    } else {
        fd.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
        sockaddr_in from{};
        from.sin_family = AF_INET;
        ::inet_pton(AF_INET, source.c_str(), &from.sin_addr);
        sockaddr_in dest{};
        dest.sin_family = AF_INET;
        dest.sin_port = htons(to.port);
        ::inet_pton(AF_INET, to.host.c_str(), &dest.sin_addr);
        int one = 1;
        ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&from), sizeof(from)) != 0 ||
            ::connect(fd.get(), reinterpret_cast<sockaddr*>(&dest), sizeof(dest)) != 0)
            return std::nullopt;
    }
    char name = 0;
    std::span<std::byte> out{reinterpret_cast<std::byte*>(&name), 1};
    if (recv_all(fd.get(), out, deadline).status != IoStatus::Ok)
        return std::nullopt;
    if (keep != nullptr)
        *keep = std::move(fd);
    return name;
}

std::map<char, int> spread(const Endpoint& proxy, int n, const std::string& source) {
    std::map<char, int> seen;
    for (int i = 0; i < n; ++i)
        ++seen[name_through(proxy, Deadline{std::chrono::milliseconds{5000}}, source)
                   .value_or('?')];
    return seen;
}

} // namespace uringfwd::test
