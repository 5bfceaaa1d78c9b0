#include "shard/inspect/sni_inspector.hpp"

#include "protocol/client_hello.hpp"

#include <fmt/format.h>

#include <array>

namespace uringfwd::engine {

namespace {

class SniInspector final : public Inspector {
public:
    explicit SniInspector(std::shared_ptr<const SniRouter> router) : router_(std::move(router)) {}

    std::string_view name() const override { return "TLS ClientHello"; }

    InspectVerdict inspect(const InspectInput& input) const override {
        // Inspectors keep no state per connection (inspect.hpp), so the reader starts
        // afresh on every call; it walks only record headers until the hello is whole.
        // The scratch joins a hello that spans records; on the stack, as nothing of it
        // outlives this call (the route is chosen here).
        std::array<std::byte, tls::kMaxClientHelloBytes> scratch;
        tls::ClientHelloReader reader;
        tls::HelloResult result = reader.update(input.bytes, scratch);
        switch (result.status) {
        case tls::HelloStatus::NeedMore:
            return InspectVerdict::need_more();
        case tls::HelloStatus::NotTls:
            return to(router_->choose(nullptr), [] { return std::string("not TLS"); });
        case tls::HelloStatus::Malformed:
            return InspectVerdict::reject(result.error == tls::HelloError::TooLarge
                                              ? CloseReason::InspectOversized
                                              : CloseReason::TlsMalformed,
                                          fmt::format("malformed: {}", to_string(result.error)));
        case tls::HelloStatus::Done:
            break;
        }
        const tls::ClientHelloInfo& hello = result.info;
        return to(router_->choose(&hello), [&] {
            return hello.server_name.empty()
                       ? std::string("no server name")
                       : fmt::format("server name \"{}\"", printable(hello.server_name));
        });
    }

private:
    // `why` names what matched nothing; called (and allocating) only then.
    template <typename Why> static InspectVerdict to(std::optional<std::size_t> route, Why why) {
        if (!route)
            return InspectVerdict::reject(CloseReason::NoRoute,
                                          fmt::format("{} matches no route", why()));
        InspectVerdict done = InspectVerdict::done(0); // every byte goes to the upstream
        done.route = *route;
        return done;
    }

    // A name for a log line: at most 64 bytes, anything unprintable as '?'.
    static std::string printable(std::string_view name) {
        std::string out(name.substr(0, 64));
        for (char& c : out)
            if (c < ' ' || c > '~')
                c = '?';
        return out;
    }

    std::shared_ptr<const SniRouter> router_;
};

} // namespace

std::shared_ptr<const Inspector> make_sni_inspector(std::shared_ptr<const SniRouter> router) {
    return std::make_shared<SniInspector>(std::move(router));
}

} // namespace uringfwd::engine
