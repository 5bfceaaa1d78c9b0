#include "protocol/client_hello.hpp"

#include <algorithm>
#include <cstring>

namespace uringfwd::engine::tls {

namespace {

constexpr uint8_t kHandshakeRecord = 22;    // RFC 8446 §5.1 ContentType handshake
constexpr uint8_t kClientHelloType = 1;     // RFC 8446 §4 HandshakeType client_hello
constexpr std::size_t kRecordHeader = 5;    // type, version, length
constexpr std::size_t kMaxFragment = 16384; // RFC 8446 §5.1: length MUST NOT exceed 2^14
constexpr uint16_t kServerNameExt = 0;      // RFC 6066 §3
constexpr uint16_t kAlpnExt = 16;           // RFC 7301 §3.1
constexpr uint16_t kEchExt = 0xfe0d;        // draft-ietf-tls-esni §5
constexpr uint8_t kHostNameType = 0;        // RFC 6066 §3 NameType host_name

uint8_t u8(std::span<const std::byte> b, std::size_t at) {
    return static_cast<uint8_t>(b[at]);
}

// A bounds-checked cursor over one field: every read says whether the bytes were there.
class Cursor {
public:
    explicit Cursor(std::span<const std::byte> bytes) : bytes_(bytes) {}

    bool empty() const { return pos_ == bytes_.size(); }
    std::size_t left() const { return bytes_.size() - pos_; }

    bool read(std::size_t width, uint32_t& out) {
        if (left() < width)
            return false;
        out = 0;
        for (std::size_t i = 0; i < width; ++i)
            out = out << 8 | u8(bytes_, pos_ + i);
        pos_ += width;
        return true;
    }
    bool skip(std::size_t n) {
        if (left() < n)
            return false;
        pos_ += n;
        return true;
    }
    // A vector with a `width`-byte length prefix (RFC 8446 §3.4), as a cursor of its own.
    bool vector(std::size_t width, Cursor& out) {
        uint32_t length = 0;
        if (!read(width, length) || left() < length)
            return false;
        out = Cursor(bytes_.subspan(pos_, length));
        pos_ += length;
        return true;
    }
    std::string_view view() const {
        return {reinterpret_cast<const char*>(bytes_.data()) + pos_, left()};
    }

private:
    std::span<const std::byte> bytes_;
    std::size_t pos_ = 0;
};

HelloResult fail(HelloError error) {
    return {HelloStatus::Malformed, error, {}};
}

// RFC 6066 §3: the first host_name of the list. "The ServerNameList MUST NOT contain
// more than one name of the same name_type"; names of unknown types are skipped.
bool read_server_name(Cursor ext, ClientHelloInfo& info) {
    Cursor list(ext);
    if (!ext.vector(2, list) || !ext.empty() || list.empty())
        return false;
    bool seen = false;
    while (!list.empty()) {
        uint32_t type = 0;
        Cursor name(list);
        if (!list.read(1, type) || !list.vector(2, name) || name.empty())
            return false;
        if (type != kHostNameType)
            continue;
        if (seen)
            return false;
        seen = true;
        info.server_name = name.view();
    }
    return true;
}

// RFC 7301 §3.1: ProtocolNameList<2..2^16-1>, each ProtocolName<1..2^8-1> ("empty
// strings MUST NOT be included").
bool read_alpn(Cursor ext, ClientHelloInfo& info) {
    Cursor list(ext);
    if (!ext.vector(2, list) || !ext.empty() || list.left() < 2)
        return false;
    while (!list.empty()) {
        Cursor name(list);
        if (!list.vector(1, name) || name.empty())
            return false;
        if (info.alpn_count < kMaxAlpn)
            info.alpn[info.alpn_count++] = name.view();
    }
    return true;
}

} // namespace

std::string_view to_string(HelloError error) {
    switch (error) {
    case HelloError::None:
        return "none";
    case HelloError::BadVersion:
        return "bad version";
    case HelloError::BadRecord:
        return "bad record";
    case HelloError::NotHello:
        return "not a client hello";
    case HelloError::TooLarge:
        return "too large";
    case HelloError::BadLength:
        return "bad length";
    case HelloError::BadExtension:
        return "bad extension";
    }
    return "?";
}

HelloResult parse_client_hello_message(std::span<const std::byte> message) {
    Cursor all(message);
    uint32_t type = 0;
    Cursor body(all);
    if (!all.read(1, type))
        return fail(HelloError::BadLength);
    if (type != kClientHelloType)
        return fail(HelloError::NotHello);
    if (!all.vector(3, body) || !all.empty())
        return fail(HelloError::BadLength);

    // RFC 8446 §4.1.2 ClientHello.
    uint32_t version = 0;
    if (!body.read(2, version))
        return fail(HelloError::BadLength);
    // legacy_version: 0x0303 from TLS 1.3 clients (§4.1.2), 0x0300..0x0303 from older
    // ones; anything outside SSL 3 / TLS is not a hello we understand.
    if (version >> 8 != 3)
        return fail(HelloError::BadVersion);
    Cursor session(body), suites(body), compression(body), extensions(body);
    if (!body.skip(32) || !body.vector(1, session) || session.left() > 32 ||
        !body.vector(2, suites) || suites.left() < 2 || suites.left() % 2 != 0 ||
        !body.vector(1, compression) || compression.empty())
        return fail(HelloError::BadLength);

    HelloResult result{HelloStatus::Done, HelloError::None, {}};
    // "TLS 1.2 ClientHellos may omit the extensions field" (RFC 5246 §7.4.1.2; RFC 8446
    // §4.1.2 keeps the rule for older clients): a hello without any has no name.
    if (body.empty())
        return result;
    if (!body.vector(2, extensions) || !body.empty())
        return fail(HelloError::BadLength);
    bool seen_name = false;
    bool seen_alpn = false;
    while (!extensions.empty()) {
        uint32_t ext_type = 0;
        Cursor data(extensions);
        if (!extensions.read(2, ext_type) || !extensions.vector(2, data))
            return fail(HelloError::BadLength);
        // RFC 8446 §4.2: "There MUST NOT be more than one extension of the same type".
        if (ext_type == kServerNameExt) {
            if (seen_name || !read_server_name(data, result.info))
                return fail(HelloError::BadExtension);
            seen_name = true;
        } else if (ext_type == kAlpnExt) {
            if (seen_alpn || !read_alpn(data, result.info))
                return fail(HelloError::BadExtension);
            seen_alpn = true;
        } else if (ext_type == kEchExt) {
            result.info.ech = true;
        }
    }
    return result;
}

HelloResult ClientHelloReader::malformed(HelloError error) {
    final_ = HelloStatus::Malformed;
    error_ = error;
    return fail(error);
}

HelloResult ClientHelloReader::update(std::span<const std::byte> bytes,
                                      std::span<std::byte> scratch) {
    if (final_ != HelloStatus::NeedMore)
        return {final_, error_, {}};
    if (bytes.empty())
        return {};
    // Decided on the first byte, so a client of another protocol is never kept waiting
    // for bytes a TLS record would have.
    if (u8(bytes, 0) != kHandshakeRecord) {
        final_ = HelloStatus::NotTls;
        return {HelloStatus::NotTls, HelloError::None, {}};
    }
    // Walk the whole records that arrived since the last call.
    // Every check below happens at the same point of the record sequence however the
    // bytes were cut, so the answer never depends on how they arrived.
    auto too_large = [&] {
        // The handshake bytes still missing need at least one more record header.
        return need_ != 0 && scanned_ + kRecordHeader + (need_ - have_) > kMaxClientHelloBytes;
    };
    while (need_ == 0 || have_ < need_) {
        if (too_large())
            return malformed(HelloError::TooLarge);
        if (bytes.size() < scanned_ + kRecordHeader)
            break;
        std::span<const std::byte> header = bytes.subspan(scanned_, kRecordHeader);
        // RFC 8446 §5.1: "Handshake messages MUST NOT be interleaved with other record
        // types", and a handshake fragment is never empty.
        if (u8(header, 0) != kHandshakeRecord)
            return malformed(HelloError::BadRecord);
        // legacy_record_version: 0x0301 or 0x0303 in practice (§5.1); the major number
        // 3 is SSL 3 / TLS, anything else is not.
        if (u8(header, 1) != 3)
            return malformed(HelloError::BadVersion);
        std::size_t length = std::size_t{u8(header, 3)} << 8 | u8(header, 4);
        if (length == 0 || length > kMaxFragment)
            return malformed(HelloError::BadRecord);
        if (scanned_ + kRecordHeader + length > kMaxClientHelloBytes)
            return malformed(HelloError::TooLarge);
        std::size_t arrived = std::min(length, bytes.size() - scanned_ - kRecordHeader);
        std::span<const std::byte> fragment = bytes.subspan(scanned_ + kRecordHeader, arrived);
        if (need_ == 0) {
            // The handshake header, from this fragment as far as it has come: its length
            // tells early whether the hello can fit at all.
            std::size_t n = have_;
            for (std::size_t i = 0; n < header_.size() && i < fragment.size(); ++i)
                header_[n++] = fragment[i];
            if (n == header_.size()) {
                if (static_cast<uint8_t>(header_[0]) != kClientHelloType)
                    return malformed(HelloError::NotHello);
                need_ = 4 + (std::size_t{static_cast<uint8_t>(header_[1])} << 16 |
                             std::size_t{static_cast<uint8_t>(header_[2])} << 8 |
                             static_cast<uint8_t>(header_[3]));
                if (too_large())
                    return malformed(HelloError::TooLarge);
            }
        }
        if (arrived < length)
            break;
        have_ += length;
        scanned_ += kRecordHeader + length;
        ++records_;
    }
    if (need_ == 0 || have_ < need_)
        return {};
    // Nothing follows a ClientHello in its last record: the client's next handshake
    // message waits for the server's reply (RFC 8446 §2), and early data goes in
    // records of its own (§4.2.10). Later records are the stream's, and replayed.
    if (have_ != need_)
        return malformed(HelloError::BadLength);

    HelloResult result;
    if (records_ == 1) {
        result = parse_client_hello_message(bytes.subspan(kRecordHeader, need_));
    } else {
        // Join the fragments in `scratch` (at most kMaxClientHelloBytes by the checks
        // above, so it fits).
        std::size_t at = 0;
        std::size_t out = 0;
        while (at < scanned_) {
            std::size_t length = std::size_t{u8(bytes, at + 3)} << 8 | u8(bytes, at + 4);
            if (out + length > scratch.size())
                return malformed(HelloError::TooLarge);
            std::memcpy(scratch.data() + out, bytes.data() + at + kRecordHeader, length);
            out += length;
            at += kRecordHeader + length;
        }
        result = parse_client_hello_message(scratch.first(out));
    }
    if (result.status == HelloStatus::Malformed)
        return malformed(result.error);
    final_ = HelloStatus::Done;
    result.info.length = scanned_;
    return result;
}

} // namespace uringfwd::engine::tls
