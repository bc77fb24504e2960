// Tests of dtrain::CommandLine (include/dtrain/util/cli.hpp).
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include <dtrain/util/cli.hpp>

namespace {

struct Flags {
    int epochs = 10;
    double lr = 0.01;
    std::size_t batch = 64;
    std::uint64_t seed = 1;
    std::string comm = "collective";
    std::string log;
    bool synthetic = false;
};

// Declares the flags of `f` on `cli`.
void declare(dtrain::CommandLine& cli, Flags& f) {
    cli.add("epochs", f.epochs, "number of epochs").at_least(1);
    cli.add("lr", f.lr, "learning rate").at_least(0.0);
    cli.add("batch-size", f.batch, "batch size").at_least(1);
    cli.add("seed", f.seed, "seed");
    cli.add("comm", f.comm, "communicator").choices({"collective", "ring", "naive", "async"});
    cli.add("log", f.log, "metrics CSV").metavar("PATH");
    cli.add("synthetic", f.synthetic, "random data");
}

// Parses `args` (without the program name) into fresh flags; returns parse()'s result.
bool run(const std::vector<std::string>& args, Flags& f) {
    dtrain::CommandLine cli("prog", "A test program.");
    declare(cli, f);
    std::vector<const char*> argv{"prog"};
    for (const auto& a : args)
        argv.push_back(a.c_str());
    return cli.parse(int(argv.size()), argv.data());
}

// The message of the dtrain::Error parsing `args` throws, or "" when it does not throw.
std::string error_of(const std::vector<std::string>& args) {
    Flags f;
    try {
        run(args, f);
    } catch (const dtrain::Error& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST_CASE("CommandLine: defaults stay when no flags are given", "[util][cli]") {
    Flags f;
    CHECK(run({}, f));
    CHECK(f.epochs == 10);
    CHECK(f.lr == 0.01);
    CHECK(f.comm == "collective");
    CHECK_FALSE(f.synthetic);
}

TEST_CASE("CommandLine: values in both spellings, switches and types", "[util][cli]") {
    Flags f;
    CHECK(run({"--epochs", "3", "--lr=0.5", "--batch-size", "128", "--seed", "18446744073709551615", "--comm",
               "ring", "--synthetic", "--log", "m.csv"},
              f));
    CHECK(f.epochs == 3);
    CHECK(f.lr == 0.5);
    CHECK(f.batch == 128);
    CHECK(f.seed == 18446744073709551615ull);
    CHECK(f.comm == "ring");
    CHECK(f.synthetic);
    CHECK(f.log == "m.csv");
    Flags g;
    CHECK(run({"--synthetic=false", "--lr", "1e-3"}, g));
    CHECK_FALSE(g.synthetic);
    CHECK(g.lr == Approx(1e-3));
}

TEST_CASE("CommandLine: --help stops parsing and usage lists every option", "[util][cli]") {
    Flags f;
    CHECK_FALSE(run({"--epochs", "2", "--help"}, f));
    CHECK_FALSE(run({"-h"}, f));
    Flags fresh;
    dtrain::CommandLine cli("prog", "A test program.");
    declare(cli, fresh);
    const std::string u = cli.usage();
    CHECK(u.find("usage: prog") != std::string::npos);
    CHECK(u.find("--batch-size N") != std::string::npos);
    CHECK(u.find("collective|ring|naive|async") != std::string::npos);
    CHECK(u.find("--log PATH") != std::string::npos);
    CHECK(u.find("(default: 10)") != std::string::npos);
}

TEST_CASE("CommandLine: clear errors for bad input", "[util][cli]") {
    CHECK(error_of({"--epoch", "3"}).find("unknown option --epoch (did you mean --epochs?)") !=
          std::string::npos);
    CHECK(error_of({"--bogus"}).find("unknown option --bogus") != std::string::npos);
    CHECK(error_of({"--epochs", "3x"}).find("--epochs expects an integer, got '3x'") != std::string::npos);
    CHECK(error_of({"--epochs", ""}).find("--epochs expects an integer") != std::string::npos);
    CHECK(error_of({"--epochs", "0"}).find("--epochs must be at least 1") != std::string::npos);
    CHECK(error_of({"--lr", "fast"}).find("--lr expects a number, got 'fast'") != std::string::npos);
    CHECK(error_of({"--lr", "nan"}).find("--lr expects a number") != std::string::npos);
    CHECK(error_of({"--lr", "-1"}).find("--lr must be at least 0") != std::string::npos);
    CHECK(error_of({"--batch-size", "-4"}).find("--batch-size must not be negative") != std::string::npos);
    CHECK(error_of({"--epochs", "99999999999"}).find("out of range") != std::string::npos);
    CHECK(
        error_of({"--comm", "tree"}).find("--comm must be one of collective|ring|naive|async, got 'tree'") !=
        std::string::npos);
    CHECK(error_of({"--epochs"}).find("--epochs needs a value") != std::string::npos);
    CHECK(error_of({"epochs"}).find("unexpected argument 'epochs'") != std::string::npos);
    CHECK(error_of({"--synthetic=maybe"}).find("expects true or false") != std::string::npos);
    CHECK(error_of({"--epochs", "4"}).empty());
}

TEST_CASE("CommandLine: declaring an option twice throws", "[util][cli]") {
    dtrain::CommandLine cli("prog");
    int a = 0;
    cli.add("a", a, "first");
    CHECK_THROWS_AS(cli.add("a", a, "again"), dtrain::Error);
}

TEST_CASE("CommandLine: given() reports flags that appeared", "[util][cli]") {
    dtrain::CommandLine cli("prog");
    int a = 0, b = 0;
    cli.add("a", a, "first");
    cli.add("b", b, "second");
    const char* argv[] = {"prog", "--b", "2"};
    CHECK(cli.parse(3, argv));
    CHECK(cli.given("b"));
    CHECK_FALSE(cli.given("a"));
}
