// without_io_uring ERRNO PROGRAM [ARGS...]
// without_io_uring --register OPCODE ERRNO PROGRAM [ARGS...]
// Runs PROGRAM with io_uring_setup(2) failing with ERRNO (a number, e.g. 1 for EPERM,
// 38 for ENOSYS), the way a container runtime's seccomp profile or
// kernel.io_uring_disabled makes it fail. Lets a test check what uring-fwd says then.
// With --register, only io_uring_register(2) with that opcode fails, the way an older
// kernel refuses a registration it does not know (e.g. 22, IORING_REGISTER_PBUF_RING,
// before 5.19, with 22 = EINVAL).
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>

int main(int argc, char** argv) {
    bool register_only = argc > 1 && std::strcmp(argv[1], "--register") == 0;
    int first = register_only ? 3 : 1; // index of ERRNO
    if (argc < first + 2) {
        std::fprintf(stderr, "usage: %s [--register OPCODE] ERRNO PROGRAM [ARGS...]\n", argv[0]);
        return 2;
    }
    unsigned opcode = register_only ? static_cast<unsigned>(std::atoi(argv[2])) : 0;
    unsigned err = static_cast<unsigned>(std::atoi(argv[first]));
    unsigned syscall_nr = register_only ? __NR_io_uring_register : __NR_io_uring_setup;
    // The low half of the second argument (x86-64 is little endian): the opcode.
    constexpr unsigned kArg1 = offsetof(seccomp_data, args) + sizeof(__u64);
    sock_filter filter[] = {
        // Only judge x86-64 system calls; anything else is allowed untouched.
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 0, 5),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, syscall_nr, 0, 3),
        // io_uring_setup: always; io_uring_register: only with the opcode.
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, kArg1),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, opcode, 0, static_cast<__u8>(register_only ? 1 : 0)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (err & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    sock_fprog program{static_cast<unsigned short>(sizeof(filter) / sizeof(filter[0])), filter};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0) {
        std::perror("seccomp");
        return 2;
    }
    execv(argv[first + 1], argv + first + 1);
    std::perror("execv");
    return 2;
}
