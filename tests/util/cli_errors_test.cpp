// Errors of dtrain::CommandLine (include/dtrain/util/cli.hpp) not covered by tests/examples/cli_test.cpp: each
// names the flag and the rejected value.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include <dtrain/util/cli.hpp>

using Catch::Contains;

namespace {

struct Flags {
    double dropout = 0.5;
    std::string log = "run.csv";
    std::size_t batch = 64;
    std::uint16_t port = 80;
};

// Parses `args` (without the program name) into `f` with every flag declared.
void parse(const std::vector<std::string>& args, Flags& f) {
    dtrain::CommandLine cli("prog");
    cli.add("dropout", f.dropout, "drop rate").at_least(0.0).at_most(0.9);
    cli.add("log", f.log, "metrics CSV");
    cli.add("batch-size", f.batch, "batch size");
    cli.add("port", f.port, "port");
    std::vector<const char*> argv{"prog"};
    for (const auto& a : args)
        argv.push_back(a.c_str());
    cli.parse(int(argv.size()), argv.data());
}

}  // namespace

TEST_CASE("CommandLine: invalid option names are rejected when declared", "[util][cli][errors]") {
    dtrain::CommandLine cli("prog");
    int v = 0;
    CHECK_THROWS_WITH(cli.add("", v, "empty"), Contains("CommandLine::add: invalid option name ''"));
    CHECK_THROWS_WITH(cli.add("help", v, "reserved"),
                      Contains("CommandLine::add: invalid option name 'help'"));
    CHECK_NOTHROW(cli.add("helpful", v, "fine"));
}

TEST_CASE("CommandLine: values above at_most, empty strings and bad unsigned numbers",
          "[util][cli][errors]") {
    Flags f;
    CHECK_THROWS_WITH(parse({"--dropout", "0.95"}, f),
                      Contains("command line: --dropout must be at most 0.9, got 0.95"));
    CHECK_NOTHROW(parse({"--dropout", "0.9"}, f));
    CHECK(f.dropout == 0.9);

    CHECK_THROWS_WITH(parse({"--log", ""}, f), Contains("command line: --log needs a non-empty value"));
    CHECK_THROWS_WITH(parse({"--log="}, f), Contains("--log needs a non-empty value"));
    CHECK(f.log == "run.csv");

    CHECK_THROWS_WITH(parse({"--batch-size", "12x"}, f),
                      Contains("command line: --batch-size expects a non-negative integer, got '12x'"));
    CHECK_THROWS_WITH(parse({"--batch-size", "+3"}, f), Contains("expects a non-negative integer, got '+3'"));
    CHECK_THROWS_WITH(parse({"--batch-size", "18446744073709551616"}, f),  // 2^64: overflows strtoull
                      Contains("expects a non-negative integer, got '18446744073709551616'"));
    CHECK_THROWS_WITH(parse({"--port", "65536"}, f),
                      Contains("command line: --port value 65536 is out of range"));
    CHECK_NOTHROW(parse({"--port", "65535"}, f));
    CHECK(f.port == 65535);
}
