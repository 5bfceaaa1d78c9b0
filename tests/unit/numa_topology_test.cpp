// read_numa_topology against fake sysfs trees built in a temporary directory, so every
// layout can be tested on any machine.
#include "uringfwd/numa_topology.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

namespace uringfwd {
namespace {

namespace fs = std::filesystem;

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// A throwaway sysfs root, removed when the test ends.
class FakeSysfs {
public:
    FakeSysfs() {
        std::string pattern = (fs::temp_directory_path() / "uringfwd-sysfs-XXXXXX").string();
        if (mkdtemp(pattern.data()) == nullptr) {
            throw std::runtime_error("mkdtemp failed");
        }
        root_ = pattern;
    }
    ~FakeSysfs() {
        std::error_code ec;
        fs::remove_all(root_, ec);
    }
    FakeSysfs(const FakeSysfs&) = delete;
    FakeSysfs& operator=(const FakeSysfs&) = delete;

    // Writes `content` to root/relative, creating the directories on the way.
    void write(const std::string& relative, const std::string& content) const {
        const fs::path path = root_ / relative;
        fs::create_directories(path.parent_path());
        std::ofstream(path) << content;
    }
    void online(const std::string& list) const { write("cpu/online", list + "\n"); }
    void node(int id, const std::string& list) const {
        write("node/node" + std::to_string(id) + "/cpulist", list + "\n");
    }
    std::string root() const { return root_.string(); }

private:
    fs::path root_;
};

TEST(NumaTopology, OneNode) {
    FakeSysfs sys;
    sys.online("0-3");
    sys.node(0, "0-3");
    const NumaTopology t = read_numa_topology(sys.root());
    ASSERT_EQ(t.node_cpus.size(), 1u);
    EXPECT_THAT(t.node_cpus[0], ElementsAre(0, 1, 2, 3));
    EXPECT_EQ(t.node_of_cpu(2), 0);
    EXPECT_EQ(t.node_of_cpu(4), -1);
}

TEST(NumaTopology, TwoInterleavedNodes) {
    FakeSysfs sys;
    sys.online("0-15");
    sys.node(0, "0-3,8-11");
    sys.node(1, "4-7,12-15");
    // Non-node entries that real sysfs keeps beside the node directories.
    sys.write("node/online", "0-1\n");
    sys.write("node/possible", "0-1\n");
    sys.write("node/power/async", "disabled\n");
    const NumaTopology t = read_numa_topology(sys.root());
    ASSERT_EQ(t.node_cpus.size(), 2u);
    EXPECT_THAT(t.node_cpus[0], ElementsAre(0, 1, 2, 3, 8, 9, 10, 11));
    EXPECT_THAT(t.node_cpus[1], ElementsAre(4, 5, 6, 7, 12, 13, 14, 15));
    EXPECT_EQ(t.node_of_cpu(9), 0);
    EXPECT_EQ(t.node_of_cpu(12), 1);
    EXPECT_THAT(t.cpus_of_nodes({1}), ElementsAre(4, 5, 6, 7, 12, 13, 14, 15));
    EXPECT_EQ(t.cpus_of_nodes({1, 0, 1}).size(), 16u);
    EXPECT_THAT(t.cpus_of_nodes({}), IsEmpty());
}

TEST(NumaTopology, OfflineCpusExcluded) {
    FakeSysfs sys;
    sys.online("0-2,5-7");
    sys.node(0, "0-3");
    sys.node(1, "4-7");
    const NumaTopology t = read_numa_topology(sys.root());
    EXPECT_THAT(t.node_cpus[0], ElementsAre(0, 1, 2));
    EXPECT_THAT(t.node_cpus[1], ElementsAre(5, 6, 7));
    EXPECT_EQ(t.node_of_cpu(3), -1);
    EXPECT_EQ(t.node_of_cpu(4), -1);
}

TEST(NumaTopology, RangesWithHolesAndSparseNodeIds) {
    FakeSysfs sys;
    sys.online("0,2,4-6,9-10");
    sys.node(0, "0,2");
    sys.node(2, "4-6,9-10");
    // A memory-only node: present, but without CPUs.
    sys.node(3, "");
    const NumaTopology t = read_numa_topology(sys.root());
    ASSERT_EQ(t.node_cpus.size(), 4u);
    EXPECT_THAT(t.node_cpus[0], ElementsAre(0, 2));
    EXPECT_THAT(t.node_cpus[1], IsEmpty());
    EXPECT_THAT(t.node_cpus[2], ElementsAre(4, 5, 6, 9, 10));
    EXPECT_THAT(t.node_cpus[3], IsEmpty());
    EXPECT_EQ(t.node_of_cpu(10), 2);
    EXPECT_THAT(t.cpus_of_nodes({1, 3}), IsEmpty());
}

TEST(NumaTopology, MissingNodeDirectoryMeansOneNode) {
    FakeSysfs sys;
    sys.online("0-1,3");
    const NumaTopology t = read_numa_topology(sys.root());
    ASSERT_EQ(t.node_cpus.size(), 1u);
    EXPECT_THAT(t.node_cpus[0], ElementsAre(0, 1, 3));
    EXPECT_EQ(t.node_of_cpu(3), 0);
}

TEST(NumaTopology, EmptyNodeDirectoryMeansOneNode) {
    FakeSysfs sys;
    sys.online("0-1");
    sys.write("node/possible", "0\n");
    const NumaTopology t = read_numa_topology(sys.root());
    ASSERT_EQ(t.node_cpus.size(), 1u);
    EXPECT_THAT(t.node_cpus[0], ElementsAre(0, 1));
}

TEST(NumaTopology, UnknownNodeRejected) {
    const NumaTopology t{{{0, 1}, {2, 3}}};
    EXPECT_THROW((void)t.cpus_of_nodes({2}), std::invalid_argument);
    EXPECT_THROW((void)t.cpus_of_nodes({-1}), std::invalid_argument);
}

TEST(NumaTopology, MissingOnlineFileIsAnError) {
    FakeSysfs sys;
    sys.node(0, "0-3");
    EXPECT_THROW((void)read_numa_topology(sys.root()), std::runtime_error);
}

TEST(NumaTopology, MissingNodeCpulistIsAnError) {
    FakeSysfs sys;
    sys.online("0-3");
    sys.write("node/node0/meminfo", "");
    EXPECT_THROW((void)read_numa_topology(sys.root()), std::runtime_error);
}

TEST(NumaTopology, MalformedCpulistNamesTheFile) {
    FakeSysfs sys;
    sys.online("0-3");
    sys.node(0, "3-0");
    try {
        (void)read_numa_topology(sys.root());
        FAIL() << "expected std::invalid_argument";
    } catch (const std::invalid_argument& e) {
        EXPECT_THAT(e.what(), ::testing::HasSubstr("node0/cpulist"));
    }
}

TEST(NumaTopology, ThisMachineIsConsistent) {
    // Whatever the host looks like, each listed CPU must map back to the node listing it.
    if (!fs::exists("/sys/devices/system/cpu/online")) {
        GTEST_SKIP() << "no sysfs";
    }
    const NumaTopology t = read_numa_topology();
    ASSERT_FALSE(t.node_cpus.empty());
    for (std::size_t node = 0; node < t.node_cpus.size(); ++node) {
        for (const int cpu : t.node_cpus[node]) {
            EXPECT_EQ(t.node_of_cpu(cpu), static_cast<int>(node)) << cpu;
        }
    }
}

} // namespace
} // namespace uringfwd
