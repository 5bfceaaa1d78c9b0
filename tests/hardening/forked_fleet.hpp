// A client fleet (client_fleet.hpp) in a child process of its own, driven over a
// socketpair: 20 000 client sockets do not fit one process under a hard RLIMIT_NOFILE
// of 20 000 (raising a hard limit needs CAP_SYS_RESOURCE, which a root in a container
// may lack), 10 000 per child do. Construct it while the test has no other threads
// (before starting the binary): the child runs ordinary C++ after fork().
#pragma once

#include "tests/hardening/client_fleet.hpp"
#include "tests/support/unique_fd.hpp"

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace uringfwd::test {

struct FleetMessage; // one command or reply, a fixed-size record (forked_fleet.cpp)

class ForkedFleet {
public:
    ForkedFleet();
    ~ForkedFleet(); // closes the fleet's connections (the child exits) and reaps it
    ForkedFleet(const ForkedFleet&) = delete;
    ForkedFleet& operator=(const ForkedFleet&) = delete;

    struct Opened {
        std::size_t connected = 0;
        std::size_t failed = 0;
        double seconds = 0;
        std::string first_error;
    };
    // open_fleet() in the child; nullopt if the child does not answer within 90 s.
    std::optional<Opened> open(const Endpoint& to, std::size_t count, int cpu);
    // echo_all() over the child's connections, tags from `first_tag`.
    std::optional<EchoTally> echo(uint64_t first_tag, std::chrono::milliseconds quiet);

private:
    std::optional<FleetMessage> ask(const FleetMessage& command);

    UniqueFd control_;
    pid_t pid_ = -1;
};

} // namespace uringfwd::test
