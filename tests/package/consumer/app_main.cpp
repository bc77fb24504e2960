// An outside program using the application helpers through dtrain::app alone (which brings dtrain::dtrain):
// rank 0 writes a metrics CSV to argv[1] and reads it back, and a progress bar renders its line.
#include <dtrain/app.hpp>
#include <dtrain/core/environment.hpp>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

int main(int argc, char** argv) {
    dtrain::Environment env(argc, argv);
    if (argc < 2) return 2;
    bool ok = true;
    {
        dtrain::CsvLog log(argv[1], {"epoch", "loss"}, env.rank() == 0);
        log.row({1, 0.5});
    }
    if (env.rank() == 0) {
        std::ifstream in(argv[1]);
        const std::string csv((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        ok = csv == "epoch,loss\n1,0.5\n";
        std::ostringstream os;
        dtrain::ProgressBar bar(os, true);
        bar.start(1, 2, 4);
        const std::string line = bar.render(2, 0.5, 0.75, 64, 1.0);
        ok = ok && line.find("epoch 1/2") != std::string::npos && line.find("batch 2/4") != std::string::npos;
        std::printf("app_consumer: csv %s, progress '%s'\n", ok ? "ok" : "WRONG", line.c_str());
    }
    return ok ? 0 : 1;
}
