#include "tests/support/sha256.hpp"

#include <openssl/evp.h>

#include <fmt/core.h>
#include <stdexcept>

namespace uringfwd::test {

void Sha256::CtxDeleter::operator()(evp_md_ctx_st* ctx) const {
    EVP_MD_CTX_free(ctx);
}

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
    if (!ctx_ || EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr) != 1) {
        throw std::runtime_error("EVP sha256 init failed");
    }
}

Sha256::~Sha256() = default;
Sha256::Sha256(Sha256&&) noexcept = default;
Sha256& Sha256::operator=(Sha256&&) noexcept = default;

void Sha256::update(std::span<const std::byte> data) {
    if (!data.empty() && EVP_DigestUpdate(ctx_.get(), data.data(), data.size()) != 1) {
        throw std::runtime_error("EVP sha256 update failed");
    }
}

std::string Sha256::hex_digest() {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    if (EVP_DigestFinal_ex(ctx_.get(), md, &len) != 1) {
        throw std::runtime_error("EVP sha256 final failed");
    }
    std::string out;
    out.reserve(len * 2);
    for (unsigned int i = 0; i < len; ++i) {
        out += fmt::format("{:02x}", md[i]);
    }
    return out;
}

} // namespace uringfwd::test
