#pragma once

// A minimal JSON parser for tests: enough to check that a Chrome trace file is valid JSON and to read its
// events. Throws std::runtime_error with the offset on malformed input.

#include <cctype>
#include <cstddef>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace dtrain::test {

/// A parsed JSON value.
struct Json {
    enum class Kind { Null, Bool, Number, String, Array, Object } kind = Kind::Null;
    bool boolean = false;
    double number = 0.0;
    std::string string;
    std::vector<Json> array;
    std::map<std::string, Json> object;

    /// Member `key` of an object; throws when missing.
    const Json& at(const std::string& key) const {
        auto it = object.find(key);
        if (kind != Kind::Object || it == object.end()) throw std::runtime_error("json: no member " + key);
        return it->second;
    }
    /// True when this is an object with member `key`.
    bool has(const std::string& key) const { return kind == Kind::Object && object.count(key) != 0; }
};

namespace detail {

class JsonParser {
public:
    explicit JsonParser(const std::string& s) : s_(s) {}
    Json parse_document() {
        Json v = value();
        ws();
        if (i_ != s_.size()) fail("trailing characters");
        return v;
    }

private:
    [[noreturn]] void fail(const std::string& what) const {
        throw std::runtime_error("json: " + what + " at offset " + std::to_string(i_));
    }
    void ws() {
        while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_])))
            ++i_;
    }
    bool eat(char c) {
        ws();
        if (i_ < s_.size() && s_[i_] == c) {
            ++i_;
            return true;
        }
        return false;
    }
    void expect(char c) {
        if (!eat(c)) fail(std::string("expected '") + c + "'");
    }
    Json value() {
        ws();
        if (i_ >= s_.size()) fail("unexpected end");
        Json v;
        const char c = s_[i_];
        if (c == '{') {
            v.kind = Json::Kind::Object;
            ++i_;
            if (eat('}')) return v;
            do {
                ws();
                std::string k = str();
                expect(':');
                v.object[k] = value();
            } while (eat(','));
            expect('}');
        } else if (c == '[') {
            v.kind = Json::Kind::Array;
            ++i_;
            if (eat(']')) return v;
            do
                v.array.push_back(value());
            while (eat(','));
            expect(']');
        } else if (c == '"') {
            v.kind = Json::Kind::String;
            v.string = str();
        } else if (s_.compare(i_, 4, "true") == 0 || s_.compare(i_, 5, "false") == 0) {
            v.kind = Json::Kind::Bool;
            v.boolean = s_[i_] == 't';
            i_ += v.boolean ? 4 : 5;
        } else if (s_.compare(i_, 4, "null") == 0) {
            i_ += 4;
        } else {
            v.kind = Json::Kind::Number;
            const std::size_t start = i_;
            if (s_[i_] == '-') ++i_;
            if (i_ >= s_.size() || !std::isdigit(static_cast<unsigned char>(s_[i_]))) fail("bad number");
            while (i_ < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[i_])) || s_[i_] == '.' ||
                                      s_[i_] == 'e' || s_[i_] == 'E' || s_[i_] == '+' || s_[i_] == '-'))
                ++i_;
            v.number = std::stod(s_.substr(start, i_ - start));
        }
        return v;
    }
    std::string str() {
        if (i_ >= s_.size() || s_[i_] != '"') fail("expected a string");
        ++i_;
        std::string out;
        while (true) {
            if (i_ >= s_.size()) fail("unterminated string");
            const char c = s_[i_++];
            if (c == '"') break;
            if (static_cast<unsigned char>(c) < 0x20) fail("control character in string");
            if (c == '\\') {
                if (i_ >= s_.size()) fail("bad escape");
                const char e = s_[i_++];
                if (e == 'u') {
                    if (i_ + 4 > s_.size()) fail("bad \\u escape");
                    out += '?';
                    i_ += 4;
                } else if (std::string("\"\\/bfnrt").find(e) != std::string::npos) {
                    out += e == 'n' ? '\n' : e == 't' ? '\t' : e;
                } else {
                    fail("bad escape");
                }
            } else {
                out += c;
            }
        }
        return out;
    }
    const std::string& s_;
    std::size_t i_ = 0;
};

}  // namespace detail

/// Parses `text` as one JSON document; throws std::runtime_error when it is not valid JSON.
inline Json parse_json(const std::string& text) {
    return detail::JsonParser(text).parse_document();
}

}  // namespace dtrain::test
