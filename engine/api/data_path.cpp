#include "uringfwd/config.hpp"

namespace uringfwd {

std::string_view to_string(DataPath path) {
    switch (path) {
    case DataPath::Splice:
        return "splice";
    case DataPath::Copy:
        return "copy";
    case DataPath::Auto:
        return "auto";
    }
    return "?";
}

std::optional<DataPath> parse_data_path(std::string_view text) {
    for (DataPath p : {DataPath::Splice, DataPath::Copy, DataPath::Auto})
        if (text == to_string(p))
            return p;
    return std::nullopt;
}

std::string_view to_string(SpliceMechanism mechanism) {
    switch (mechanism) {
    case SpliceMechanism::Auto:
        return "auto";
    case SpliceMechanism::Ring:
        return "ring";
    case SpliceMechanism::Inline:
        return "inline";
    }
    return "?";
}

std::optional<SpliceMechanism> parse_splice_mechanism(std::string_view text) {
    for (SpliceMechanism m :
         {SpliceMechanism::Auto, SpliceMechanism::Ring, SpliceMechanism::Inline})
        if (text == to_string(m))
            return m;
    return std::nullopt;
}

std::string_view to_string(DirectDescriptors mode) {
    switch (mode) {
    case DirectDescriptors::Auto:
        return "auto";
    case DirectDescriptors::On:
        return "on";
    case DirectDescriptors::Off:
        return "off";
    }
    return "?";
}

std::optional<DirectDescriptors> parse_direct_descriptors(std::string_view text) {
    for (DirectDescriptors m :
         {DirectDescriptors::Auto, DirectDescriptors::On, DirectDescriptors::Off})
        if (text == to_string(m))
            return m;
    return std::nullopt;
}

} // namespace uringfwd
