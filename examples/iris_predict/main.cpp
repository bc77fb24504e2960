// iris_predict: inference with a model iris_mlp trained and saved, without any optimizer.
//
//   mpiexec.mpich -n 2 ./iris_mlp --save-model iris.model
//   ./iris_predict --model iris.model                      # predicts every row of the Iris table
//   ./iris_predict --model iris.model --data flowers.csv   # rows of 4 features, with or without species
//
// It reads the file's extras (dtrain::read_model_extras) to rebuild the 4-30-20-3 network with the activation
// the file names, loads the parameters with
// dtrain::load_model (which rejects a file of another network, naming the first differing layer),
// standardises the features with the training split's statistics kept in the file, and prints the predicted
// species of the first rows and, when the file has a species column, the accuracy over all rows.
#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <dtrain/dtrain.hpp>

#include "../common/command_line.hpp"
#include "../common/iris_network.hpp"

#ifndef DTRAIN_IRIS_CSV
#define DTRAIN_IRIS_CSV "data/iris.csv"
#endif

namespace {

// The lines of `text` (the class names iris_mlp wrote, one per line).
std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);)
        out.push_back(line);
    return out;
}

// The number of comma-separated fields on the first non-empty line of `path` (0 when it cannot be read as
// text, e.g. gzip): 4 are the features alone, more carry the species too.
std::size_t fields_of_first_line(const std::string& path) {
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);)
        if (line.find_first_not_of(" \t\r") != std::string::npos)
            return line.find('\0') == std::string::npos
                       ? 1 + std::size_t(std::count(line.begin(), line.end(), ','))
                       : 0;
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    dtrain::Environment env(argc, argv);
    std::string model_path, data = DTRAIN_IRIS_CSV;
    std::size_t show = 5;
    double min_accuracy = 0.0;
    example::App app("iris_predict",
                     "Predicts Iris species with a model file written by iris_mlp --save-model.\n");
    app.add_option("--model", model_path, "model file written by iris_mlp --save-model")
        ->type_name("PATH")
        ->required();
    app.add_option("--data", data, "CSV of 4 feature columns, with or without a species column")
        ->type_name("PATH");
    example::add_number(app, "--show", show, "rows whose prediction is printed");
    example::add_number(app, "--min-accuracy", min_accuracy,
                        "exit with status 1 when the accuracy (needs species) is below this", 0.0, 1.0);
    const int status = example::parse_command_line(app, argc, argv);
    if (status != example::keep_going) return status;

    try {
        // The file says which activation the network has; load_model checks every layer against it.
        const std::string activation = dtrain::read_model_extras(model_path).texts["activation"];
        DTRAIN_CHECK(!activation.empty(), "'", model_path,
                     "' names no activation: was it written by iris_mlp --save-model?");
        dtrain::Model<float> model = example::iris_network(activation);
        const dtrain::ModelExtras extras = dtrain::load_model(model_path, model);
        const std::vector<std::string> classes = lines_of(extras.texts.at("classes"));
        DTRAIN_CHECK(classes.size() == 3, "'", model_path, "' names ", classes.size(), " classes, need 3");

        // Rows of the 4 features alone are read as features (no label column), others with their species.
        dtrain::Dataset rows = dtrain::collectively([&] {
            return fields_of_first_line(data) == 4 ? dtrain::read_csv_features(data) : dtrain::read_csv(data);
        });
        if (env.rank() == 0)
            for (const std::string& w : rows.warnings)
                std::cerr << "iris_predict: warning: " << w << "\n";
        DTRAIN_CHECK(rows.sample_size() == 4, "'", data, "' has ", rows.sample_size(),
                     " feature columns, the model takes 4");
        if (extras.arrays.count("standardizer"))
            dtrain::Standardizer::from_state(extras.arrays.at("standardizer")).apply(rows.features);
        const dtrain::Labels predicted = dtrain::predict_classes(model, rows.features);

        if (env.rank() == 0) {
            std::printf("iris_predict: %s (%s activations), %zu rows of %s\n", model_path.c_str(),
                        activation.c_str(), rows.size(), data.c_str());
            for (std::size_t r = 0; r < std::min(show, rows.size()); ++r)
                std::printf("row %zu: %s\n", r, classes[std::size_t(predicted(r))].c_str());
        }
        if (!rows.has_labels() || rows.class_names.empty()) return 0;
        // The file's species names may be in another order than the model's: compare by name.
        std::size_t correct = 0;
        for (std::size_t r = 0; r < rows.size(); ++r)
            correct += classes[std::size_t(predicted(r))] == rows.class_names[std::size_t(rows.labels(r))];
        const double accuracy = double(correct) / double(rows.size());
        if (env.rank() == 0) std::printf("accuracy %.4f (%zu of %zu)\n", accuracy, correct, rows.size());
        return accuracy >= min_accuracy ? 0 : 1;
    } catch (const dtrain::Error& e) {  // every rank holds the same error (collective loads)
        if (env.rank() == 0) std::cerr << "iris_predict: error: " << e.what() << "\n";
        return 2;
    }
}
