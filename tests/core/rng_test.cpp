#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>
#include <vector>

#include <dtrain/core/rng.hpp>

TEST_CASE("Rng: equal seeds give equal streams, different seeds differ", "[core][rng]") {
    dtrain::Rng a(42), b(42), c(43);
    bool differs = false;
    for (int i = 0; i < 100; ++i) {
        const auto x = a();
        CHECK(x == b());
        differs = differs || x != c();
    }
    CHECK(differs);
}

TEST_CASE("Rng: uniform and normal have the right moments", "[core][rng]") {
    dtrain::Rng r(1);
    const int n = 200000;
    double su = 0, sn = 0, sn2 = 0;
    for (int i = 0; i < n; ++i) {
        const double u = r.uniform();
        CHECK((u >= 0.0 && u < 1.0));
        su += u;
        const double z = r.normal();
        sn += z;
        sn2 += z * z;
    }
    CHECK(su / n == Approx(0.5).margin(0.01));
    CHECK(sn / n == Approx(0.0).margin(0.01));
    CHECK(sn2 / n == Approx(1.0).margin(0.02));
}

TEST_CASE("Rng: below() is in range and shuffle is a seeded permutation", "[core][rng]") {
    dtrain::Rng r(5);
    for (int i = 0; i < 1000; ++i)
        CHECK(r.below(7) < 7u);
    std::vector<int> v(50), w;
    std::iota(v.begin(), v.end(), 0);
    w = v;
    dtrain::Rng s1(9), s2(9);
    dtrain::shuffle(v.begin(), v.end(), s1);
    dtrain::shuffle(w.begin(), w.end(), s2);
    CHECK(v == w);
    std::vector<int> sorted = v;
    std::sort(sorted.begin(), sorted.end());
    for (int i = 0; i < 50; ++i)
        CHECK(sorted[i] == i);
    CHECK(!std::is_sorted(v.begin(), v.end()));
}

TEST_CASE("Rng: state()/set_state() continue the stream exactly, including a cached normal draw",
          "[core][rng]") {
    dtrain::Rng a(7);
    for (int i = 0; i < 5; ++i)
        a();
    (void)a.normal();  // leaves the second Box-Muller value cached
    dtrain::Rng b(12345);
    b.set_state(a.state());
    CHECK(b.normal() == a.normal());  // the cached value
    for (int i = 0; i < 50; ++i) {
        CHECK(b() == a());
        CHECK(b.normal() == a.normal());
    }
    CHECK(b.state() == a.state());
}
