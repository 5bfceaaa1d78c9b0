// engine_pch.hpp and CLI11 (header-only, the heaviest header the binary's files
// include), for the binary's own files (see engine_pch.hpp for what belongs here).
#include "engine_pch.hpp"

#include <CLI/CLI.hpp>
