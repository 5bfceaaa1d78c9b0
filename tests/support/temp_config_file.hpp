// A configuration file written for one test and removed after it.
#pragma once

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <string>

namespace uringfwd::test {

class ConfigFile {
public:
    // `tag` tells apart two files of one test.
    explicit ConfigFile(const std::string& text, const std::string& tag = "")
        : path_(::testing::TempDir() + "uring-fwd-cli-" + std::to_string(::getpid()) + "-" +
                file_name_part(::testing::UnitTest::GetInstance()->current_test_info()->name()) +
                (tag.empty() ? "" : "-" + tag) + ".toml") {
        write(text);
    }
    ~ConfigFile() { ::unlink(path_.c_str()); }
    ConfigFile(const ConfigFile&) = delete;
    ConfigFile& operator=(const ConfigFile&) = delete;

    // Replaces the contents (for reload tests).
    void write(const std::string& text) const { std::ofstream(path_, std::ios::trunc) << text; }
    const std::string& path() const { return path_; }

private:
    // A parameterized test's name has a '/' ("Case/Param"), which a file name cannot.
    static std::string file_name_part(std::string name) {
        std::replace(name.begin(), name.end(), '/', '-');
        return name;
    }
    std::string path_;
};

} // namespace uringfwd::test
