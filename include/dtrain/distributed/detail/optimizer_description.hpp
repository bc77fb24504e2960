#pragma once

/// @file
/// An optimizer's describe() text as checkpoints store and compare it: its kind, its hyper-parameters and
/// the error that names the first hyper-parameter a checkpoint and an optimizer disagree on.

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include <dtrain/core/error.hpp>
#include <dtrain/optim/optimizer.hpp>

namespace dtrain {

namespace detail {

/// The optimizer's describe() (its kind and hyper-parameters), or "" when it has none.
template <class Opt>
std::string optimizer_description(const Opt& opt) {
    if constexpr (has_describe_v<Opt>)
        return opt.describe();
    else
        return std::string();
}

/// The kind of optimizer a description names: the text before '(' ("AdamW" of "AdamW(lr=...)").
inline std::string optimizer_kind(const std::string& description) {
    return description.substr(0, description.find('('));
}

/// The hyper-parameters of a description "Kind(a=1, b=2)": {"a=1", "b=2"}.
inline std::vector<std::string> optimizer_fields(const std::string& description) {
    std::vector<std::string> fields;
    const std::size_t open = description.find('('), close = description.rfind(')');
    if (open == std::string::npos || close == std::string::npos || close < open) return fields;
    std::size_t at = open + 1;
    while (at < close) {
        const std::size_t end = std::min(description.find(", ", at), close);
        fields.push_back(description.substr(at, end - at));
        at = end + (end == close ? 0 : 2);
        if (end == close) break;
    }
    return fields;
}

/// Throws dtrain::Error, naming `path` and the first differing hyper-parameter ("was written with
/// momentum=0.9, this optimizer has momentum=0.5"), unless the optimizer description stored in the file
/// (`stored`) equals this optimizer's (`mine`); an empty description (an optimizer without describe()) is
/// not compared.
inline void check_optimizer_description(const std::string& stored, const std::string& mine,
                                        const std::string& path) {
    if (stored.empty() || mine.empty() || stored == mine) return;
    DTRAIN_CHECK(optimizer_kind(stored) == optimizer_kind(mine), "load_checkpoint: '", path,
                 "' holds the state of ", stored, ", this optimizer is ", mine);
    const std::vector<std::string> a = optimizer_fields(stored), b = optimizer_fields(mine);
    std::string theirs = stored, ours = mine;
    for (std::size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
        if (i < a.size() && i < b.size() && a[i] == b[i]) continue;
        theirs = i < a.size() ? a[i] : "no " + b[i].substr(0, b[i].find('='));
        ours = i < b.size() ? b[i] : "no " + a[i].substr(0, a[i].find('='));
        break;
    }
    throw Error(concat("load_checkpoint: '", path, "' was written with ", theirs, ", this optimizer has ",
                       ours, " (the file holds the state of ", stored, ", this optimizer is ", mine,
                       "): build the optimizer with the checkpoint's hyper-parameters to resume exactly"));
}

}  // namespace detail

}  // namespace dtrain
