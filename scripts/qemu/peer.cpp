// The other end of the QEMU guest's smoke checks (scripts/qemu/guest-init.sh): the
// clients and upstreams uring-fwd forwards between, on the guest's loopback. Built
// static by scripts/qemu/run.sh, so the guest needs no library for it. Each client
// command prints one line, "ok ..." or "fail: ...", and exits 0 or 1.
//
//   peer serve PORT MODE [NAME]   an upstream on 127.0.0.1:PORT, a thread per connection:
//        echo         echoes until the client's FIN, then writes "half-closed\n" and
//                     closes (the FIN came through while the other way stayed open)
//        proxy        reads a PROXY v1 or v2 header, prints it, then echoes
//        tag          reads what arrives first, answers NAME and closes
//        watch-reset  reads until the end; prints "peer-reset" or "peer-eof"
//        reset        reads what arrives first, then resets the connection
//   peer echo HOST:PORT BYTES      sends BYTES of a pattern while reading them back, then
//                                  its FIN; checks every byte and "half-closed"
//   peer reset-out HOST:PORT       sends a byte, then resets its connection
//   peer reset-in HOST:PORT        sends a byte, expects the upstream's reset
//   peer hello NAME FILE           writes a TLS ClientHello for server name NAME to FILE
//   peer send-file HOST:PORT FILE  sends FILE, prints what comes back until the end
//   peer ping HOST:PORT ROUNDS MS  one connection, ROUNDS echoed pings MS apart
//   peer page-nodes PID START-END  the NUMA node of each present page of that range of
//                                  PID's memory ("N0=3 N1=0"), from the page frames
//                                  /proc/PID/pagemap gives root and the memory blocks
//                                  each node holds; unlike numa_maps it counts pages the
//                                  kernel mapped itself (io_uring's rings on 6.1)
//   peer iowq-mask                 pins itself to CPU 0, gives its io-wq CPUs 0 and 1
//                                  (IORING_REGISTER_IOWQ_AFF), runs a nop on a worker and
//                                  prints the CPUs the worker got: what --iowq-cpus node
//                                  gives a shard's workers (docs/kernel.md §9)
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <liburing.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

// Closes the socket it holds.
class Fd {
public:
    explicit Fd(int fd = -1) : fd_(fd) {}
    Fd(Fd&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
    Fd& operator=(Fd&&) = delete;
    ~Fd() {
        if (fd_ >= 0)
            ::close(fd_);
    }
    int get() const { return fd_; }

private:
    int fd_;
};

std::mutex output_mu;
void say(const std::string& line) {
    std::lock_guard lock(output_mu);
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
}

[[noreturn]] void fail(const std::string& why) {
    say("fail: " + why);
    std::exit(1);
}

sockaddr_in address_of(const std::string& host_port) {
    const std::size_t colon = host_port.rfind(':');
    sockaddr_in a{};
    a.sin_family = AF_INET;
    if (colon == std::string::npos ||
        ::inet_pton(AF_INET, host_port.substr(0, colon).c_str(), &a.sin_addr) != 1)
        fail("not HOST:PORT: " + host_port);
    a.sin_port = htons(static_cast<uint16_t>(std::atoi(host_port.c_str() + colon + 1)));
    return a;
}

Fd connect_to(const std::string& host_port) {
    const sockaddr_in a = address_of(host_port);
    Fd fd(::socket(AF_INET, SOCK_STREAM, 0));
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&a), sizeof(a)) != 0)
        fail("connect " + host_port + ": " + std::strerror(errno));
    return fd;
}

bool write_all(int fd, const void* data, std::size_t n) {
    const char* p = static_cast<const char*>(data);
    while (n > 0) {
        const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        p += w;
        n -= static_cast<std::size_t>(w);
    }
    return true;
}

// Reads until the end or an error; returns the bytes and sets `error` (0 at the end).
std::string read_to_end(int fd, int& error) {
    std::string out;
    char buf[65536];
    for (;;) {
        const ssize_t r = ::recv(fd, buf, sizeof(buf), 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            error = r == 0 ? 0 : errno;
            return out;
        }
        out.append(buf, static_cast<std::size_t>(r));
    }
}

void reset(int fd) {
    const linger now{1, 0}; // close(2) then sends RST (net/ipv4/tcp.c __tcp_close)
    ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &now, sizeof(now));
}

unsigned char pattern_at(uint64_t i) {
    return static_cast<unsigned char>((i * 131) ^ (i >> 12));
}

void echo_until_fin(int fd) {
    char buf[65536];
    for (;;) {
        const ssize_t r = ::recv(fd, buf, sizeof(buf), 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return;
        if (r == 0)
            break;
        if (!write_all(fd, buf, static_cast<std::size_t>(r)))
            return;
    }
    const char trailer[] = "half-closed\n";
    write_all(fd, trailer, sizeof(trailer) - 1);
}

// A PROXY v1 line (up to CRLF) or a v2 header (the 12-byte signature, 4 more bytes, and
// the length they give), printed; the bytes after it are echoed.
void read_proxy_header(int fd) {
    std::string head;
    char c;
    static const char kV2[] = "\r\n\r\n\0\r\nQUIT\n";
    while (head.size() < 108 && ::recv(fd, &c, 1, 0) == 1) {
        head.push_back(c);
        if (head.rfind("PROXY ", 0) == 0 && head.size() >= 2 && head.ends_with("\r\n")) {
            say("proxy v1 " + head.substr(0, head.size() - 2));
            return;
        }
        if (head.size() == 16 && std::memcmp(head.data(), kV2, 12) == 0) {
            const std::size_t len =
                (static_cast<unsigned char>(head[14]) << 8) | static_cast<unsigned char>(head[15]);
            std::string body(len, '\0');
            std::size_t got = 0;
            while (got < len) {
                const ssize_t r = ::recv(fd, body.data() + got, len - got, 0);
                if (r <= 0)
                    break;
                got += static_cast<std::size_t>(r);
            }
            char line[96];
            std::snprintf(line, sizeof(line), "proxy v2 command %d family %d length %zu",
                          static_cast<unsigned char>(head[12]) & 0xf,
                          static_cast<unsigned char>(head[13]), got);
            say(line);
            return;
        }
    }
    say("proxy none");
}

void serve_one(Fd fd, const std::string& mode, const std::string& name) {
    if (mode == "echo") {
        echo_until_fin(fd.get());
    } else if (mode == "proxy") {
        read_proxy_header(fd.get());
        echo_until_fin(fd.get());
    } else if (mode == "tag") {
        char buf[16384];
        (void)::recv(fd.get(), buf, sizeof(buf), 0);
        write_all(fd.get(), (name + "\n").data(), name.size() + 1);
    } else if (mode == "watch-reset") {
        int error = 0;
        read_to_end(fd.get(), error);
        say(error == ECONNRESET ? "peer-reset" : error == 0 ? "peer-eof" : std::strerror(error));
    } else if (mode == "reset") {
        char buf[64];
        (void)::recv(fd.get(), buf, sizeof(buf), 0);
        reset(fd.get());
    }
}

int serve(int port, const std::string& mode, const std::string& name) {
    Fd listener(::socket(AF_INET, SOCK_STREAM, 0));
    const int one = 1;
    ::setsockopt(listener.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in a = address_of("127.0.0.1:" + std::to_string(port));
    if (::bind(listener.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
        ::listen(listener.get(), 128) != 0)
        fail("listen on " + std::to_string(port) + ": " + std::strerror(errno));
    for (;;) {
        const int c = ::accept(listener.get(), nullptr, nullptr);
        if (c >= 0)
            std::thread(serve_one, Fd(c), mode, name).detach();
    }
}

int echo(const std::string& where, uint64_t bytes) {
    Fd fd = connect_to(where);
    std::thread writer([&] {
        std::vector<unsigned char> chunk(65536);
        for (uint64_t sent = 0; sent < bytes;) {
            const std::size_t n =
                static_cast<std::size_t>(std::min<uint64_t>(chunk.size(), bytes - sent));
            for (std::size_t i = 0; i < n; ++i)
                chunk[i] = pattern_at(sent + i);
            if (!write_all(fd.get(), chunk.data(), n))
                return;
            sent += n;
        }
        ::shutdown(fd.get(), SHUT_WR);
    });
    uint64_t got = 0;
    std::string tail;
    char buf[65536];
    bool intact = true;
    for (;;) {
        const ssize_t r = ::recv(fd.get(), buf, sizeof(buf), 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        for (ssize_t i = 0; i < r; ++i, ++got) {
            if (got < bytes)
                intact = intact && static_cast<unsigned char>(buf[i]) == pattern_at(got);
            else
                tail.push_back(buf[i]);
        }
    }
    writer.join();
    if (got < bytes)
        fail("echo: " + std::to_string(got) + " of " + std::to_string(bytes) + " bytes back");
    if (!intact)
        fail("echo: bytes back differ from the bytes sent");
    if (tail != "half-closed\n")
        fail("echo: after the bytes came \"" + tail + "\", not the upstream's half-closed");
    say("ok " + std::to_string(bytes) + " bytes each way intact, half-close propagated");
    return 0;
}

// A ClientHello (RFC 8446 §4.1.2) holding one server_name (RFC 6066 §3): record header,
// handshake header, legacy version, random, no session id, one cipher suite, null
// compression, the extension.
std::string client_hello(const std::string& name) {
    auto u16 = [](std::size_t v) { return std::string{char(v >> 8), char(v & 0xff)}; };
    const std::string host = std::string{'\0'} + u16(name.size()) + name;
    const std::string sni_list = u16(host.size()) + host;
    const std::string extension = u16(0) + u16(sni_list.size()) + sni_list;
    std::string body = std::string{'\x03', '\x03'} + std::string(32, '\x2a') + '\0' + u16(2) +
                       std::string{'\x13', '\x01'} + std::string{'\x01', '\0'} +
                       u16(extension.size()) + extension;
    const std::string handshake =
        std::string{'\x01', '\0'} + u16(body.size()) + body; // type 1, 24-bit length
    return std::string{'\x16', '\x03', '\x01'} + u16(handshake.size()) + handshake;
}

int send_file(const std::string& where, const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    const std::string data{std::istreambuf_iterator<char>(in), {}};
    Fd fd = connect_to(where);
    if (!write_all(fd.get(), data.data(), data.size()))
        fail("send-file: write");
    int error = 0;
    std::string reply = read_to_end(fd.get(), error);
    while (!reply.empty() && reply.back() == '\n')
        reply.pop_back();
    say("ok " + reply);
    return 0;
}

int ping(const std::string& where, int rounds, int ms) {
    Fd fd = connect_to(where);
    for (int i = 0; i < rounds; ++i) {
        char out[16] = {};
        std::snprintf(out, sizeof(out), "ping %10d", i);
        if (!write_all(fd.get(), out, sizeof(out)))
            fail("ping: write in round " + std::to_string(i));
        char back[16];
        std::size_t got = 0;
        while (got < sizeof(back)) {
            const ssize_t r = ::recv(fd.get(), back + got, sizeof(back) - got, 0);
            if (r <= 0)
                fail("ping: connection lost in round " + std::to_string(i));
            got += static_cast<std::size_t>(r);
        }
        if (std::memcmp(out, back, sizeof(out)) != 0)
            fail("ping: wrong echo in round " + std::to_string(i));
        std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    }
    say("ok " + std::to_string(rounds) + " rounds on one connection");
    return 0;
}

// Memory block number -> node, from /sys/devices/system/node/nodeN/memoryM
// (Documentation/admin-guide/mm/memory-hotplug.rst: a block is block_size_bytes long).
std::map<uint64_t, int> block_nodes() {
    std::map<uint64_t, int> out;
    for (int node = 0; node < 64; ++node) {
        const std::string dir = "/sys/devices/system/node/node" + std::to_string(node);
        DIR* d = ::opendir(dir.c_str());
        if (d == nullptr)
            continue;
        while (const dirent* e = ::readdir(d))
            if (std::strncmp(e->d_name, "memory", 6) == 0 && e->d_name[6] >= '0' &&
                e->d_name[6] <= '9')
                out[std::strtoull(e->d_name + 6, nullptr, 10)] = node;
        ::closedir(d);
    }
    return out;
}

int page_nodes(const std::string& pid, const std::string& range) {
    const uint64_t start = std::strtoull(range.c_str(), nullptr, 16);
    const uint64_t end = std::strtoull(range.c_str() + range.find('-') + 1, nullptr, 16);
    std::ifstream size_file("/sys/devices/system/memory/block_size_bytes");
    std::string size_text;
    size_file >> size_text;
    const uint64_t block_bytes = std::strtoull(size_text.c_str(), nullptr, 16);
    const std::map<uint64_t, int> nodes = block_nodes();
    const long page = ::sysconf(_SC_PAGESIZE);
    Fd map(::open(("/proc/" + pid + "/pagemap").c_str(), O_RDONLY));
    if (map.get() < 0 || block_bytes == 0)
        fail("page-nodes: /proc/" + pid + "/pagemap or the memory block size unreadable");
    std::map<int, uint64_t> count;
    uint64_t unknown = 0;
    for (uint64_t a = start; a < end; a += static_cast<uint64_t>(page)) {
        uint64_t entry = 0; // Documentation/admin-guide/mm/pagemap.rst: bit 63 present,
                            // bits 0-54 the page frame number
        if (::pread(map.get(), &entry, sizeof(entry),
                    static_cast<off_t>(a / static_cast<uint64_t>(page) * sizeof(entry))) !=
                sizeof(entry) ||
            (entry >> 63) == 0)
            continue;
        const uint64_t frame = entry & ((uint64_t{1} << 55) - 1);
        const auto at = nodes.find(frame * static_cast<uint64_t>(page) / block_bytes);
        if (frame == 0 || at == nodes.end())
            ++unknown;
        else
            ++count[at->second];
    }
    std::string line;
    for (const auto& [node, pages] : count)
        line += "N" + std::to_string(node) + "=" + std::to_string(pages) + " ";
    say(line + "unknown=" + std::to_string(unknown));
    return 0;
}

int iowq_mask() {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(0, &set);
    if (::sched_setaffinity(0, sizeof(set), &set) != 0)
        fail("iowq-mask: cannot pin to CPU 0");
    io_uring ring;
    if (::io_uring_queue_init(8, &ring, 0) != 0)
        fail("iowq-mask: no ring");
    CPU_SET(1, &set);
    if (::io_uring_register_iowq_aff(&ring, sizeof(set), &set) != 0)
        fail("iowq-mask: IORING_REGISTER_IOWQ_AFF refused");
    io_uring_sqe* sqe = ::io_uring_get_sqe(&ring);
    ::io_uring_prep_nop(sqe);
    sqe->flags |= IOSQE_ASYNC; // run by a worker, created for it
    io_uring_cqe* cqe = nullptr;
    if (::io_uring_submit_and_wait(&ring, 1) != 1 || ::io_uring_wait_cqe(&ring, &cqe) != 0)
        fail("iowq-mask: the nop did not complete");
    const std::string worker = "iou-wrk-" + std::to_string(::gettid());
    DIR* d = ::opendir("/proc/self/task");
    std::string cpus;
    while (const dirent* e = d != nullptr ? ::readdir(d) : nullptr) {
        std::ifstream comm(std::string("/proc/self/task/") + e->d_name + "/comm");
        std::string name;
        if (!std::getline(comm, name) || name != worker)
            continue;
        std::ifstream status(std::string("/proc/self/task/") + e->d_name + "/status");
        for (std::string line; std::getline(status, line);)
            if (line.rfind("Cpus_allowed_list:", 0) == 0)
                cpus = line.substr(line.find_first_not_of(" \t", 18));
    }
    if (d != nullptr)
        ::closedir(d);
    if (cpus.empty())
        fail("iowq-mask: no worker seen");
    say("ok " + cpus);
    ::io_uring_queue_exit(&ring);
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    const std::vector<std::string> a(argv + 1, argv + argc);
    if (a.size() >= 3 && a[0] == "serve")
        return serve(std::atoi(a[1].c_str()), a[2], a.size() > 3 ? a[3] : "");
    if (a.size() == 3 && a[0] == "echo")
        return echo(a[1], std::strtoull(a[2].c_str(), nullptr, 10));
    if (a.size() == 2 && a[0] == "reset-out") {
        Fd fd = connect_to(a[1]);
        write_all(fd.get(), "x", 1);
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        reset(fd.get());
        say("ok reset sent");
        return 0;
    }
    if (a.size() == 2 && a[0] == "reset-in") {
        Fd fd = connect_to(a[1]);
        write_all(fd.get(), "x", 1);
        int error = 0;
        read_to_end(fd.get(), error);
        if (error != ECONNRESET)
            fail(std::string("reset-in: the connection ended with ") +
                 (error == 0 ? "a FIN" : std::strerror(error)) + ", not a reset");
        say("ok the upstream's reset came through");
        return 0;
    }
    if (a.size() == 3 && a[0] == "hello") {
        std::ofstream(a[2], std::ios::binary) << client_hello(a[1]);
        return 0;
    }
    if (a.size() == 3 && a[0] == "send-file")
        return send_file(a[1], a[2]);
    if (a.size() == 4 && a[0] == "ping")
        return ping(a[1], std::atoi(a[2].c_str()), std::atoi(a[3].c_str()));
    if (a.size() == 1 && a[0] == "iowq-mask")
        return iowq_mask();
    if (a.size() == 3 && a[0] == "page-nodes")
        return page_nodes(a[1], a[2]);
    std::fprintf(stderr, "usage: see scripts/qemu/peer.cpp\n");
    return 2;
}
