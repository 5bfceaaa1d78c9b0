#include "cli/control/control_server.hpp"

#include "cli/control/line_buffer.hpp"

#include <fmt/format.h>

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <stdexcept>
#include <vector>

namespace uringfwd::cli::control {
namespace {

using Clock = std::chrono::steady_clock;

// Bytes taken from a client per read: a line at most, so a fast sender cannot make one
// client's turn long.
constexpr std::size_t kReadChunk = kMaxLineBytes;

struct Client {
    ops::UniqueFd fd;
    LineBuffer in;
    std::string out; // the reply being sent
    std::size_t sent = 0;
    Clock::time_point last; // a byte moved either way
    bool eof = false;       // the client will send nothing more
    bool close_after = false;
};

// Best effort, never blocking: a refused client hears why, if its buffer has room.
void send_line_and_forget(int fd, std::string_view line) {
    (void)::send(fd, line.data(), line.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
}

} // namespace

Reply error_reply(std::string_view message) {
    return Reply{true, fmt::format("error: {}\n", message)};
}

struct ControlServer::State {
    ControlSocket socket;
    CommandRunner runner;
    ServerLimits limits;
    ops::UniqueFd wake;
    std::atomic<bool> stop{false};
    std::atomic<bool> handed_over{false};
    std::vector<Client> clients;

    void loop();
    bool make_room();
    void accept_clients();
    void serve(Client& c, short revents, Clock::time_point now);
    void answer(Client& c);
    void flush(Client& c, Clock::time_point now);
};

// Room for one more client: below max_clients, or by closing the client that has been
// idle longest with nothing half-sent either way (a forgotten `nc -U`), so idle
// connections can never lock operators out. Clients mid-command are never closed for
// room; when every one is, the newcomer is refused.
bool ControlServer::State::make_room() {
    const auto open = static_cast<std::size_t>(std::count_if(
        clients.begin(), clients.end(), [](const Client& c) { return c.fd.valid(); }));
    if (open < limits.max_clients)
        return true;
    Client* idlest = nullptr;
    for (Client& c : clients)
        if (c.fd && c.in.empty() && c.sent == c.out.size() &&
            (idlest == nullptr || c.last < idlest->last))
            idlest = &c;
    if (idlest == nullptr)
        return false;
    send_line_and_forget(idlest->fd.get(),
                         fmt::format("error: closed: idle, and a new client needed the room (at "
                                     "most {} clients)\n\n",
                                     limits.max_clients));
    idlest->fd.reset();
    return true;
}

void ControlServer::State::accept_clients() {
    for (;;) {
        ops::UniqueFd fd(::accept4(socket.fd(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
        if (!fd)
            return; // EAGAIN, or a client that went away before we took it
        if (!make_room()) {
            send_line_and_forget(fd.get(),
                                 fmt::format("error: too many control clients busy (at most {}); "
                                             "try again later\n\n",
                                             limits.max_clients));
            continue;
        }
        Client c;
        c.fd = std::move(fd);
        c.last = Clock::now();
        clients.push_back(std::move(c));
    }
}

// Replies to the next complete line while no reply is pending.
void ControlServer::State::answer(Client& c) {
    while (c.out.size() == c.sent && !c.close_after) {
        c.out.clear();
        c.sent = 0;
        std::optional<std::string> line = c.in.take_line();
        if (!line) {
            if (c.in.too_long()) {
                c.out = fmt::format("error: line too long (at most {} bytes)\n\n", kMaxLineBytes);
                c.close_after = true;
            }
            return;
        }
        const ParseResult parsed = parse_command(*line);
        Reply reply;
        if (!parsed.command) {
            reply = error_reply(parsed.error);
        } else {
            try {
                reply = runner(*parsed.command);
            } catch (const std::exception& e) {
                reply = error_reply(e.what());
            }
        }
        c.out = std::move(reply.text);
        c.out += '\n'; // the empty line that ends every reply
    }
}

void ControlServer::State::flush(Client& c, Clock::time_point now) {
    while (c.sent < c.out.size()) {
        const ssize_t n = ::send(c.fd.get(), c.out.data() + c.sent, c.out.size() - c.sent,
                                 MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n <= 0) {
            if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return;
            c.fd.reset(); // gone: EPIPE, ECONNRESET
            return;
        }
        c.sent += static_cast<std::size_t>(n);
        c.last = now;
    }
}

void ControlServer::State::serve(Client& c, short revents, Clock::time_point now) {
    if ((revents & POLLIN) != 0 && c.in.room() > 0 && !c.eof) {
        char buffer[kReadChunk];
        const ssize_t n =
            ::recv(c.fd.get(), buffer, std::min(sizeof buffer, c.in.room()), MSG_DONTWAIT);
        if (n > 0) {
            c.in.append(std::string_view(buffer, static_cast<std::size_t>(n)));
            c.last = now;
        } else if (n == 0) {
            c.eof = true; // answer what it sent, then close
        } else if (errno != EAGAIN && errno != EINTR) {
            c.fd.reset();
            return;
        }
    } else if ((revents & (POLLERR | POLLHUP)) != 0 && (revents & POLLIN) == 0) {
        c.fd.reset();
        return;
    }
    for (;;) {
        answer(c);
        flush(c, now);
        if (!c.fd || c.sent < c.out.size())
            return; // gone, or waiting for the client to read
        if (c.close_after)
            break;
        // Flushed: another complete line may be waiting.
        if (!c.in.has_line() && !c.in.too_long())
            break;
    }
    // At the end of its input, a partial last line is dropped with the connection.
    if (c.close_after || c.eof)
        c.fd.reset();
}

void ControlServer::State::loop() {
    std::vector<pollfd> fds;
    bool listening = true;
    while (!stop.load()) {
        const Clock::time_point now = Clock::now();
        fds.clear();
        fds.push_back({wake.get(), POLLIN, 0});
        if (listening)
            fds.push_back({socket.fd(), POLLIN, 0});
        const std::size_t first_client = fds.size();
        auto timeout = limits.idle_timeout;
        for (const Client& c : clients) {
            short events = 0;
            if (c.sent < c.out.size())
                events |= POLLOUT;
            else if (c.in.room() > 0 && !c.eof)
                events |= POLLIN;
            fds.push_back({c.fd.get(), events, 0});
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                c.last + limits.idle_timeout - now);
            timeout = std::max(std::chrono::milliseconds{0}, std::min(timeout, left));
        }
        const int ready = ::poll(fds.data(), fds.size(), static_cast<int>(timeout.count()) + 1);
        if (ready < 0 && errno != EINTR)
            return; // cannot happen with valid fds; the engine serves on without us
        if ((fds[0].revents & POLLIN) != 0) {
            uint64_t count = 0;
            // Only to clear the eventfd: what it counted does not matter. (A (void) cast
            // does not silence warn_unused_result under _FORTIFY_SOURCE.)
            [[maybe_unused]] const ssize_t cleared = ::read(wake.get(), &count, sizeof count);
        }
        if (stop.load())
            return;
        if (listening && handed_over.load()) {
            listening = false; // the successor accepts from now on
        } else if (listening && (fds[1].revents & POLLIN) != 0) {
            accept_clients(); // appends: the loop below sees only the clients polled
        }
        const Clock::time_point after = Clock::now();
        for (std::size_t i = first_client; i < fds.size(); ++i) {
            Client& c = clients[i - first_client];
            if (!c.fd)
                continue; // closed to make room
            serve(c, fds[i].revents, after);
            if (c.fd && after - c.last >= limits.idle_timeout)
                c.fd.reset(); // idle: nothing moved either way for idle_timeout
        }
        std::erase_if(clients, [](const Client& c) { return !c.fd; });
    }
}

namespace {

// Wakes the server's poll. An eventfd write fails only when its counter would overflow,
// which a few wake-ups cannot make it do, so the result is not looked at (a (void) cast
// does not silence warn_unused_result under _FORTIFY_SOURCE, which packagers build with).
void wake_up(int eventfd) {
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t written = ::write(eventfd, &one, sizeof one);
}

} // namespace

ControlServer::ControlServer(ControlSocket socket, CommandRunner runner, ServerLimits limits)
    : state_(std::make_unique<State>()) {
    state_->socket = std::move(socket);
    state_->runner = std::move(runner);
    state_->limits = limits;
    state_->wake.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!state_->wake)
        throw std::runtime_error(
            fmt::format("control socket {}: eventfd failed", state_->socket.path()));
    thread_ = std::thread([state = state_.get()] { state->loop(); });
}

ControlServer::~ControlServer() {
    state_->stop.store(true);
    wake_up(state_->wake.get());
    thread_.join();
}

int ControlServer::listen_fd() const {
    return state_->socket.fd();
}

const std::string& ControlServer::path() const {
    return state_->socket.path();
}

void ControlServer::own_file() {
    state_->socket.own_file(); // the server's thread never touches the file
}

void ControlServer::hand_over() {
    state_->socket.disown();
    state_->handed_over.store(true);
    wake_up(state_->wake.get());
}

} // namespace uringfwd::cli::control
