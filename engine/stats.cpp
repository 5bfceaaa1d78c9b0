#include "uringfwd/stats.hpp"

#include <fmt/format.h>

namespace uringfwd {

EngineStats& EngineStats::operator+=(const EngineStats& o) {
    accepted += o.accepted;
    active += o.active;
    upstream_failures += o.upstream_failures;
    bytes_to_upstream += o.bytes_to_upstream;
    bytes_to_client += o.bytes_to_client;
    splices += o.splices;
    short_splices += o.short_splices;
    eagains += o.eagains;
    enters += o.enters;
    completions += o.completions;
    pipes_created += o.pipes_created;
    pipes_leased += o.pipes_leased;
    pipes_closed_dirty += o.pipes_closed_dirty;
    pipe_size_reductions += o.pipe_size_reductions;
    pipe_waits += o.pipe_waits;
    accept_backoffs += o.accept_backoffs;
    copy_receives += o.copy_receives;
    copy_sends += o.copy_sends;
    buffers_out += o.buffers_out;
    buffer_waits += o.buffer_waits;
    switches_to_splice += o.switches_to_splice;
    switches_to_copy += o.switches_to_copy;
    iowq_threads += o.iowq_threads;
    return *this;
}

std::string EngineStats::to_line() const {
    return fmt::format(
        "accepted={} active={} upstream_failures={} bytes_to_upstream={} bytes_to_client={} "
        "splices={} short_splices={} eagains={} enters={} cqes_per_enter={:.2f} "
        "pipes_created={} pipes_leased={} pipes_closed_dirty={} pipe_size_reductions={} "
        "pipe_waits={} accept_backoffs={} copy_receives={} copy_sends={} buffers_out={} "
        "buffer_waits={} switches_to_splice={} switches_to_copy={} iowq_threads={}",
        accepted, active, upstream_failures, bytes_to_upstream, bytes_to_client, splices,
        short_splices, eagains, enters, completions_per_enter(), pipes_created, pipes_leased,
        pipes_closed_dirty, pipe_size_reductions, pipe_waits, accept_backoffs, copy_receives,
        copy_sends, buffers_out, buffer_waits, switches_to_splice, switches_to_copy, iowq_threads);
}

} // namespace uringfwd
