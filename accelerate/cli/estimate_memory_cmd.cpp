// `brisk estimate-memory MODEL`: bytes per rank for parameters, gradients, optimizer state and
// activations under each sharding stage, for fp32 and bf16 (docs/sharding.md explains the model).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "brisk/data/safetensors.h"
#include "brisk/models/gpt2.h"
#include "brisk/util/cli.h"
#include "brisk/util/error.h"
#include "brisk/util/json.h"
#include "commands.h"

namespace brisk::cli_commands {

namespace {

namespace json = brisk::json;

// What the estimate needs of a model: its parameter count, its largest tensor, the units zero3
// gathers (one per transformer block, plus the embeddings), and for GPT-2 the activation shape.
struct ModelDesc {
  std::string name;
  int64_t params = 0;
  int64_t largest_tensor = 0;
  std::string largest_name;
  int64_t largest_unit = 0;  // elements of the largest zero3 unit
  int64_t gathered = 0;      // elements zero3 holds gathered at once at most
  bool gpt2 = false;
  models::GPT2Config cfg;
};

ModelDesc describe(const std::string& model) {
  ModelDesc d;
  d.name = model;
  const auto presets = models::GPT2Config::preset_names();
  const bool is_file = model.size() > 12 && model.compare(model.size() - 12, 12, ".safetensors") == 0;
  if (!is_file && std::find(presets.begin(), presets.end(), model) != presets.end()) {
    d.gpt2 = true;
    d.cfg = models::GPT2Config::preset(model);
    const int64_t L = d.cfg.n_layer, C = d.cfg.n_embd, V = d.cfg.vocab_size, T = d.cfg.block_size;
    d.params = d.cfg.num_parameters();
    d.largest_tensor = V * C;
    d.largest_name = "wte.weight (tied with lm_head.weight)";
    // zero3 units (the default wrap policy): each block, the final LayerNorm, and the root unit of
    // the embeddings (token, tied head, position), gathered for the model's whole forward and
    // backward, while two blocks at a time are (the one computing and the one prefetched).
    d.largest_unit = std::max({V * C + T * C, 12 * C * C + 13 * C, 2 * C});
    d.gathered = V * C + T * C + 2 * (12 * C * C + 13 * C);
    (void)L;
    d.name = "GPT-2 " + model;
    return d;
  }
  std::error_code ec;
  if (!is_file) {
    std::string valid;
    for (const std::string& p : presets) valid += (valid.empty() ? "" : ", ") + p;
    BRISK_THROW("'", model, "' is neither a GPT-2 preset (", valid, ") nor a .safetensors file");
  }
  BRISK_CHECK(std::filesystem::is_regular_file(model, ec), "'", model, "': no such file");
  const data::SafetensorsFile f = data::load_safetensors(model);
  BRISK_CHECK(!f.empty(), "'", model, "' holds no tensors");
  for (const auto& [name, t] : f) {
    if (!is_floating(t.dtype())) continue;  // integer buffers are not trained
    d.params += t.numel();
    if (t.numel() > d.largest_tensor) {
      d.largest_tensor = t.numel();
      d.largest_name = name;
    }
  }
  BRISK_CHECK(d.params > 0, "'", model, "' holds no floating-point tensors");
  d.largest_unit = d.largest_tensor;  // without a module structure: one unit per tensor
  d.gathered = 2 * d.largest_tensor;  // the unit computing and the one prefetched
  return d;
}

struct Row {
  std::string stage, dtype;
  int64_t params = 0, grads = 0, optimizer = 0, activations = -1;
  int64_t total() const { return params + grads + optimizer + std::max<int64_t>(activations, 0); }
};

std::string human(int64_t bytes) {
  if (bytes < 0) return "n/a";
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  if (u == 0)
    std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(bytes));
  else
    std::snprintf(buf, sizeof buf, "%.2f %s", v, units[u]);
  return buf;
}

// The command line, checked.
struct Options {
  int64_t num_processes = 1, batch_size = 8, seq_len = 0;
  std::string dtypes = "fp32,bf16", optimizer = "adamw";
  double bucket_cap_mb = 25.0;
  bool as_json = false;
  std::vector<std::string> kinds;  // the dtypes, each fp32 or bf16
};

void check_options(Options& o, const std::vector<std::string>& positionals) {
  BRISK_CHECK(positionals.size() == 1, "expected one MODEL (a GPT-2 preset or a .safetensors file), got ",
              positionals.size(), "; usage: brisk estimate-memory MODEL [-n N]");
  BRISK_CHECK(o.num_processes >= 1 && o.num_processes <= (int64_t{1} << 20),
              "--num_processes must be from 1 to 2^20, got ", o.num_processes);
  BRISK_CHECK(o.batch_size >= 1 && o.batch_size <= (int64_t{1} << 30), "--batch_size must be positive, got ",
              o.batch_size);
  BRISK_CHECK(o.bucket_cap_mb > 0, "--bucket_cap_mb must be positive, got ", o.bucket_cap_mb);
  BRISK_CHECK(o.optimizer == "adamw" || o.optimizer == "sgd", "--optimizer '", o.optimizer,
              "' is not valid; expected adamw or sgd");
  o.kinds = cli::split_comma_list(o.dtypes);
  BRISK_CHECK(!o.kinds.empty(), "--dtypes is empty; expected fp32, bf16 or both");
  for (std::string& k : o.kinds) {
    if (k == "float32") k = "fp32";
    if (k == "bfloat16") k = "bf16";
    BRISK_CHECK(k == "fp32" || k == "bf16", "--dtypes: '", k, "' is not valid; expected fp32 or bf16");
  }
}

// One row per stage and dtype. Parameters, gradients and optimizer state are fp32 in both (bf16 is
// autocast: the parameters are the master weights); only the activations' element size changes.
std::vector<Row> estimate(const ModelDesc& d, const Options& o) {
  const int64_t N = o.num_processes, P = d.params;
  const int64_t shard = (P + N - 1) / N;  // this rank's elements, padded up
  const int64_t moments = o.optimizer == "adamw" ? 2 : 1;
  const int64_t bucket = std::min<int64_t>(static_cast<int64_t>(o.bucket_cap_mb * 1024 * 1024) / 4, P);
  std::vector<Row> rows;
  for (const std::string stage : {"none", "zero1", "zero2", "zero3"})
    for (const std::string& k : o.kinds) {
      Row r;
      r.stage = stage;
      r.dtype = k;
      const int64_t act_bytes = k == "fp32" ? 4 : 2;
      if (stage == "none") {
        r.params = 4 * P, r.grads = 4 * P, r.optimizer = 4 * moments * P;
      } else if (stage == "zero1") {
        r.params = 4 * (P + shard), r.grads = 4 * (P + shard), r.optimizer = 4 * moments * shard;
      } else if (stage == "zero2") {
        r.params = 4 * (P + shard), r.grads = 4 * (shard + std::min(3 * bucket, P)), r.optimizer = 4 * moments * shard;
      } else {
        r.params = 4 * std::min(P, shard + d.gathered);  // never more than the whole model
        // A unit's gradients as computed, and as copied in for the reduce-scatter (zero3's buckets
        // are its units, whatever bucket_cap_mb).
        r.grads = 4 * std::min(P, shard + 3 * d.largest_unit), r.optimizer = 4 * moments * shard;
      }
      if (d.gpt2) {
        const int64_t B = o.batch_size, T = o.seq_len, C = d.cfg.n_embd, H = d.cfg.n_head, L = d.cfg.n_layer,
                      V = d.cfg.vocab_size;
        r.activations = act_bytes * (L * (15 * B * T * C + 2 * H * B * T * T) + B * T * C + 2 * B * T * V);
      }
      rows.push_back(r);
    }
  return rows;
}

void print_json(const ModelDesc& d, const Options& o, const std::vector<Row>& rows) {
  json::Value out = json::Value::object();
  out.set("model", d.name);
  out.set("parameters", d.params);
  out.set("largest_tensor", d.largest_name);
  out.set("largest_tensor_elements", d.largest_tensor);
  out.set("num_processes", o.num_processes);
  out.set("optimizer", o.optimizer);
  if (d.gpt2) {
    out.set("batch_size", o.batch_size);
    out.set("seq_len", o.seq_len);
  }
  json::Value arr = json::Value::array();
  for (const Row& r : rows) {
    json::Value j = json::Value::object();
    j.set("stage", r.stage);
    j.set("dtype", r.dtype);
    j.set("parameters", r.params);
    j.set("gradients", r.grads);
    j.set("optimizer", r.optimizer);
    j.set("activations", r.activations);
    j.set("total", r.total());
    arr.push_back(j);
  }
  out.set("rows", arr);
  std::printf("%s\n", out.dump(2).c_str());
}

// The rows as a table, names left and sizes right.
void print_rows(const std::vector<Row>& rows) {
  const std::vector<std::string> head = {"stage",     "dtype",       "parameters", "gradients",
                                         "optimizer", "activations", "total"};
  std::vector<std::vector<std::string>> cells;
  cells.reserve(rows.size());
  for (const Row& r : rows)
    cells.push_back({r.stage, r.dtype, human(r.params), human(r.grads), human(r.optimizer), human(r.activations),
                     human(r.total())});
  std::vector<size_t> width(head.size());
  for (size_t c = 0; c < head.size(); ++c) {
    width[c] = head[c].size();
    for (const auto& row : cells) width[c] = std::max(width[c], row[c].size());
  }
  auto line = [&](const std::vector<std::string>& v) {
    std::string s;
    for (size_t c = 0; c < v.size(); ++c) {
      const std::string pad(width[c] - v[c].size(), ' ');
      s += c < 2 ? v[c] + pad : pad + v[c];  // names left, sizes right
      if (c + 1 < v.size()) s += "  ";
    }
    std::printf("%s\n", s.c_str());
  };
  line(head);
  std::vector<std::string> rule;
  rule.reserve(width.size());
  for (size_t w : width) rule.emplace_back(w, '-');
  line(rule);
  for (const auto& row : cells) line(row);
}

// The heading, the table and what each figure assumes.
void print_report(const ModelDesc& d, const Options& o, const std::vector<Row>& rows) {
  std::printf("Memory per rank for %s: %lld parameters (largest tensor %s, %lld elements), %s, %lld process(es)",
              d.name.c_str(), static_cast<long long>(d.params), d.largest_name.c_str(),
              static_cast<long long>(d.largest_tensor), o.optimizer == "adamw" ? "AdamW" : "SGD with momentum",
              static_cast<long long>(o.num_processes));
  if (d.gpt2)
    std::printf(", batch %lld x %lld tokens per process", static_cast<long long>(o.batch_size),
                static_cast<long long>(o.seq_len));
  std::printf("\n\n");
  print_rows(rows);
  std::printf(
      "\nParameters, gradients and optimizer state are fp32 in both dtypes (bf16 is autocast: the parameters are\n"
      "the master weights). zero1 and zero2 hold the whole parameters plus the flat shard the optimizer steps;\n"
      "zero1 the full gradients during backward plus the shard's; zero2 the shard's plus three buckets in flight\n"
      "(reducing, filling, being copied in; bucket_cap_mb %g); zero3 its shard of the parameters plus the units\n"
      "gathered at once (%lld elements; for GPT-2 the root unit of the embeddings and two transformer blocks; the\n"
      "largest unit: %lld elements), and its units' gradients in flight. Shards are padded up to a multiple of\n"
      "the processes.",
      o.bucket_cap_mb, static_cast<long long>(d.gathered), static_cast<long long>(d.largest_unit));
  if (d.gpt2)
    std::printf(
        " Activations (not sharded): layers x (15 B T C + 2 heads B T^2) elements (Korthikanti et al. 2022\n"
        "without dropout masks: attention scores materialised) + B T C (embeddings) + 2 B T V (logits and their\n"
        "softmax), at 4 bytes (fp32) or 2 (bf16).\n");
  else
    std::printf(" No activations estimate for a safetensors file (no architecture).\n");
}

}  // namespace

int estimate_memory(int argc, char** argv) {
  const std::string me = argv[0];
  Options o;
  cli::Parser p(me,
                "Estimates the memory each rank holds to train a model: parameters, gradients, optimizer state\n"
                "and activations, under sharding none / zero1 / zero2 / zero3, for fp32 and bf16 (mixed precision:\n"
                "fp32 master weights, gradients and optimizer state; bf16 activations), with --num_processes ranks.\n"
                "MODEL is a GPT-2 preset (tiny, small, 124M, 350M) or a .safetensors file (its floating-point\n"
                "tensors are the parameters; no activations estimate). Accelerate's `accelerate estimate-memory`\n"
                "answers the same question for one device; docs/sharding.md explains each figure.\n\n"
                "  brisk estimate-memory 124M --num_processes 4 --batch_size 8\n"
                "  brisk estimate-memory model.safetensors -n 2 --optimizer sgd --json");
  p.add("num_processes", "ranks the model is sharded over", &o.num_processes, 'n');
  p.add("dtypes", "comma-separated: fp32, bf16", &o.dtypes);
  p.add("optimizer", "adamw (2 fp32 moments per parameter) or sgd (momentum: 1)", &o.optimizer);
  p.add("batch_size", "per-process batch (GPT-2 activations)", &o.batch_size);
  p.add("seq_len", "tokens per sequence (GPT-2 activations; default: the preset's context)", &o.seq_len);
  p.add("bucket_cap_mb", "the Accelerator's bucket_cap_mb (zero2/zero3 gradients in flight)", &o.bucket_cap_mb);
  p.add("json", "print JSON instead of a table", &o.as_json);
  p.allow_positionals("MODEL");
  if (!p.parse(argc, argv)) return p.exit_code();
  try {
    check_options(o, p.positionals());
    const ModelDesc d = describe(p.positionals()[0]);
    if (d.gpt2) {
      if (o.seq_len == 0) o.seq_len = d.cfg.block_size;
      BRISK_CHECK(o.seq_len >= 1 && o.seq_len <= d.cfg.block_size, "--seq_len must be from 1 to the preset's context ",
                  d.cfg.block_size, ", got ", o.seq_len);
    }
    const std::vector<Row> rows = estimate(d, o);
    if (o.as_json)
      print_json(d, o, rows);
    else
      print_report(d, o, rows);
  } catch (const Error& e) {
    return fail(me, e.message());
  }
  return 0;
}

}  // namespace brisk::cli_commands
