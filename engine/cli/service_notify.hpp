// Tells the service manager how the binary is doing: the sd_notify(3) protocol written
// out. It is one datagram of "KEY=VALUE" lines to the AF_UNIX socket named by
// $NOTIFY_SOCKET ('@' first: an abstract socket), so a dozen lines do what linking
// libsystemd would, without a dependency for every build and every embedder.
#pragma once

#include <string>
#include <string_view>

namespace uringfwd::cli {

class ServiceNotifier {
public:
    // Reads $NOTIFY_SOCKET; without it (not started by systemd) every call is a no-op.
    // The variable stays set: a process started for a binary upgrade inherits it and
    // announces itself as the new main process.
    ServiceNotifier();

    bool enabled() const { return !path_.empty(); }

    // Sends `state` (lines such as "READY=1\nSTATUS=..."). Failures are ignored, as
    // sd_notify(3) callers do: the service manager may be gone.
    void send(std::string_view state) const;

    void ready(std::string_view status) const;
    // RELOADING=1 with MONOTONIC_USEC= (systemd 253 Type=notify-reload wants both;
    // older versions ignore the second), then ready() when done.
    void reloading() const;
    void stopping(std::string_view status) const;
    // After a binary upgrade: this process is the service's main process now.
    void main_pid_ready(std::string_view status) const;

private:
    std::string path_;
};

} // namespace uringfwd::cli
