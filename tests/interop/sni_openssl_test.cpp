// TLS passthrough by server name with real OpenSSL peers: `openssl s_client` through the
// uring-fwd binary (configuration file with server_names) to `openssl s_server`
// upstreams, each with its own self-signed certificate made in the test's directory.
// Where a client landed is read off the certificate subject it saw; the handshake
// completes end to end (uring-fwd never terminates TLS) and the bytes the client sent
// arrive whole at the server (a bulk transfer moves through the splice path).
#include "tests/support/binary_process.hpp"
#include "tests/support/deadline.hpp"
#include "tests/support/proc_stats.hpp"
#include "tests/support/sockets.hpp"
#include "tests/support/temp_config_file.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace uringfwd::test {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

std::string find_openssl() {
    for (const char* dir : {"/usr/bin", "/usr/local/bin", "/bin"})
        if (std::string path = std::string(dir) + "/openssl"; ::access(path.c_str(), X_OK) == 0)
            return path;
    return {};
}

std::string slurp(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
}

// `sh -c "exec ..."`: the shell redirects, then becomes the program (so the SIGTERM
// BinaryProcess sends on destruction reaches it).
std::unique_ptr<BinaryProcess> shell(const std::string& command) {
    return std::make_unique<BinaryProcess>("/bin/sh",
                                           std::vector<std::string>{"-c", "exec " + command});
}

class SniOpenssl : public ::testing::Test {
protected:
    void SetUp() override {
        openssl_ = find_openssl();
        if (openssl_.empty())
            GTEST_SKIP() << "openssl is not installed (Debian package openssl)";
        dir_ = fs::path(::testing::TempDir()) / fmt::format("uring-fwd-sni-{}", ::getpid());
        fs::create_directories(dir_);
        for (const char* name : {"a", "b", "default"}) {
            // An EC key is made in milliseconds; one day is long enough for the test.
            std::string command = fmt::format(
                "{} req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 "
                "-subj /CN={}.example -keyout {}/{}.key -out {}/{}.crt 2>/dev/null",
                openssl_, name, dir_.string(), name, dir_.string(), name);
            ASSERT_EQ(std::system(command.c_str()), 0) << command;
            Server server;
            server.port = free_port();
            server.out = dir_ / fmt::format("{}.received", name);
            // -quiet: what a client sends is written to stdout (our file), nothing else.
            // Its stdin is a FIFO opened read-write, which never ends: s_server closes
            // its connection when stdin reaches EOF.
            fs::path fifo = dir_ / fmt::format("{}.stdin", name);
            ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
            server.process = shell(fmt::format(
                "{} s_server -accept 127.0.0.1:{} -cert {}/{}.crt -key {}/{}.key -quiet > {} <> {}",
                openssl_, server.port, dir_.string(), name, dir_.string(), name,
                server.out.string(), fifo.string()));
            servers_.push_back(std::move(server));
        }
        for (const Server& s : servers_)
            ASSERT_TRUE(eventually(
                [&] {
                    UniqueFd fd;
                    return try_connect(Endpoint::parse(fmt::format("127.0.0.1:{}", s.port)), 200ms,
                                       fd) == 0;
                },
                Deadline{10s}))
                << "openssl s_server did not start";
        port_ = free_port();
        config_ = std::make_unique<ConfigFile>(fmt::format(
            R"([[route]]
name = "a"
listen = "127.0.0.1:{0}"
server_names = ["a.example"]
  [[route.upstream]]
  address = "127.0.0.1:{1}"
[[route]]
name = "b"
listen = "127.0.0.1:{0}"
server_names = ["*.b.example", "b.example"]
  [[route.upstream]]
  address = "127.0.0.1:{2}"
[[route]]
name = "fallback"
listen = "127.0.0.1:{0}"
inspect_timeout = "1s"
  [[route.upstream]]
  address = "127.0.0.1:{3}"
)",
            port_, servers_[0].port, servers_[1].port, servers_[2].port));
        proxy_ = std::make_unique<BinaryProcess>(
            uring_fwd_binary(), std::vector<std::string>{"--config", config_->path(), "--shards",
                                                         "2", "--log-level", "info"});
        ASSERT_TRUE(proxy_->wait_listening(Deadline{10s}).has_value()) << proxy_->stderr_text();
    }

    void TearDown() override {
        proxy_.reset();
        servers_.clear();
        std::error_code ignored;
        fs::remove_all(dir_, ignored);
    }

    struct Result {
        int status = -1;
        std::string out; // s_client's stdout: the certificate subject, "DONE"
    };
    // s_client through uring-fwd with `sni` (empty: none), sending `input`'s contents.
    Result connect(const std::string& sni, const fs::path& input) {
        fs::path out = dir_ / "client.out";
        std::string command =
            // -nocommands: a line of the input starting with Q or R is data, not a command.
            fmt::format(
                "timeout 20 {} s_client -connect 127.0.0.1:{} -nocommands {} < {} > {} 2>&1",
                openssl_, port_, sni.empty() ? std::string("-noservername") : "-servername " + sni,
                input.string(), out.string());
        Result r;
        r.status = std::system(command.c_str());
        r.out = slurp(out);
        return r;
    }

    fs::path write_input(const std::string& name, const std::string& data) {
        fs::path path = dir_ / name;
        std::ofstream(path, std::ios::binary) << data;
        return path;
    }

    struct Server {
        uint16_t port = 0;
        fs::path out;
        std::unique_ptr<BinaryProcess> process;
    };
    std::string openssl_;
    fs::path dir_;
    std::vector<Server> servers_;
    uint16_t port_ = 0;
    std::unique_ptr<ConfigFile> config_;
    std::unique_ptr<BinaryProcess> proxy_;
};

TEST_F(SniOpenssl, EachServerNameLandsOnItsUpstream) {
    // 8 MiB of random bytes to a.example: bulk, so the engine splices it.
    std::string bulk(8 << 20, '\0');
    std::mt19937_64 random(12);
    for (char& c : bulk)
        c = static_cast<char>(random());
    struct Case {
        std::string sni;
        std::string data;
        std::size_t server;
        const char* subject;
    };
    const std::vector<Case> cases = {
        {"a.example", bulk, 0, "CN = a.example"},
        {"www.b.example", "to b\n", 1, "CN = b.example"},
        {"", "to nobody in particular\n", 2, "CN = default.example"},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.sni.empty() ? "no SNI" : c.sni);
        Result r = connect(c.sni, write_input("input", c.data));
        EXPECT_EQ(r.status, 0) << r.out.substr(0, 2000);
        EXPECT_NE(r.out.find(std::string("subject=") + c.subject), std::string::npos)
            << r.out.substr(0, 2000);
        EXPECT_NE(r.out.find("Cipher is"), std::string::npos) << "no handshake";
        // s_server writes what it received as it arrives: wait for all of it.
        const fs::path& received = servers_[c.server].out;
        EXPECT_TRUE(eventually(
            [&] { return fs::exists(received) && fs::file_size(received) >= c.data.size(); },
            Deadline{10s}))
            << (fs::exists(received) ? fs::file_size(received) : 0) << " of " << c.data.size();
        EXPECT_TRUE(slurp(received) == c.data) << "the bytes arrived changed";
    }
    // The bulk went through the splice path: the engine's counters (SIGUSR1) say so.
    auto splices = [&]() -> uint64_t {
        const std::string err = proxy_->stderr_text();
        std::size_t at = err.rfind("total: ");
        std::size_t key = at == std::string::npos ? at : err.find(" splices=", at);
        return key == std::string::npos ? 0 : std::strtoull(err.c_str() + key + 9, nullptr, 10);
    };
    EXPECT_TRUE(eventually(
        [&] {
            proxy_->signal(SIGUSR1);
            std::this_thread::sleep_for(100ms);
            return splices() > 0;
        },
        Deadline{5s}))
        << proxy_->stderr_text();
}

} // namespace
} // namespace uringfwd::test
