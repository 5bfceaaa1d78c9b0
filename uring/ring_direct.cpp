// The registered (direct) file table: registering it, checking that this kernel has
// every operation direct descriptors need, and the operations that create, change
// and close sockets in it.
#include "uring/ring.hpp"
#include "uring/ring_state.hpp"

#include <fmt/format.h>
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <unistd.h>

#include <cstring>

namespace uringfwd::uring {

namespace {

// Debian's liburing 2.3 and its 6.1 kernel headers predate socket commands
// (io_uring_prep_cmd_sock came with liburing 2.5): the values are the kernel's
// (include/uapi/linux/io_uring.h, enum { SOCKET_URING_OP_SIOCINQ = 0, SIOCOUTQ,
// GETSOCKOPT, SETSOCKOPT }, 6.7). The SQE fields the command reads
// (io_uring/cmd_net.c io_uring_cmd_setsockopt: level, optname, optval, optlen) share
// their storage with addr (level | optname << 32), addr3 (optval) and file_index
// (optlen) in liburing 2.3's struct.
constexpr uint32_t kSocketUringOpSetsockopt = 3;
// IORING_OP_FIXED_FD_INSTALL (6.8) is 54 in the kernel's enum io_uring_op, after
// IORING_OP_FUTEX_WAITV; liburing 2.3's enum ends before it.
constexpr uint8_t kOpFixedFdInstall = 54;

void set_target_slot_alloc(io_uring_sqe* sqe) {
    // IORING_FILE_INDEX_ALLOC: the kernel picks a free slot and returns it as the
    // result, or -ENFILE when none is free (io_uring/filetable.c io_file_bitmap_get).
    sqe->file_index = IORING_FILE_INDEX_ALLOC;
}

constexpr uint64_t kProbeTag = ~uint64_t{0};

} // namespace

int Ring::register_file_table(unsigned slots) {
    int rc = io_uring_register_files_sparse(&state_->ring, slots);
    if (rc == 0)
        file_table_slots_ = slots;
    return rc;
}

void Ring::accept_direct(FileRef listen_fd, sockaddr* addr, socklen_t* len, uint64_t user_data) {
    io_uring_sqe* sqe = next_sqe();
    io_uring_prep_accept(sqe, listen_fd.index, addr, len, SOCK_NONBLOCK);
    if (listen_fd.fixed)
        sqe->flags |= IOSQE_FIXED_FILE;
    set_target_slot_alloc(sqe);
    io_uring_sqe_set_data64(sqe, user_data);
}

void Ring::socket_direct(int domain, int type, int protocol, uint64_t user_data) {
    io_uring_sqe* sqe = next_sqe();
    // No SOCK_CLOEXEC: with a slot it is -EINVAL (io_uring/net.c io_socket_prep).
    io_uring_prep_socket(sqe, domain, type | SOCK_NONBLOCK, protocol, 0);
    set_target_slot_alloc(sqe);
    io_uring_sqe_set_data64(sqe, user_data);
}

void Ring::setsockopt(FileRef fd, int level, int optname, const void* value, int len,
                      uint64_t user_data, Link link) {
    io_uring_sqe* sqe = next_sqe();
    io_uring_prep_rw(IORING_OP_URING_CMD, sqe, fd.index, nullptr, 0, 0);
    if (fd.fixed)
        sqe->flags |= IOSQE_FIXED_FILE;
    sqe->cmd_op = kSocketUringOpSetsockopt;
    sqe->addr = static_cast<uint32_t>(level) | static_cast<uint64_t>(static_cast<uint32_t>(optname))
                                                   << 32;
    sqe->addr3 = reinterpret_cast<uintptr_t>(value);
    sqe->file_index = static_cast<uint32_t>(len);
    io_uring_sqe_set_data64(sqe, user_data);
    if (link == Link::Soft)
        sqe->flags |= IOSQE_IO_LINK;
    else if (link == Link::Hard)
        sqe->flags |= IOSQE_IO_HARDLINK;
}

void Ring::shutdown(FileRef fd, int how, uint64_t user_data) {
    io_uring_sqe* sqe = next_sqe();
    io_uring_prep_shutdown(sqe, fd.index, how);
    if (fd.fixed)
        sqe->flags |= IOSQE_FIXED_FILE;
    io_uring_sqe_set_data64(sqe, user_data);
}

void Ring::install_fd(unsigned slot, uint64_t user_data) {
    io_uring_sqe* sqe = next_sqe();
    io_uring_prep_rw(kOpFixedFdInstall, sqe, static_cast<int>(slot), nullptr, 0, 0);
    // The file must be named as a slot (io_install_fixed_fd_prep: -EBADF otherwise);
    // install_fd_flags 0 keeps O_CLOEXEC on the new fd.
    sqe->flags |= IOSQE_FIXED_FILE;
    io_uring_sqe_set_data64(sqe, user_data);
}

void Ring::move_into_slots(int* fds, unsigned count, uint64_t user_data) {
    io_uring_sqe* sqe = next_sqe();
    // liburing's offset is an int; the kernel reads it as the u32 IORING_FILE_INDEX_ALLOC.
    io_uring_prep_files_update(sqe, fds, count, static_cast<int>(IORING_FILE_INDEX_ALLOC));
    io_uring_sqe_set_data64(sqe, user_data);
}

void Ring::close_direct(unsigned slot, uint64_t user_data) {
    io_uring_sqe* sqe = next_sqe();
    io_uring_prep_close_direct(sqe, slot);
    io_uring_sqe_set_data64(sqe, user_data);
}

std::string Ring::probe_direct() {
    if (file_table_slots_ == 0)
        return "no registered file table";
    auto run_one = [this](const char* what) -> std::pair<int, std::string> {
        for (;;) {
            for (const Completion& c : submit_and_wait(1))
                if (c.user_data == kProbeTag)
                    return {c.result, c.result < 0
                                          ? fmt::format("{}: {}", what, std::strerror(-c.result))
                                          : std::string()};
        }
    };
    socket_direct(AF_INET, SOCK_STREAM, 0, kProbeTag);
    auto [slot, socket_error] = run_one("IORING_OP_SOCKET into a kernel-picked slot (5.19)");
    if (slot < 0)
        return socket_error;
    static const int kOne = 1;
    setsockopt(FileRef::direct(slot), IPPROTO_TCP, TCP_NODELAY, &kOne, sizeof(kOne), kProbeTag);
    auto [opt_rc, opt_error] =
        run_one("setsockopt through IORING_OP_URING_CMD (SOCKET_URING_OP_SETSOCKOPT, 6.7)");
    install_fd(static_cast<unsigned>(slot), kProbeTag);
    auto [installed, install_error] =
        run_one("IORING_OP_FIXED_FD_INSTALL (6.8), for shutdown(2) without io-wq");
    if (installed >= 0)
        ::close(installed);
    close_direct(static_cast<unsigned>(slot), kProbeTag);
    auto [close_rc, close_error] = run_one("IORING_OP_CLOSE of a slot (5.15)");
    if (opt_rc < 0)
        return opt_error;
    if (installed < 0)
        return install_error;
    if (close_rc < 0)
        return close_error;
    return {};
}

} // namespace uringfwd::uring
