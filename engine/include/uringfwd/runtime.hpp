// Runtime control of a running engine, beside its configuration: an operator's state
// and weight of one pool member, members added and removed, and the open connections
// listed and closed one by one (Engine::set_member_state(), Engine::connections(), ...).
// What each changes is applied on every shard before the call returns; a reload keeps
// what was set at runtime for the members still in the new configuration (README
// "Runtime control").
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace uringfwd {

// An operator's say over one pool member, beside what health checks decide.
enum class MemberState {
    Ready, // takes new connections (when its health lets it)
    Drain, // no new connections; open ones go on
    Maint, // as Drain, and its active health checks stop (the member sees no probe)
};
std::string_view to_string(MemberState state); // "ready", "drain", "maint"
std::optional<MemberState> parse_member_state(std::string_view text);

// What the health checks say of a member: its pool's active check's verdict; without
// one, Down while passive health has it marked down (on any shard), else Unchecked.
enum class MemberHealthState { Up, Down, Unchecked };
std::string_view to_string(MemberHealthState health); // "up", "down", "unchecked"

// What a runtime change did: ok, or one line for an operator saying why not
// ("no member 10.0.0.9:80 in route web; its members: a, b").
struct ChangeResult {
    bool ok = false;
    std::string error;
};

// One pool member as it is served now (Engine::members()).
struct MemberInfo {
    std::string route;
    std::string member;  // its key: UpstreamMember::name, or the address as written
    std::string address; // as written (a host name stays a name), for display
    bool backup = false;
    MemberState state = MemberState::Ready;
    // "config": as the configuration says; "runtime": set at runtime (state or weight),
    // kept across reloads while the member is in the configuration.
    std::string state_source = "config";
    MemberHealthState health = MemberHealthState::Unchecked;
    unsigned weight = 1; // configured, or set at runtime
    // What balancing uses now: 0 while drain, maint or down; during slow start the
    // ramp's value (rounded). The largest any shard uses.
    unsigned effective_weight = 1;
    uint64_t open = 0;     // open connections now (connects in progress included), all shards
    uint64_t connects = 0; // connects that succeeded, all shards
    uint64_t failures = 0; // connects that failed
};

// One open connection, as its shard saw it when asked (Engine::connections()). Named
// apart from ConnectionInfo (observer.hpp), the observer's and selector's view.
struct OpenConnection {
    uint64_t id = 0; // stable and unique for the engine's lifetime (ConnectionInfo::id)
    std::string route;
    std::string client;   // its address as text (with accept_proxy: the PROXY header's)
    std::string member;   // the pool member's key; "" before one is chosen, or outside the pool
    std::string upstream; // the address it is (being) connected to; "" if none yet
    unsigned shard = 0;
    std::chrono::milliseconds age{0}; // since it was accepted (or handed over)
    uint64_t bytes_to_upstream = 0;   // delivered so far
    uint64_t bytes_to_client = 0;
    // "inspecting" (reading a PROXY header or ClientHello), "waiting" (for a member
    // with room: max_connections), "connecting", "forwarding", "closing".
    std::string phase;
};

// Which connections Engine::connections() lists: of one route (empty: all), of one
// member of it (its key, or its address as Engine::set_member_state() takes it; empty:
// all), at most `limit` (0: all).
struct ConnectionFilter {
    std::string route;
    std::string member;
    std::size_t limit = 0;
};

} // namespace uringfwd
