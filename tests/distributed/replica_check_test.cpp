// detail::pack_facts / unpack_facts (no MPI traffic): a round trip keeps every fact, and a damaged or crafted
// text (as a file with a valid checksum can hold) is a dtrain::Error, never an endless loop.
#include <catch2/catch.hpp>

#include <string>

#include <dtrain/core/error.hpp>
#include <dtrain/distributed/detail/replica_check.hpp>

using dtrain::detail::pack_facts;
using dtrain::detail::ReplicaFacts;
using dtrain::detail::unpack_facts;

TEST_CASE("unpack_facts reverses pack_facts") {
    const ReplicaFacts facts{{"layers", "layer 0", "Dense(4, 8)"}, {"options", "lr", ""}, {"", "", "x"}};
    const ReplicaFacts back = unpack_facts(pack_facts(facts));
    REQUIRE(back.size() == facts.size());
    for (std::size_t i = 0; i < facts.size(); ++i) {
        CHECK(back[i].part == facts[i].part);
        CHECK(back[i].key == facts[i].key);
        CHECK(back[i].value == facts[i].value);
    }
    CHECK(unpack_facts("").empty());
}

TEST_CASE("unpack_facts rejects a text that is not of pack_facts' form") {
    const std::string good = pack_facts({{"layers", "layer 0", "Dense(4, 8)"}});
    // No final record separator (this looped forever, allocating), a missing field, no separators at all.
    for (const std::string& bad : {good.substr(0, good.size() - 1),
                                   std::string("layers\x1f"
                                               "Dense\x1e"),
                                   std::string("garbage"), good + "tail"}) {
        INFO("text of " << bad.size() << " bytes");
        CHECK_THROWS_WITH(unpack_facts(bad), Catch::Contains("the layers' description is malformed"));
    }
}
