#pragma once

/// @file
/// Export of a Model to an ONNX file, for inference in ONNX Runtime and other ONNX tools.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include <dtrain/core/error.hpp>
#include <dtrain/core/file_io.hpp>
#include <dtrain/core/tensor.hpp>
#include <dtrain/nn/detail/protobuf_writer.hpp>
#include <dtrain/nn/layer.hpp>
#include <dtrain/nn/layers/activation.hpp>
#include <dtrain/nn/layers/batchnorm.hpp>
#include <dtrain/nn/layers/conv2d.hpp>
#include <dtrain/nn/layers/dense.hpp>
#include <dtrain/nn/layers/dropout.hpp>
#include <dtrain/nn/layers/flatten.hpp>
#include <dtrain/nn/layers/leaky_relu.hpp>
#include <dtrain/nn/layers/pool2d.hpp>
#include <dtrain/nn/layers/residual.hpp>
#include <dtrain/nn/model.hpp>

namespace dtrain {

namespace detail {

// Field numbers of onnx.proto (ModelProto, GraphProto, NodeProto, AttributeProto, TensorProto,
// ValueInfoProto, TypeProto, TensorShapeProto) and the enum values used here.
namespace onnx_field {
inline constexpr int model_ir_version = 1, model_producer = 2, model_graph = 7, model_opset = 8;
inline constexpr int opset_version = 2;
inline constexpr int graph_node = 1, graph_name = 2, graph_initializer = 5, graph_input = 11,
                     graph_output = 12;
inline constexpr int node_input = 1, node_output = 2, node_name = 3, node_op = 4, node_attribute = 5;
inline constexpr int attr_name = 1, attr_f = 2, attr_i = 3, attr_ints = 8, attr_type = 20;
inline constexpr int attr_float = 1, attr_int = 2, attr_int_list = 7;
inline constexpr int tensor_dims = 1, tensor_data_type = 2, tensor_name = 8, tensor_raw_data = 9;
inline constexpr int value_name = 1, value_type = 2, type_tensor = 1, tensor_elem_type = 1, tensor_shape = 2,
                     shape_dim = 1, dim_value = 1, dim_param = 2;
inline constexpr int float_type = 1;
inline constexpr std::int64_t ir_version = 8;
}  // namespace onnx_field

/// One ONNX node being built: its inputs, its output and its attributes (already serialised).
struct OnnxNode {
    std::string op;
    std::vector<std::string> inputs;
    std::string output;
    ProtobufWriter attributes;

    OnnxNode& attr(const char* name, std::int64_t v) {
        ProtobufWriter a;
        a.text(onnx_field::attr_name, name);
        a.integer(onnx_field::attr_i, v);
        a.integer(onnx_field::attr_type, onnx_field::attr_int);
        attributes.message(onnx_field::node_attribute, a);
        return *this;
    }
    OnnxNode& attr(const char* name, float v) {
        ProtobufWriter a;
        a.text(onnx_field::attr_name, name);
        a.float32(onnx_field::attr_f, v);
        a.integer(onnx_field::attr_type, onnx_field::attr_float);
        attributes.message(onnx_field::node_attribute, a);
        return *this;
    }
    OnnxNode& attr(const char* name, const std::vector<std::int64_t>& v) {
        ProtobufWriter a;
        a.text(onnx_field::attr_name, name);
        for (std::int64_t x : v)
            a.integer(onnx_field::attr_ints, x);
        a.integer(onnx_field::attr_type, onnx_field::attr_int_list);
        attributes.message(onnx_field::node_attribute, a);
        return *this;
    }
};

/// The graph of export_onnx() while it is built: nodes in order and the initializers.
class OnnxGraph {
public:
    /// Adds the initializer `name` of shape `dims` from `data` (converted to float32) and returns `name`.
    template <class T>
    std::string initializer(const std::string& name, const std::vector<std::int64_t>& dims, const T* data) {
        std::size_t n = 1;
        for (std::int64_t d : dims)
            n *= std::size_t(d);
        std::string raw(4 * n, '\0');
        for (std::size_t i = 0; i < n; ++i) {
            const float f = static_cast<float>(data[i]);
            std::uint32_t bits = 0;
            std::memcpy(&bits, &f, sizeof bits);
            for (int b = 0; b < 4; ++b)
                raw[4 * i + b] = char((bits >> (8 * b)) & 0xffu);
        }
        ProtobufWriter t;
        for (std::int64_t d : dims)
            t.integer(onnx_field::tensor_dims, d);
        t.integer(onnx_field::tensor_data_type, onnx_field::float_type);
        t.text(onnx_field::tensor_name, name);
        t.bytes(onnx_field::tensor_raw_data, raw.data(), raw.size());
        inits_.message(onnx_field::graph_initializer, t);
        return name;
    }

    /// Appends a node `op` reading `inputs`; its output is named after `prefix` and returned with the node.
    OnnxNode& node(const char* op, std::vector<std::string> inputs, const std::string& prefix) {
        nodes_.push_back(OnnxNode{op, std::move(inputs), prefix + "." + op, {}});
        return nodes_.back();
    }

    /// Renames the value `last` (the graph's result) to "output", or adds an Identity node when no node
    /// produced it, and returns the serialised GraphProto with `input_dims` and `output_dims` (the batch
    /// dimension is the symbolic "batch").
    ProtobufWriter finish(const std::string& last, const Shape& input_dims, const Shape& output_dims) {
        if (nodes_.empty() || nodes_.back().output != last) node("Identity", {last}, "identity");
        nodes_.back().output = "output";
        ProtobufWriter g;
        for (const OnnxNode& n : nodes_) {
            ProtobufWriter w;
            for (const std::string& in : n.inputs)
                w.text(onnx_field::node_input, in);
            w.text(onnx_field::node_output, n.output);
            w.text(onnx_field::node_name, n.output);
            w.text(onnx_field::node_op, n.op);
            w.append(n.attributes);
            g.message(onnx_field::graph_node, w);
        }
        g.text(onnx_field::graph_name, "dtrain");
        g.append(inits_);
        g.message(onnx_field::graph_input, value_info("input", input_dims));
        g.message(onnx_field::graph_output, value_info("output", output_dims));
        return g;
    }

    /// A ValueInfoProto "name" of float tensors [batch, dims...].
    static ProtobufWriter value_info(const std::string& name, const Shape& dims) {
        ProtobufWriter shape;
        ProtobufWriter batch;
        batch.text(onnx_field::dim_param, "batch");
        shape.message(onnx_field::shape_dim, batch);
        for (std::size_t d : dims) {
            ProtobufWriter dim;
            dim.integer(onnx_field::dim_value, std::int64_t(d));
            shape.message(onnx_field::shape_dim, dim);
        }
        ProtobufWriter tensor;
        tensor.integer(onnx_field::tensor_elem_type, onnx_field::float_type);
        tensor.message(onnx_field::tensor_shape, shape);
        ProtobufWriter type;
        type.message(onnx_field::type_tensor, tensor);
        ProtobufWriter v;
        v.text(onnx_field::value_name, name);
        v.message(onnx_field::value_type, type);
        return v;
    }

private:
    std::vector<OnnxNode> nodes_;
    ProtobufWriter inits_;
};

/// Adds the nodes of `layer` (parameters at `params`, state at `state`) reading the value `x`; returns the
/// name of its result. `where` is the layer's position ("3", or "3.1" for child 1 of a Residual at 3).
template <class T>
std::string onnx_layer(const Layer<T>& layer, const T* params, const T* state, const std::string& x,
                       const std::string& where, OnnxGraph& g) {
    const std::string id = "layer" + where;
    using I = std::int64_t;
    if (const auto* d = dynamic_cast<const Dense<T>*>(&layer)) {
        const I in = I(d->in_features()), out = I(d->out_features());
        const std::string w = g.initializer(id + ".weight", {out, in}, params);
        const std::string b = g.initializer(id + ".bias", {out}, params + out * in);
        return g.node("Gemm", {x, w, b}, id).attr("transB", I(1)).output;
    }
    if (const auto* c = dynamic_cast<const Conv2d<T>*>(&layer)) {
        const auto k = c->kernel_size(), s = c->stride(), p = c->padding();
        const I out = I(c->out_channels()), in = I(c->in_channels());
        const std::string w = g.initializer(id + ".weight", {out, in, I(k[0]), I(k[1])}, params);
        const std::string b = g.initializer(id + ".bias", {out}, params + out * in * I(k[0] * k[1]));
        return g.node("Conv", {x, w, b}, id)
            .attr("kernel_shape", std::vector<I>{I(k[0]), I(k[1])})
            .attr("strides", std::vector<I>{I(s[0]), I(s[1])})
            .attr("pads", std::vector<I>{I(p[0]), I(p[1]), I(p[0]), I(p[1])})
            .output;
    }
    // dtrain's pooling: no padding, floor rounding, every window inside the input (so the average's
    // count_include_pad does not matter): ONNX's defaults.
    const auto* mp = dynamic_cast<const MaxPool2d<T>*>(&layer);
    const auto* ap = dynamic_cast<const AvgPool2d<T>*>(&layer);
    if (mp != nullptr || ap != nullptr) {
        const I k = mp != nullptr ? I(mp->kernel()) : I(ap->kernel());
        const I s = mp != nullptr ? I(mp->stride()) : I(ap->stride());
        return g.node(mp != nullptr ? "MaxPool" : "AveragePool", {x}, id)
            .attr("kernel_shape", std::vector<I>{k, k})
            .attr("strides", std::vector<I>{s, s})
            .output;
    }
    if (dynamic_cast<const ReLU<T>*>(&layer) != nullptr) return g.node("Relu", {x}, id).output;
    if (dynamic_cast<const Sigmoid<T>*>(&layer) != nullptr) return g.node("Sigmoid", {x}, id).output;
    if (dynamic_cast<const Tanh<T>*>(&layer) != nullptr) return g.node("Tanh", {x}, id).output;
    if (const auto* lr = dynamic_cast<const LeakyReLU<T>*>(&layer))
        return g.node("LeakyRelu", {x}, id).attr("alpha", static_cast<float>(lr->negative_slope())).output;
    if (dynamic_cast<const Flatten<T>*>(&layer) != nullptr)
        return g.node("Flatten", {x}, id).attr("axis", I(1)).output;
    if (dynamic_cast<const Dropout<T>*>(&layer) != nullptr) return x;  // the identity in eval mode
    const auto* bn1 = dynamic_cast<const BatchNorm1d<T>*>(&layer);
    const auto* bn2 = dynamic_cast<const BatchNorm2d<T>*>(&layer);
    if (bn1 != nullptr || bn2 != nullptr) {
        // Eval mode with the running statistics; the channel is on axis 1 for [batch, C] and
        // [batch, C, H, W] alike, as BatchNormalization wants.
        const I c = bn1 != nullptr ? I(bn1->channels()) : I(bn2->channels());
        const double eps = bn1 != nullptr ? bn1->eps() : bn2->eps();
        const std::string scale = g.initializer(id + ".gamma", {c}, params);
        const std::string bias = g.initializer(id + ".beta", {c}, params + c);
        const std::string mean = g.initializer(id + ".running_mean", {c}, state);
        const std::string var = g.initializer(id + ".running_var", {c}, state + c);
        return g.node("BatchNormalization", {x, scale, bias, mean, var}, id)
            .attr("epsilon", static_cast<float>(eps))
            .output;
    }
    if (const auto* r = dynamic_cast<const Residual<T>*>(&layer)) {
        std::string y = x;
        for (std::size_t i = 0; i < r->num_layers(); ++i)
            y = onnx_layer(r->layer(i), params + r->parameter_ranges()[i].offset,
                           state + r->state_ranges()[i].offset, y, where + "." + std::to_string(i), g);
        return g.node("Add", {y, x}, id).output;
    }
    throw Error(
        concat("export_onnx: layer ", where, ", ", layer.name(),
               ", has no ONNX form here (exported: Dense, Conv2d, MaxPool2d, AvgPool2d, ReLU, Sigmoid, ",
               "Tanh, LeakyReLU, Flatten, Dropout, BatchNorm1d, BatchNorm2d, Residual)"));
}

}  // namespace detail

/// Writes `model` to `path` as an ONNX model (IR version 8, one import of the default domain at `opset`,
/// at least 13) for inference: graph input "input" of float tensors [batch, model.input_shape()...] and
/// output "output" [batch, model.output_shape()...], where "batch" is a dynamic dimension. The parameters
/// and BatchNorm's running statistics become float32 initializers (a Model<double> is exported in float32).
/// The layers map to Dense -> Gemm (transB = 1), Conv2d -> Conv, MaxPool2d / AvgPool2d -> MaxPool /
/// AveragePool, ReLU / Sigmoid / Tanh -> Relu / Sigmoid / Tanh, LeakyReLU -> LeakyRelu (alpha = its
/// negative_slope), Flatten -> Flatten (axis 1), Dropout ->
/// nothing (eval mode), BatchNorm1d / BatchNorm2d -> BatchNormalization with the running statistics and the
/// layer's eps (eval mode), Residual -> its children, then Add with the block's input. The graph computes
/// what forward() computes after model.eval(). Throws dtrain::Error naming the layer and its position for
/// any other layer (LayerNorm, Embedding), and naming the file when it cannot be written; the file is
/// written to `path`.tmp and renamed over `path`, so `path` is either the old file or the whole new one.
template <class T>
void export_onnx(const Model<T>& model, const std::string& path, int opset = 13) {
    DTRAIN_CHECK(opset >= 13, "export_onnx: opset ", opset,
                 " is not supported; the operators are written as opset 13 defines them (use 13 or later)");
    DTRAIN_CHECK(model.num_layers() > 0, "export_onnx: the model has no layers");
    detail::OnnxGraph g;
    std::string x = "input";
    for (std::size_t i = 0; i < model.num_layers(); ++i)
        x = detail::onnx_layer(model.layer(i), model.parameters().data() + model.parameter_ranges()[i].offset,
                               model.state().data() + model.state_ranges()[i].offset, x, std::to_string(i),
                               g);
    namespace f = detail::onnx_field;
    detail::ProtobufWriter graph = g.finish(x, model.input_shape(), model.output_shape());
    detail::ProtobufWriter m;
    m.integer(f::model_ir_version, f::ir_version);
    m.text(f::model_producer, "dtrain");
    detail::ProtobufWriter opset_id;
    opset_id.integer(f::opset_version, opset);
    m.message(f::model_opset, opset_id);
    m.message(f::model_graph, graph);

    const std::string error =
        detail::write_file_atomically(path, m.str().data(), m.str().size(), "export_onnx");
    DTRAIN_CHECK(error.empty(), error);
}

}  // namespace dtrain
