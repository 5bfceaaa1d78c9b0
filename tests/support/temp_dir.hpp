// A directory of the test's own (mkdtemp under /tmp), removed with everything in it
// when the test ends: Unix listen paths of the tests live there, never under the real
// system's /run.
#pragma once

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>

namespace uringfwd::test {

class TempDir {
public:
    TempDir() {
        std::string name = "/tmp/uringfwd-test-XXXXXX";
        if (::mkdtemp(name.data()) == nullptr)
            throw std::runtime_error("mkdtemp failed");
        path_ = name;
    }
    ~TempDir() {
        std::error_code ignored;
        std::filesystem::remove_all(path_, ignored);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;

    const std::string& path() const { return path_; }
    std::string file(const std::string& name) const { return path_ + "/" + name; }
    // mkdtemp makes it 0700; another user's process needs to pass through it.
    void open_to_everyone() const { ::chmod(path_.c_str(), 0755); }

private:
    std::string path_;
};

} // namespace uringfwd::test
