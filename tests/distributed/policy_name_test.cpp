// Tests of dtrain::with_policy, PolicyTag and policy_names (include/dtrain/distributed/policy_name.hpp).
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <typeindex>
#include <typeinfo>
#include <vector>

#include <dtrain/distributed/policy_name.hpp>

using Catch::Contains;

namespace {

// The type with_policy() chose for `name`.
std::type_index chosen(const std::string& name) {
    return dtrain::with_policy(name, [](auto tag) {
        using Policy = typename decltype(tag)::type;
        return std::type_index(typeid(Policy));
    });
}

}  // namespace

TEST_CASE("with_policy: each name dispatches to its policy type", "[dist][policy_name]") {
    CHECK(chosen("collective") == std::type_index(typeid(dtrain::Collective)));
    CHECK(chosen("ring") == std::type_index(typeid(dtrain::Ring)));
    CHECK(chosen("naive") == std::type_index(typeid(dtrain::Naive)));
    CHECK(chosen("async") == std::type_index(typeid(dtrain::Async)));
}

TEST_CASE("policy_names lists exactly the names with_policy accepts", "[dist][policy_name]") {
    const std::vector<std::string> expected = {"collective", "ring", "naive", "async"};
    CHECK(dtrain::policy_names() == expected);
    std::vector<std::type_index> types;
    for (const auto& n : dtrain::policy_names())
        types.push_back(chosen(n));
    for (std::size_t i = 0; i < types.size(); ++i)
        for (std::size_t j = i + 1; j < types.size(); ++j)
            CHECK(types[i] != types[j]);
}

TEST_CASE("with_policy: an unknown name throws with the valid names and does not call fn",
          "[dist][policy_name]") {
    for (const std::string bad : {"Ring", "", "mpi", "collective "}) {
        INFO("name '" << bad << "'");
        bool called = false;
        auto fn = [&](auto) { called = true; };
        CHECK_THROWS_WITH(dtrain::with_policy(bad, fn),
                          Contains("unknown communicator policy '" + bad + "'") &&
                              Contains("(valid: collective, ring, naive, async)"));
        CHECK_FALSE(called);
    }
}

TEST_CASE("with_policy: returns fn's result, also a move-only one, and accepts void", "[dist][policy_name]") {
    auto p = dtrain::with_policy("naive", [](auto) { return std::make_unique<int>(7); });
    REQUIRE(p != nullptr);
    CHECK(*p == 7);
    int calls = 0;
    dtrain::with_policy(std::string("async"), [&](auto) { ++calls; });
    CHECK(calls == 1);
}
