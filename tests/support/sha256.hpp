// Streaming SHA-256 (OpenSSL EVP) so multi-megabyte transfers are verified without
// keeping them in memory.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>

struct evp_md_ctx_st;

namespace uringfwd::test {

class Sha256 {
public:
    Sha256();
    ~Sha256();
    Sha256(Sha256&&) noexcept;
    Sha256& operator=(Sha256&&) noexcept;
    Sha256(const Sha256&) = delete;
    Sha256& operator=(const Sha256&) = delete;

    void update(std::span<const std::byte> data);
    // Lowercase hex. Finishes the hash: call once.
    std::string hex_digest();

private:
    struct CtxDeleter {
        void operator()(evp_md_ctx_st* ctx) const;
    };
    std::unique_ptr<evp_md_ctx_st, CtxDeleter> ctx_;
};

} // namespace uringfwd::test
