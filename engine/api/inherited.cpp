// Listening sockets from outside (socket activation, a binary upgrade) adopted at start,
// and the other half of an upgrade: handing ours out and letting go of them.
// docs/service.md says why the sockets themselves must pass, not their addresses.
#include "api/engine_impl.hpp"

#include "net/inherited_match.hpp"
#include "net/sockets.hpp"

#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace uringfwd {
namespace {

engine::InheritedSocket describe_inherited(int fd) {
    struct stat st {};
    if (::fstat(fd, &st) != 0)
        throw std::runtime_error(
            fmt::format("inherited listener fd {}: {}", fd, std::strerror(errno)));
    int type = 0;
    int listening = 0;
    socklen_t len = sizeof(type);
    socklen_t len2 = sizeof(listening);
    if (!S_ISSOCK(st.st_mode) || ::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 ||
        type != SOCK_STREAM ||
        ::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len2) != 0 || !listening)
        throw std::runtime_error(fmt::format(
            "inherited fd {} is not a listening stream socket (systemd: ListenStream=)", fd));
    engine::SocketAddress address = engine::local_address(fd);
    engine::InheritedSocket out;
    out.fd = fd;
    out.address = engine::to_endpoint(address);
    // sockfs gives every socket its own inode: two fds of one socket share it.
    out.identity = (static_cast<uint64_t>(st.st_dev) << 32) ^ static_cast<uint64_t>(st.st_ino);
    return out;
}

// "127.0.0.1:19000 (2 sockets), unix:/run/a.sock": each address once, in the order given.
std::string describe_addresses(const std::vector<engine::InheritedSocket>& sockets) {
    std::vector<std::pair<std::string, std::size_t>> counts;
    for (const engine::InheritedSocket& s : sockets) {
        const std::string address = s.address.to_string();
        auto it = std::find_if(counts.begin(), counts.end(),
                               [&](const auto& c) { return c.first == address; });
        if (it == counts.end())
            counts.emplace_back(address, 1);
        else
            ++it->second;
    }
    std::string out;
    for (const auto& [address, count] : counts)
        out += fmt::format("{}{}{}", out.empty() ? "" : ", ", address,
                           count > 1 ? fmt::format(" ({} sockets)", count) : std::string());
    return out;
}

} // namespace

void Engine::Impl::adopt_inherited(std::size_t shards) {
    shard_count_ = shards;
    if (config_.inherited.inherited_listeners.empty())
        return;
    std::vector<engine::InheritedSocket> sockets;
    for (int fd : config_.inherited.inherited_listeners)
        sockets.push_back(describe_inherited(fd));
    std::vector<Endpoint> listen;
    for (const PlannedListener& l : listeners_)
        listen.push_back(engine::to_endpoint(l.address));
    engine::InheritedPlan plan = engine::match_inherited(listen, sockets);
    if (config_.inherited.serve_every_inherited && !plan.unmatched.empty())
        throw std::runtime_error(
            fmt::format("the inherited listening sockets of {} match no listen address of this "
                        "configuration; not taking them over without serving them",
                        describe_addresses(plan.unmatched)));
    for (const engine::InheritedSocket& s : plan.unmatched)
        log_.warn("inherited listening socket {} (fd {}) is no route's listen address; "
                  "not served",
                  s.address.to_string(), s.fd);
    for (std::size_t l = 0; l < listeners_.size(); ++l) {
        if (plan.per_listener[l].empty())
            continue;
        // Throws, naming the address, for a count that is neither one nor one per shard.
        try {
            engine::inherited_for_shard(plan.per_listener[l], 0, shards, listen[l]);
        } catch (const std::invalid_argument& e) {
            throw std::runtime_error(e.what());
        }
        log_.info("{}: adopting {} inherited listening socket{}", listen[l].to_string(),
                  plan.per_listener[l].size(), plan.per_listener[l].size() == 1 ? "" : "s");
    }
    inherited_ = std::move(plan.per_listener);
}

std::vector<int> Engine::Impl::listener_fds() const {
    std::lock_guard lock(plan_mu_);
    std::vector<int> out;
    if (released_ || stopping_.load())
        return out;
    for (std::size_t l = 0; l < listeners_.size(); ++l) {
        if (listeners_[l].closed)
            continue;
        for (const auto& shard : shards_)
            out.push_back(shard->listener_fd(l));
    }
    return out;
}

void Engine::Impl::release_listeners() {
    std::lock_guard lock(plan_mu_);
    released_ = true;
    for (const auto& shard : shards_) {
        engine::Shard* s = shard.get();
        std::function<void()> release = [s] { s->release_listeners(); };
        s->call(release); // false: that shard has ended, holding nothing
    }
    // Return only once the cancelled accepts have come back: until then they still wait
    // on the sockets' queues and may swallow a wake-up meant for the other process's
    // accept (see rearm_listeners()). Milliseconds; bounded all the same.
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    for (const auto& shard : shards_) {
        engine::Shard* s = shard.get();
        bool idle = false;
        std::function<void()> check = [s, &idle] { idle = s->listeners_idle(); };
        while (s->call(check) && !idle && std::chrono::steady_clock::now() < give_up)
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    log_.info("released the listening sockets: no longer accepting; open connections go on");
}

void Engine::Impl::rearm_listeners() {
    for (const auto& shard : shards_) {
        engine::Shard* s = shard.get();
        std::function<void()> rearm = [s] { s->rearm_listeners(); };
        s->call(rearm);
    }
}

} // namespace uringfwd
