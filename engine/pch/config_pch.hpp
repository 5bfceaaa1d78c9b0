// engine_pch.hpp and toml++, which the configuration library's files parse besides it
// (see engine_pch.hpp for what belongs here).
#include "engine_pch.hpp"

#include <toml++/toml.h>
