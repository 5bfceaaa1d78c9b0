// Reading the server name (SNI) and the ALPN protocols out of a TLS ClientHello, for
// routing a TLS connection without terminating it. Pure: no I/O, no allocation; the
// shard calls it again each time more of the client's first bytes have arrived.
//
// Wire format (all lengths big-endian):
//   record      (RFC 8446 §5.1)  type(1) = 22 handshake, legacy_record_version(2),
//                                length(2) <= 2^14, fragment
//   handshake   (RFC 8446 §4)    msg_type(1) = 1 client_hello, length(3), body; one
//                                handshake message may span several records
//   ClientHello (RFC 8446 §4.1.2) legacy_version(2), random(32), session_id<0..32>,
//                                cipher_suites<2..2^16-2>, compression<1..2^8-1>,
//                                extensions<8..2^16-1> (absent in old clients)
//   server_name (RFC 6066 §3)    extension 0: ServerNameList<1..2^16-1> of
//                                name_type(1) (0 host_name) + HostName<1..2^16-1>
//   ALPN        (RFC 7301 §3.1)  extension 16: ProtocolNameList<2..2^16-1> of
//                                ProtocolName<1..2^8-1>
//
// Encrypted ClientHello (draft-ietf-tls-esni, extension 0xfe0d): the name that matters is
// inside the encrypted inner hello, which only the server holding the ECH key can read.
// We route on the outer hello's server_name, the client-facing "public name"; `ech`
// says the extension was there.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace uringfwd::engine::tls {

// Bytes of records (headers included) we wait for at most: the inspect buffer's size.
// Post-quantum key shares (X25519MLKEM768 adds 1216 bytes) make ClientHellos of 1.5 to
// 2 KiB common, larger than one TCP segment; 16 KiB leaves room for many more.
inline constexpr std::size_t kMaxClientHelloBytes = 16384;
// ALPN protocols kept for matching; a client offering more is matched on its first ones.
inline constexpr std::size_t kMaxAlpn = 8;

enum class HelloStatus : uint8_t {
    NeedMore,  // a prefix of a ClientHello: wait for more bytes
    NotTls,    // the first byte is not a TLS handshake record: decided on byte one
    Done,      // a whole ClientHello, read
    Malformed, // a TLS handshake record that is no valid ClientHello (see `error`)
};

enum class HelloError : uint8_t {
    None,
    BadVersion,   // a record or ClientHello version whose major number is not 3
    BadRecord,    // another record type inside the hello, an empty or > 2^14 fragment
    NotHello,     // a handshake message other than client_hello
    TooLarge,     // its records need more than kMaxClientHelloBytes
    BadLength,    // a length field that runs past its enclosing field, or trailing bytes
    BadExtension, // a server_name or ALPN extension that breaks its RFC's rules
};
std::string_view to_string(HelloError error);

struct ClientHelloInfo {
    // The first host_name of server_name, as sent (compare case-insensitively); empty
    // when the client sent none.
    std::string_view server_name;
    std::array<std::string_view, kMaxAlpn> alpn{}; // in the client's order of preference
    std::size_t alpn_count = 0;
    bool ech = false;       // an encrypted_client_hello extension: server_name is the outer one
    std::size_t length = 0; // bytes of records the hello took (always replayed whole)
};

struct HelloResult {
    HelloStatus status = HelloStatus::NeedMore;
    HelloError error = HelloError::None;
    ClientHelloInfo info; // with Done only
};

// Incremental: call update() with all bytes received so far (the same prefix, growing)
// until it answers anything but NeedMore. Each record header is walked once, and the
// hello is parsed once it is complete, so a client that sends it a byte at a time costs
// O(n) in all.
//
// The views in `info` point into `bytes` when the hello came in one record (the usual
// case) or into `scratch` when it spanned several, whose fragments are joined there;
// `scratch` must hold kMaxClientHelloBytes and outlive the use of `info`.
class ClientHelloReader {
public:
    HelloResult update(std::span<const std::byte> bytes, std::span<std::byte> scratch);

private:
    HelloResult malformed(HelloError error);

    std::size_t scanned_ = 0;           // offset of the next record header in the input
    std::size_t records_ = 0;           // whole records walked
    std::size_t have_ = 0;              // handshake bytes in those records
    std::size_t need_ = 0;              // 4 + the handshake's length, once its header is known
    std::array<std::byte, 4> header_{}; // the handshake header, which may span records
    HelloStatus final_ = HelloStatus::NeedMore; // sticky once decided (except Done)
    HelloError error_ = HelloError::None;
};

// Parses one complete client_hello handshake message (its 4-byte header included).
// Exposed for the unit tests; ClientHelloReader::update() is the entry point.
HelloResult parse_client_hello_message(std::span<const std::byte> message);

} // namespace uringfwd::engine::tls
