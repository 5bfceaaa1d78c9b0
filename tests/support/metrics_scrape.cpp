#include "tests/support/metrics_scrape.hpp"

#include "tests/support/socket_io.hpp"
#include "tests/support/sockets.hpp"

#include <sstream>
#include <stdexcept>
#include <thread>

namespace uringfwd::test {

namespace {

// The whole response to GET `path` (HTTP/1.0: the server closes after it).
std::string http_get(uint16_t port, const std::string& path, const Deadline& deadline) {
    Endpoint at{Endpoint::Kind::Inet, "127.0.0.1", port};
    UniqueFd fd = connect_to(at, milliseconds{deadline.poll_timeout_ms()});
    IoResult sent =
        send_text(fd.get(), "GET " + path + " HTTP/1.0\r\nHost: localhost\r\n\r\n", deadline);
    if (sent.status != IoStatus::Ok)
        throw std::runtime_error("scrape: request not sent: " + to_string(sent.status));
    std::string response;
    IoResult got = recv_until_eof(fd.get(), deadline, [&](std::span<const std::byte> chunk) {
        response.append(reinterpret_cast<const char*>(chunk.data()), chunk.size());
    });
    if (got.status != IoStatus::Eof)
        throw std::runtime_error("scrape: response not complete: " + to_string(got.status));
    return response;
}

} // namespace

std::string scrape_metrics(uint16_t port, const Deadline& deadline) {
    const std::string response = http_get(port, "/metrics", deadline);
    const std::size_t body = response.find("\r\n\r\n");
    if (response.rfind("HTTP/1.1 200", 0) != 0 && response.rfind("HTTP/1.0 200", 0) != 0)
        throw std::runtime_error("scrape: " + response.substr(0, response.find('\r')));
    if (body == std::string::npos)
        throw std::runtime_error("scrape: no end of headers");
    return response.substr(body + 4);
}

int http_status(uint16_t port, const std::string& path, const Deadline& deadline) {
    const std::string response = http_get(port, path, deadline);
    // "HTTP/1.1 404 Not Found"
    const std::size_t space = response.find(' ');
    if (response.rfind("HTTP/1.", 0) != 0 || space == std::string::npos)
        throw std::runtime_error("scrape: not an HTTP response: " +
                                 response.substr(0, response.find('\r')));
    return std::stoi(response.substr(space + 1, 3));
}

std::map<std::string, double> parse_samples(const std::string& text) {
    std::map<std::string, double> samples;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#')
            continue;
        // The value follows the last space (label values here hold no space).
        const std::size_t space = line.rfind(' ');
        if (space == std::string::npos)
            continue;
        samples[line.substr(0, space)] = std::stod(line.substr(space + 1));
    }
    return samples;
}

double sum_of(const std::map<std::string, double>& samples, const std::string& name,
              const std::string& label_filter) {
    double sum = 0;
    for (const auto& [key, value] : samples) {
        const std::string family = key.substr(0, key.find('{'));
        if (family != name)
            continue;
        if (!label_filter.empty() && key.find(label_filter) == std::string::npos)
            continue;
        sum += value;
    }
    return sum;
}

std::optional<uint16_t> metrics_port(const BinaryProcess& process, const Deadline& deadline) {
    const std::string marker = "metrics at http://";
    while (!deadline.expired()) {
        const std::string err = process.stderr_text();
        const std::size_t at = err.find(marker);
        if (at != std::string::npos) {
            const std::size_t end = err.find("/metrics", at + marker.size());
            const std::size_t colon = err.rfind(':', end);
            if (end != std::string::npos && colon != std::string::npos && colon > at)
                return static_cast<uint16_t>(std::stoi(err.substr(colon + 1, end - colon - 1)));
        }
        std::this_thread::sleep_for(milliseconds{20});
    }
    return std::nullopt;
}

} // namespace uringfwd::test
