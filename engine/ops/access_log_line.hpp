// One access log line per closed connection, as text or JSON: pure formatting, so the
// exact output is unit-tested without an engine.
#pragma once

#include "uringfwd/observer.hpp"
#include "uringfwd/operations.hpp"

#include <chrono>
#include <string>

namespace uringfwd::ops {

// Appends the line for `record` (closed at `when`) to `out`, newline included.
//
// text: 2026-12-01T13:05:01.123456Z route=web client=192.0.2.7:50123
//       upstream=10.0.0.5:8080 to_upstream=517 to_client=14020 connect_us=210
//       duration_us=48211 reason=clean
//   (one line; `error=ECONNREFUSED` follows the reason when there is an errno; an
//   address unknown or empty is "-"; a route name or Unix path with a space, quote or
//   control character is written as a JSON string.)
// json: {"time":"2026-12-01T13:05:01.123456Z","route":"web","client":"192.0.2.7:50123",
//        "upstream":"10.0.0.5:8080","bytes_to_upstream":517,"bytes_to_client":14020,
//        "connect_us":210,"duration_us":48211,"reason":"clean","error":null}
//   (error: the errno's name, "ECONNREFUSED", or null; upstream null when none was
//   reached.)
void append_access_line(std::string& out, AccessLogFormat format, const ConnectionRecord& record,
                        std::chrono::system_clock::time_point when);

// `text` as a JSON string, quotes included (RFC 8259 §7: '"', '\' and control
// characters escaped; other bytes as they are).
void append_json_string(std::string& out, std::string_view text);

} // namespace uringfwd::ops
