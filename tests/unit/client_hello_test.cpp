// The ClientHello reader: real hellos captured from openssl s_client, curl and
// gnutls-cli (the fuzz seed corpus), and hellos built here to split, enlarge and break.
#include "protocol/client_hello.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace uringfwd::engine::tls {
namespace {

using Bytes = std::vector<std::byte>;

void put(Bytes& out, uint32_t value, int width) {
    for (int i = width - 1; i >= 0; --i)
        out.push_back(static_cast<std::byte>((value >> (8 * i)) & 0xff));
}
void put(Bytes& out, std::string_view text) {
    for (char c : text)
        out.push_back(static_cast<std::byte>(c));
}
void put_vector(Bytes& out, const Bytes& body, int width) {
    put(out, static_cast<uint32_t>(body.size()), width);
    out.insert(out.end(), body.begin(), body.end());
}

struct HelloSpec {
    std::vector<std::string> names; // host_name entries of server_name (none: no extension)
    std::vector<std::string> alpn;  // none: no extension
    std::size_t padding = 0;        // bytes of a padding extension (RFC 7685), for size
    bool ech = false;
    uint16_t version = 0x0303;
};

HelloSpec spec(std::vector<std::string> names = {}, std::vector<std::string> alpn = {},
               std::size_t padding = 0, bool ech = false) {
    HelloSpec out;
    out.names = std::move(names);
    out.alpn = std::move(alpn);
    out.padding = padding;
    out.ech = ech;
    return out;
}

// A client_hello handshake message (RFC 8446 §4.1.2), header included.
Bytes hello_message(const HelloSpec& spec) {
    Bytes body;
    put(body, spec.version, 2);
    body.insert(body.end(), 32, std::byte{0x42}); // random
    put_vector(body, Bytes(32, std::byte{7}), 1); // legacy_session_id
    put_vector(body, {std::byte{0x13}, std::byte{0x01}}, 2);
    put_vector(body, {std::byte{0}}, 1);
    Bytes extensions;
    if (!spec.names.empty()) {
        Bytes list;
        for (const std::string& name : spec.names) {
            Bytes host;
            put(host, name);
            put(list, 0, 1);
            put_vector(list, host, 2);
        }
        Bytes ext;
        put_vector(ext, list, 2);
        put(extensions, 0, 2);
        put_vector(extensions, ext, 2);
    }
    if (!spec.alpn.empty()) {
        Bytes list;
        for (const std::string& p : spec.alpn) {
            Bytes name;
            put(name, p);
            put_vector(list, name, 1);
        }
        Bytes ext;
        put_vector(ext, list, 2);
        put(extensions, 16, 2);
        put_vector(extensions, ext, 2);
    }
    if (spec.ech) {
        put(extensions, 0xfe0d, 2);
        put_vector(extensions, Bytes(40, std::byte{1}), 2);
    }
    if (spec.padding > 0) {
        put(extensions, 21, 2);
        put_vector(extensions, Bytes(spec.padding, std::byte{0}), 2);
    }
    put_vector(body, extensions, 2);
    Bytes message;
    put(message, 1, 1);
    put_vector(message, body, 3);
    return message;
}

// `message` in records of at most `fragment` bytes each.
Bytes in_records(const Bytes& message, std::size_t fragment = 16384, uint8_t major = 3) {
    Bytes out;
    for (std::size_t at = 0; at < message.size(); at += fragment) {
        std::size_t n = std::min(fragment, message.size() - at);
        put(out, 22, 1);
        put(out, major, 1);
        put(out, 1, 1);
        put(out, static_cast<uint32_t>(n), 2);
        out.insert(out.end(), message.begin() + static_cast<std::ptrdiff_t>(at),
                   message.begin() + static_cast<std::ptrdiff_t>(at + n));
    }
    return out;
}

struct Reading {
    HelloResult result;
    std::string name; // copied: the views die with the scratch buffer
    std::vector<std::string> alpn;
};

// Feeds `bytes` `step` bytes at a time (0: all at once), as arrivals would.
Reading read_all(const Bytes& bytes, std::size_t step = 0) {
    ClientHelloReader reader;
    std::vector<std::byte> scratch(kMaxClientHelloBytes);
    Reading out;
    std::size_t have = step == 0 ? bytes.size() : 0;
    while (true) {
        if (step != 0)
            have = std::min(bytes.size(), have + step);
        out.result = reader.update(std::span(bytes).first(have), scratch);
        if (out.result.status != HelloStatus::NeedMore || have == bytes.size())
            break;
    }
    out.name = std::string(out.result.info.server_name);
    for (std::size_t i = 0; i < out.result.info.alpn_count; ++i)
        out.alpn.emplace_back(out.result.info.alpn[i]);
    return out;
}

Bytes seed(const std::string& name) {
    std::ifstream in(std::filesystem::path(URING_FWD_HELLO_CORPUS) / name, std::ios::binary);
    std::vector<char> raw((std::istreambuf_iterator<char>(in)), {});
    Bytes out;
    for (char c : raw)
        out.push_back(static_cast<std::byte>(c));
    return out;
}

TEST(ClientHello, RealHellosFromTheSeedCorpus) {
    struct Case {
        const char* file;
        const char* name;
        std::vector<std::string> alpn;
    };
    const std::vector<Case> cases = {
        {"openssl-sni-a", "a.example", {}},
        {"openssl-nosni", "", {}},
        {"openssl-alpn", "b.example", {"h2", "http/1.1"}},
        {"openssl-tls12", "c.example", {}},
        {"curl-sni", "a.example", {"h2", "http/1.1"}},
        {"curl-http11", "b.example", {"http/1.1"}},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.file);
        Bytes bytes = seed(c.file);
        ASSERT_FALSE(bytes.empty()) << "missing seed";
        Reading r = read_all(bytes);
        ASSERT_EQ(r.result.status, HelloStatus::Done) << to_string(r.result.error);
        EXPECT_EQ(r.name, c.name);
        EXPECT_EQ(r.alpn, c.alpn);
        EXPECT_EQ(r.result.info.length, bytes.size());
        // A byte at a time: every prefix is NeedMore, the whole is the same answer.
        Reading slow = read_all(bytes, 1);
        EXPECT_EQ(slow.result.status, HelloStatus::Done);
        EXPECT_EQ(slow.name, c.name);
    }
}

TEST(ClientHello, GnutlsHelloWhenCaptured) {
    Bytes bytes = seed("gnutls-sni-alpn");
    if (bytes.empty())
        GTEST_SKIP() << "no gnutls-cli seed in the corpus";
    Reading r = read_all(bytes);
    ASSERT_EQ(r.result.status, HelloStatus::Done);
    EXPECT_EQ(r.name, "a.example");
}

TEST(ClientHello, NotTlsIsDecidedOnTheFirstByte) {
    ClientHelloReader reader;
    std::array<std::byte, 1> scratch{};
    for (char first : {'G', 'S', '\x80', '\x15', '\x17', '\0'}) {
        ClientHelloReader fresh;
        std::array<std::byte, 1> one{static_cast<std::byte>(first)};
        EXPECT_EQ(fresh.update(one, scratch).status, HelloStatus::NotTls) << int(first);
    }
    EXPECT_EQ(reader.update({}, scratch).status, HelloStatus::NeedMore);
    std::array<std::byte, 1> handshake{std::byte{22}};
    EXPECT_EQ(reader.update(handshake, scratch).status, HelloStatus::NeedMore);
}

TEST(ClientHello, SpansSeveralRecordsAndSegments) {
    // 6 KiB of padding: a hello the size of one with several post-quantum key shares.
    Bytes message = hello_message(spec({"Www.A.Example"}, {"h2"}, 6000));
    for (std::size_t fragment : {1u, 7u, 100u, 1000u, 4096u}) {
        SCOPED_TRACE(fragment);
        Bytes records = in_records(message, fragment);
        if (records.size() > kMaxClientHelloBytes)
            continue; // 1-byte fragments take 6x the room: TooLarge, checked below
        for (std::size_t step : {0u, 1u, 1460u}) {
            Reading r = read_all(records, step);
            ASSERT_EQ(r.result.status, HelloStatus::Done) << to_string(r.result.error);
            EXPECT_EQ(r.name, "Www.A.Example");
            EXPECT_EQ(r.alpn, std::vector<std::string>{"h2"});
        }
    }
    Reading tiny = read_all(in_records(message, 1));
    EXPECT_EQ(tiny.result.error, HelloError::TooLarge);
}

TEST(ClientHello, UpTo16KiBOfRecords) {
    // The largest hello that fits: one record header and the message, 16384 bytes.
    Bytes fits = in_records(hello_message(spec({"a.example"}, {}, 0)), 16384);
    std::size_t room = kMaxClientHelloBytes - fits.size();
    Bytes largest = in_records(hello_message(spec({"a.example"}, {}, room - 4)), 16384);
    ASSERT_EQ(largest.size(), kMaxClientHelloBytes);
    EXPECT_EQ(read_all(largest).result.status, HelloStatus::Done);
    // One byte more needs a second record: TooLarge as soon as the length is known.
    Bytes message = hello_message(spec({"a.example"}, {}, room - 3));
    Bytes over = in_records(message, 16000);
    ClientHelloReader reader;
    std::vector<std::byte> scratch(kMaxClientHelloBytes);
    EXPECT_EQ(reader.update(std::span(over).first(100), scratch).error, HelloError::TooLarge);
}

TEST(ClientHello, EncryptedClientHelloRoutesOnTheOuterName) {
    Reading r = read_all(in_records(hello_message(spec({"public.example"}, {"h2"}, 0, true))));
    ASSERT_EQ(r.result.status, HelloStatus::Done);
    EXPECT_EQ(r.name, "public.example");
    EXPECT_TRUE(r.result.info.ech);
}

TEST(ClientHello, NoExtensionsAtAll) {
    Bytes message = hello_message(spec());
    message.resize(message.size() - 2); // drop the empty extensions vector
    message[3] = static_cast<std::byte>(static_cast<uint8_t>(message[3]) - 2);
    Reading r = read_all(in_records(message));
    ASSERT_EQ(r.result.status, HelloStatus::Done) << to_string(r.result.error);
    EXPECT_EQ(r.name, "");
}

TEST(ClientHello, ManyAlpnProtocolsKeepTheFirstOnes) {
    std::vector<std::string> many;
    // "p" + std::to_string(i) would be shorter, but GCC 12 at -O3 warns about the
    // insert at position 0 it inlines (-Wrestrict false positive, GCC bug 105329),
    // which -Werror makes fatal in the release build: append instead.
    for (int i = 0; i < 12; ++i)
        many.push_back(std::string("p").append(std::to_string(i)));
    Reading r = read_all(in_records(hello_message(spec({"a.example"}, many))));
    ASSERT_EQ(r.result.status, HelloStatus::Done);
    EXPECT_EQ(r.alpn.size(), kMaxAlpn);
    EXPECT_EQ(r.alpn.front(), "p0");
}

// Each bad hello and the answer the documentation promises (README, SNI section).
TEST(ClientHello, BadHellosAreMalformedWithTheirReason) {
    Bytes good = in_records(hello_message(spec({"a.example"}, {"h2"})));
    auto with = [&](std::size_t at, uint8_t value) {
        Bytes b = good;
        b[at] = static_cast<std::byte>(value);
        return b;
    };
    Bytes trailing = hello_message(spec({"a.example"}));
    trailing.push_back(std::byte{0}); // a byte past the message in its record
    Bytes ext_overrun = hello_message(spec({"a.example"}));
    ext_overrun[ext_overrun.size() - 14] = std::byte{0xff}; // the name list's length
    Bytes two_names = hello_message(spec({"a.example", "b.example"}));
    Bytes empty_alpn = hello_message(spec({"a.example"}, {""}));
    Bytes interleaved = in_records(hello_message(spec({"a.example"})), 50);
    interleaved[55] = std::byte{21}; // the second record is an alert
    Bytes empty_record = good;
    empty_record.insert(empty_record.begin(),
                        {std::byte{22}, std::byte{3}, std::byte{1}, std::byte{0}, std::byte{0}});
    struct Case {
        const char* what;
        Bytes bytes;
        HelloError error;
    };
    const std::vector<Case> cases = {
        {"record version 2.0", with(1, 2), HelloError::BadVersion},
        {"hello version 4.3", with(9, 4), HelloError::BadVersion},
        {"server hello", with(5, 2), HelloError::NotHello},
        {"record of 2^14 + 1", with(3, 0x40), HelloError::BadRecord},
        {"empty record", empty_record, HelloError::BadRecord},
        {"alert inside the hello", interleaved, HelloError::BadRecord},
        {"trailing byte", in_records(trailing), HelloError::BadLength},
        {"session id of 255", with(5 + 4 + 34, 0xff), HelloError::BadLength},
        {"name list past its extension", in_records(ext_overrun), HelloError::BadExtension},
        {"two host names", in_records(two_names), HelloError::BadExtension},
        {"empty alpn protocol", in_records(empty_alpn), HelloError::BadExtension},
        {"hello of 16 MiB", with(6, 0xff), HelloError::TooLarge},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.what);
        Reading r = read_all(c.bytes);
        EXPECT_EQ(r.result.status, HelloStatus::Malformed);
        EXPECT_EQ(r.result.error, c.error) << to_string(r.result.error);
    }
    // Truncated: never more than NeedMore, however much of it came (the caller ends it at
    // EOF or the inspect timeout).
    for (std::size_t n = 1; n < good.size(); ++n) {
        ClientHelloReader reader;
        std::vector<std::byte> scratch(kMaxClientHelloBytes);
        ASSERT_EQ(reader.update(std::span(good).first(n), scratch).status, HelloStatus::NeedMore)
            << n;
    }
    // Garbage after a handshake byte.
    Bytes garbage(300, std::byte{0xab});
    garbage[0] = std::byte{22};
    EXPECT_EQ(read_all(garbage).result.status, HelloStatus::Malformed);
}

} // namespace
} // namespace uringfwd::engine::tls
