// Hugging Face weights into brisk models and back: the name matching, the checks that all run
// before any tensor is written, the copy, the save, and the load report.
#include "hf_weights.h"

#include <algorithm>
#include <cstring>
#include <sstream>
#include <unordered_map>

#include "brisk/autograd/grad_mode.h"
#include "brisk/data/safetensors_folder.h"
#include "brisk/kernels/elementwise.h"
#include "brisk/util/error.h"

namespace brisk::models {

std::string LoadReport::str() const {
  std::ostringstream os;
  os << "loaded " << loaded << " tensors from " << dir << " (" << detail::str_cat(files) << ")";
  auto list = [&](const char* what, const std::vector<ReportedTensor>& items) {
    for (const ReportedTensor& t : items) os << "\n  " << what << ' ' << t.name << ": " << t.reason;
  };
  list("initialized", initialized);
  list("ignored", ignored);
  list("unexpected (allowed)", unexpected);
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const LoadReport& report) {
  return os << report.str();
}

namespace hf {

namespace {

bool starts_with(const std::string& s, const std::string& p) {
  return s.size() >= p.size() && s.compare(0, p.size(), p) == 0;
}
bool ends_with(const std::string& s, const std::string& p) {
  return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}

// The name a folder's tensor has relative to the base model, with BERT's original TensorFlow
// LayerNorm names (gamma, beta) read as PyTorch's (weight, bias), as transformers does.
std::string canonical(const std::string& name, const Family& family) {
  std::string c = starts_with(name, family.prefix) ? name.substr(family.prefix.size()) : name;
  if (ends_with(c, ".gamma")) c = c.substr(0, c.size() - 6) + ".weight";
  if (ends_with(c, ".beta")) c = c.substr(0, c.size() - 5) + ".bias";
  return c;
}

Shape file_shape(const Binding& b) {
  Shape s = b.target.sizes();
  if (b.transposed) std::reverse(s.begin(), s.end());
  return s;
}

std::string shape_text(const Shape& s) {
  return detail::str_cat(s);
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.sizes() != b.sizes()) return false;
  Tensor ca = kernels::contiguous(a), cb = kernels::contiguous(b);
  return std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.nbytes()) == 0;
}

// The problems of a load, gathered to be reported together.
struct Problems {
  std::vector<std::string> missing, unexpected, other;
  bool empty() const { return missing.empty() && unexpected.empty() && other.empty(); }
};

constexpr size_t kMaxListed = 12;  // missing names listed with their closest match (each costs a search)

[[noreturn]] void throw_problems(const Problems& p, const std::string& dir, const Family& family,
                                 bool allow_unexpected) {
  std::ostringstream os;
  os << family.model_class << "::from_pretrained: the weights in " << dir
     << " do not fit the model; nothing was loaded:";
  for (size_t i = 0; i < p.missing.size() && i < kMaxListed; ++i) os << "\n  missing " << p.missing[i];
  if (p.missing.size() > kMaxListed) os << "\n  ... and " << p.missing.size() - kMaxListed << " more missing";
  if (!p.unexpected.empty()) {
    os << "\n  unexpected (no " << family.model_class << " has them";
    if (!allow_unexpected) os << "; pass allow_unexpected = true to load the rest and ignore them";
    os << "): " << detail::str_cat(p.unexpected);
  }
  for (const std::string& o : p.other) os << "\n  " << o;
  BRISK_THROW(os.str());
}

std::string closest(const std::string& name, const data::SafetensorsFolder& folder) {
  const std::string* best = nullptr;
  size_t best_d = 0;
  for (const auto& [n, t] : folder.tensors) {
    const size_t d = edit_distance(name, n);
    if (!best || d < best_d) best = &n, best_d = d;
  }
  return best ? " (closest name in the folder: \"" + *best + "\")" : " (the folder holds no tensors)";
}

// What the match found: for each binding, the folder tensor it loads from (or -1).
struct Match {
  std::vector<long> source;
  std::vector<char> found;  // the folder holds the binding's tensor (loadable or not)
  LoadReport report;
  Problems problems;
};

// Sorts each folder tensor into loaded / tied copy / ignored / unexpected and checks it.
void match_folder(const data::SafetensorsFolder& folder, const std::vector<Binding>& bindings, const Family& family,
                  Match& m) {
  std::unordered_map<std::string, size_t> bound;  // canonical name -> binding
  for (size_t i = 0; i < bindings.size(); ++i) bound[bindings[i].name] = i;
  std::unordered_map<std::string, size_t> seen;  // canonical name -> folder tensor
  // Binding k loads from folder tensor i, if its shape and dtype fit.
  auto take = [&](size_t k, size_t i) {
    const auto& [name, t] = folder.tensors[i];
    m.found[k] = 1;
    if (t.sizes() != file_shape(bindings[k]))
      m.problems.other.push_back("shape mismatch: \"" + name + "\" is " + shape_text(t.sizes()) + " in " +
                                 folder.file_of[i] + ", the model needs " + shape_text(file_shape(bindings[k])));
    else if (!t.is_floating_point())
      m.problems.other.push_back(detail::str_cat("\"", name, "\" is ", traits(t.dtype()).safetensors_name, " in ",
                                                 folder.file_of[i], "; weights must be F32, F16 or BF16"));
    else
      m.source[k] = static_cast<long>(i);
  };
  for (size_t i = 0; i < folder.tensors.size(); ++i) {
    const auto& [name, t] = folder.tensors[i];
    const std::string c = canonical(name, family);
    if (auto [it, fresh] = seen.emplace(c, i); !fresh) {
      m.problems.other.push_back("\"" + folder.tensors[it->second].first + "\" and \"" + name +
                                 "\" name the same tensor; keep one");
      continue;
    }
    auto b = bound.find(c);
    if (b != bound.end() && bindings[b->second].replace.empty()) {
      take(b->second, i);
      continue;
    }
    if (b != bound.end()) {
      m.report.ignored.push_back({name, "replaced by " + bindings[b->second].replace});
      continue;
    }
    auto tie = std::find_if(family.tied.begin(), family.tied.end(), [&](const auto& p) { return p.first == c; });
    if (tie != family.tied.end()) continue;  // checked and reported below, once the folder is indexed
    const std::string why = family.ignorable ? family.ignorable(c) : std::string();
    if (!why.empty())
      m.report.ignored.push_back({name, why});
    else
      m.report.unexpected.push_back({name, "no " + family.model_class + " has it"});
  }
  // Tied copies must hold the tensor they copy (else the model would silently differ from the file).
  for (const auto& [alias, of] : family.tied) {
    auto a = seen.find(alias), o = seen.find(of);
    if (a == seen.end()) continue;
    const auto& [alias_name, alias_t] = folder.tensors[a->second];
    if (o == seen.end()) {  // the copy is all there is (older files): it is the tensor
      if (auto b = bound.find(of); b != bound.end() && bindings[b->second].replace.empty()) take(b->second, a->second);
      continue;
    }
    const auto& [of_name, of_t] = folder.tensors[o->second];
    m.report.ignored.push_back({alias_name, "a copy of the tied " + of_name + " (checked equal)"});
    if (!same_bytes(alias_t, of_t))
      m.problems.other.push_back("\"" + alias_name + "\" differs from \"" + of_name + "\", but " + family.model_class +
                                 " ties them (one tensor): the folder is not such a model");
  }
}

}  // namespace

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

LoadReport load_weights(const std::string& dir, const std::vector<Binding>& bindings, const Family& family,
                        bool allow_unexpected) {
  data::SafetensorsFolder folder;
  try {
    folder = data::load_safetensors_folder(dir);
  } catch (const Error& e) {
    BRISK_THROW(family.model_class, "::from_pretrained: ", e.message());
  }
  Match m;
  m.source.assign(bindings.size(), -1);
  m.found.assign(bindings.size(), 0);
  m.report.dir = dir;
  m.report.files = folder.files;
  match_folder(folder, bindings, family, m);
  const bool prefixed = std::any_of(folder.tensors.begin(), folder.tensors.end(),
                                    [&](const auto& kv) { return starts_with(kv.first, family.prefix); });
  for (size_t i = 0; i < bindings.size(); ++i) {
    const Binding& b = bindings[i];
    if (m.found[i]) continue;
    // Initialised tensors by the model's own (state_dict) name; missing ones as this folder would
    // spell them (with the prefix when it uses one), beside the closest name it has.
    const std::string own = (b.base && family.save_with_prefix ? family.prefix : std::string()) + b.name;
    const std::string shown = (b.base && prefixed ? family.prefix : std::string()) + b.name;
    if (!b.replace.empty()) {
      m.report.initialized.push_back({own, b.replace});
    } else if (!b.may_initialise.empty()) {
      m.report.initialized.push_back({own, b.may_initialise});
    } else {
      m.problems.missing.push_back("\"" + shown + "\"" +
                                   (m.problems.missing.size() < kMaxListed ? closest(shown, folder) : std::string()));
    }
  }
  if (!allow_unexpected)
    for (const ReportedTensor& u : m.report.unexpected) m.problems.unexpected.push_back(u.name);
  if (!m.problems.empty()) throw_problems(m.problems, dir, family, allow_unexpected);
  NoGradGuard no_grad;
  for (size_t i = 0; i < bindings.size(); ++i) {
    if (m.source[i] < 0) continue;
    const Tensor& src = folder.tensors[static_cast<size_t>(m.source[i])].second;
    kernels::copy_(bindings[i].target, bindings[i].transposed ? src.transpose(0, 1) : src);
    bindings[i].target.bump_version();
    ++m.report.loaded;
  }
  return m.report;
}

void save_weights(const std::string& dir, const std::vector<Binding>& bindings, const Family& family,
                  int64_t max_shard_size) {
  data::NamedTensors out;
  out.reserve(bindings.size());
  for (const Binding& b : bindings) {
    Tensor t = b.target.detach();
    out.emplace_back((b.base && family.save_with_prefix ? family.prefix : std::string()) + b.name,
                     b.transposed ? t.transpose(0, 1) : t);
  }
  data::save_safetensors_folder(dir, out, {.max_shard_size = max_shard_size});
}

DType weights_dtype(const std::vector<Binding>& bindings) {
  return bindings.empty() ? DType::F32 : bindings.front().target.dtype();
}

}  // namespace hf
}  // namespace brisk::models
