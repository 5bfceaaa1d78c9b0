// without_io_uring ERRNO PROGRAM [ARGS...]
// Runs PROGRAM with io_uring_setup(2) failing with ERRNO (a number, e.g. 1 for EPERM,
// 38 for ENOSYS), the way a container runtime's seccomp profile or
// kernel.io_uring_disabled makes it fail. Lets a test check what uring-fwd says then.
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: %s ERRNO PROGRAM [ARGS...]\n", argv[0]);
        return 2;
    }
    unsigned err = static_cast<unsigned>(std::atoi(argv[1]));
    sock_filter filter[] = {
        // Only judge x86-64 system calls; anything else is allowed untouched.
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 0, 3),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (err & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    sock_fprog program{static_cast<unsigned short>(sizeof(filter) / sizeof(filter[0])), filter};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0) {
        std::perror("seccomp");
        return 2;
    }
    execv(argv[2], argv + 2);
    std::perror("execv");
    return 2;
}
