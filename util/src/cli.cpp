// The shared command-line parser.
#include "brisk/util/cli.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>
#include <string_view>

#include "brisk/util/env.h"
#include "brisk/util/error.h"

namespace brisk::cli {

namespace {
std::string canonical(std::string s) {
  for (char& c : s)
    if (c == '-') c = '_';
  return s;
}
std::string dashed(std::string s) {
  for (char& c : s)
    if (c == '_') c = '-';
  return s;
}
template <class T>
std::string text_of(const T& v) {
  std::ostringstream os;
  os << v;
  return os.str();
}
}  // namespace

Parser::Parser(std::string program, std::string description)
    : program_(std::move(program)), description_(std::move(description)) {}

void Parser::add_flag(const std::string& name, const std::string& help, Target t, char alias, std::string def) {
  flags_.push_back({canonical(name), help, t, alias, std::move(def)});
}
void Parser::add(const std::string& n, const std::string& h, int* v, char a) {
  add_flag(n, h, v, a, text_of(*v));
}
void Parser::add(const std::string& n, const std::string& h, int64_t* v, char a) {
  add_flag(n, h, v, a, text_of(*v));
}
void Parser::add(const std::string& n, const std::string& h, uint64_t* v, char a) {
  add_flag(n, h, v, a, text_of(*v));
}
void Parser::add(const std::string& n, const std::string& h, double* v, char a) {
  add_flag(n, h, v, a, text_of(*v));
}
void Parser::add(const std::string& n, const std::string& h, std::string* v, char a) {
  add_flag(n, h, v, a, v->empty() ? "" : *v);
}
void Parser::add(const std::string& n, const std::string& h, bool* v, char a) {
  add_flag(n, h, v, a, *v ? "true" : "false");
}

void Parser::add(const std::string& n, const std::string& h, std::optional<int>* v, char a) {
  add_flag(n, h, v, a, "");
}
void Parser::add(const std::string& n, const std::string& h, std::optional<double>* v, char a) {
  add_flag(n, h, v, a, "");
}
void Parser::add(const std::string& n, const std::string& h, std::optional<std::string>* v, char a) {
  add_flag(n, h, v, a, "");
}
void Parser::add(const std::string& n, const std::string& h, std::optional<bool>* v, char a) {
  add_flag(n, h, v, a, "");
}

void Parser::add(const std::string& n, const std::string& h, std::function<void(const std::string&)> set,
                 std::string default_text, char a) {
  setters_.push_back({std::move(set)});
  add_flag(n, h, &setters_.back(), a, std::move(default_text));
}

bool Parser::is_switch(const Flag& f) {
  return std::holds_alternative<bool*>(f.target) || std::holds_alternative<std::optional<bool>*>(f.target);
}

void Parser::allow_positionals(const std::string& usage, bool stop_at_first) {
  allow_positionals_ = true;
  stop_at_first_ = stop_at_first;
  positional_usage_ = usage;
}

Parser::Flag* Parser::find(const std::string& name) {
  std::string c = canonical(name);
  for (Flag& f : flags_)
    if (f.name == c) return &f;
  return nullptr;
}

bool Parser::given(const std::string& name) const {
  std::string c = canonical(name);
  for (const Flag& f : flags_)
    if (f.name == c) return f.given;
  return false;
}

bool Parser::set(Flag& f, const std::string& value, std::string& error) {
  const std::string flag = "--" + dashed(f.name);
  // Integers are parsed exactly (decimal digits with an optional sign: no floating-point detour,
  // so 2^63 - 1 stays exact and "1e3" or "0x10" are refused) and range-checked against the type.
  auto integer = [&](auto* out) {
    using T = std::remove_pointer_t<decltype(out)>;
    std::string_view digits = value;
    if (!digits.empty() && digits[0] == '+') digits.remove_prefix(1);
    T v{};
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v, 10);
    const bool all_used = !digits.empty() && end == digits.data() + digits.size();
    if (ec == std::errc() && all_used && (digits[0] != '-' || value[0] != '+')) {
      *out = v;
      return true;
    }
    // (ostringstream: g++ 12 warns falsely on chains of std::string operator+ here.)
    std::ostringstream msg;
    const auto lo = std::numeric_limits<T>::min(), hi = std::numeric_limits<T>::max();
    if (ec == std::errc::result_out_of_range && all_used)
      msg << flag << " is out of range: '" << value << "' (expected an integer in [" << lo << ", " << hi << "])";
    else
      msg << flag << " expects an integer in [" << lo << ", " << hi << "], got '" << value << "'";
    error = msg.str();
    return false;
  };
  auto real = [&](double* out) {
    try {
      size_t used = 0;
      double d = std::stod(value, &used);
      if (used != value.size() || !std::isfinite(d)) throw std::invalid_argument(value);
      *out = d;
      return true;
    } catch (const std::exception&) {
      error = flag + " expects a number, got '" + value + "'";
      return false;
    }
  };
  // Parses into a plain value; optional targets parse into a temporary, then hold it.
  auto assign = [&](auto* p, auto& self) -> bool {
    using T = std::remove_pointer_t<decltype(p)>;
    if constexpr (std::is_same_v<T, std::string>) {
      *p = value;
      return true;
    } else if constexpr (std::is_same_v<T, Setter>) {
      try {
        p->set(value);
        return true;
      } catch (const Error& e) {
        error = e.message();
        return false;
      }
    } else if constexpr (std::is_same_v<T, bool>) {
      const std::optional<bool> b = parse_bool_word(value);
      if (!b) {
        error = flag + " expects true or false (" + kBoolWords + "), got '" + value + "'";
        return false;
      }
      *p = *b;
      return true;
    } else if constexpr (std::is_same_v<T, double>) {
      return real(p);
    } else if constexpr (std::is_integral_v<T>) {
      return integer(p);
    } else {
      typename T::value_type inner{};
      if (!self(&inner, self)) return false;
      *p = inner;
      return true;
    }
  };
  f.given = true;
  return std::visit([&](auto* p) { return assign(p, assign); }, f.target);
}

bool Parser::fail(const std::string& msg) {
  error_ = msg;
  if (!quiet_)
    std::fprintf(stderr, "%s: %s\nRun '%s --help' to see the options.\n", program_.c_str(), msg.c_str(),
                 program_.c_str());
  exit_code_ = 2;
  return false;
}

bool Parser::parse(int argc, const char* const* argv) {
  positionals_.clear();
  error_.clear();
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      if (!quiet_) std::fputs(help().c_str(), stdout);
      exit_code_ = 0;
      return false;
    }
    if (arg == "--") {
      if (!allow_positionals_) return fail("unexpected '--'");
      for (++i; i < argc; ++i) positionals_.emplace_back(argv[i]);
      break;
    }
    Flag* f = nullptr;
    std::string value;
    bool has_value = false;
    if (arg.rfind("--", 0) == 0) {
      std::string name = arg.substr(2);
      if (auto eq = name.find('='); eq != std::string::npos) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
        has_value = true;
      }
      f = find(name);
      if (!f && canonical(name).rfind("no_", 0) == 0) {  // --no-cpu
        Flag* g = find(name.substr(3));
        if (g && is_switch(*g) && !has_value) {
          if (auto* b = std::get_if<bool*>(&g->target)) {
            **b = false;
          } else {
            *std::get<std::optional<bool>*>(g->target) = false;
          }
          g->given = true;
          continue;
        }
      }
      if (!f) return fail("unknown option '--" + name + "'");
    } else if (arg.size() == 2 && arg[0] == '-' && arg[1] != '-') {
      for (Flag& g : flags_)
        if (g.alias == arg[1]) f = &g;
      if (!f) return fail("unknown option '" + arg + "'");
    } else {
      if (!allow_positionals_) return fail("unexpected argument '" + arg + "'");
      positionals_.push_back(arg);
      if (stop_at_first_) {
        for (++i; i < argc; ++i) positionals_.emplace_back(argv[i]);
        break;
      }
      continue;
    }
    if (!has_value) {
      if (is_switch(*f)) {
        value = "true";
      } else {
        if (i + 1 >= argc) return fail("--" + dashed(f->name) + " needs a value");
        value = argv[++i];
      }
    }
    std::string error;
    if (!set(*f, value, error)) return fail(error);
  }
  return true;
}

std::string Parser::help() const {
  std::ostringstream os;
  os << "usage: " << program_ << " [options]" << (allow_positionals_ ? " " + positional_usage_ : "") << "\n\n"
     << description_ << "\n\noptions (--snake_case and --kebab-case spellings are both accepted):\n";
  for (const Flag& f : flags_) {
    std::string left = "  " + (f.alias ? std::string("-") + f.alias + ", " : std::string()) + "--" + dashed(f.name);
    if (!is_switch(f)) left += " VALUE";
    os << left;
    os << std::string(left.size() < 30 ? 30 - left.size() : 1, ' ') << f.help;
    if (!f.default_text.empty() && !(is_switch(f) && f.default_text == "false"))
      os << " (default: " << f.default_text << ")";
    os << "\n";
  }
  os << "  -h, --help                  show this help and exit\n";
  return os.str();
}

std::string format_duration(double s) {
  char buf[32];
  if (s < 60) {
    std::snprintf(buf, sizeof buf, "%.1fs", s);
  } else if (s < 3600) {
    std::snprintf(buf, sizeof buf, "%dm%02ds", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%dh%02dm", static_cast<int>(s) / 3600, (static_cast<int>(s) / 60) % 60);
  }
  return buf;
}

std::vector<std::string> split_comma_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

}  // namespace brisk::cli
