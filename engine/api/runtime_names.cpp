// The names of runtime.hpp's states and of a route's on_member_down, as the control
// socket, the configuration file and Engine::members() write them.
#include "uringfwd/route.hpp"
#include "uringfwd/runtime.hpp"

namespace uringfwd {

namespace {

// The value of `all` whose name is `text`.
template <typename T, std::size_t N>
std::optional<T> parse_among(std::string_view text, const T (&all)[N]) {
    for (T each : all)
        if (text == to_string(each))
            return each;
    return std::nullopt;
}

} // namespace

std::string_view to_string(MemberState state) {
    switch (state) {
    case MemberState::Ready:
        return "ready";
    case MemberState::Drain:
        return "drain";
    case MemberState::Maint:
        return "maint";
    }
    return "?";
}

std::optional<MemberState> parse_member_state(std::string_view text) {
    static constexpr MemberState all[] = {MemberState::Ready, MemberState::Drain,
                                          MemberState::Maint};
    return parse_among(text, all);
}

std::string_view to_string(MemberHealthState health) {
    switch (health) {
    case MemberHealthState::Up:
        return "up";
    case MemberHealthState::Down:
        return "down";
    case MemberHealthState::Unchecked:
        return "unchecked";
    }
    return "?";
}

std::string_view to_string(OnMemberDown what) {
    switch (what) {
    case OnMemberDown::Keep:
        return "keep";
    case OnMemberDown::Close:
        return "close";
    }
    return "?";
}

std::optional<OnMemberDown> parse_on_member_down(std::string_view text) {
    static constexpr OnMemberDown all[] = {OnMemberDown::Keep, OnMemberDown::Close};
    return parse_among(text, all);
}

} // namespace uringfwd
