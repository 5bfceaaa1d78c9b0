// quote_input() is public (uringfwd/messages.hpp): the binary quotes its flags as the
// configuration file's parser quotes its values.
#pragma once

#include "uringfwd/messages.hpp"
