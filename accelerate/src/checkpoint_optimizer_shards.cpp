// A sharded optimizer's state in a checkpoint (checkpoint_shards.h): its layout as state.json
// records it, and re-sharding: a state saved in another layout than this job's (another number of
// processes, or sharded where this job is not, or the other way round) is gathered parameter by
// parameter and sliced for this job's (docs/checkpoints.md, "Resuming on another number of processes").
#include <algorithm>
#include <optional>
#include <set>

#include "brisk/kernels/elementwise.h"
#include "brisk/kernels/factory.h"
#include "checkpoint_shards.h"

namespace brisk::accelerate::detail {

json::Value layout_json(const ZeroLayout& l) {
  json::Value o = json::Value::object();
  o.set("num_processes", l.num_processes);
  json::Value gp = json::Value::array();
  for (size_t n : l.group_params) gp.push_back(static_cast<int64_t>(n));
  o.set("group_params", gp);
  json::Value bs = json::Value::array();
  for (const ZeroLayout::Bucket& b : l.buckets) {
    json::Value jb = json::Value::object();
    jb.set("group", static_cast<int64_t>(b.group));
    jb.set("padded", b.padded);
    json::Value ms = json::Value::array();
    for (const ZeroLayout::Member& m : b.members) {
      json::Value pair = json::Value::array();
      pair.push_back(static_cast<int64_t>(m.param));
      pair.push_back(m.numel);
      ms.push_back(pair);
    }
    jb.set("params", ms);
    bs.push_back(jb);
  }
  o.set("buckets", bs);
  return o;
}

namespace {

// The layout read back, checked against the parameters it must cover (`numels`, the prepared
// optimizer's parameters in registration order, split into groups of `group_sizes`): every
// parameter exactly once, in its own group, with its size; padding below num_processes per bucket.
ZeroLayout parse_layout(const Fields& f, const json::Value& v, const std::string& key, int64_t saved_world,
                        const std::vector<int64_t>& numels, const std::vector<size_t>& group_sizes) {
  ZeroLayout l;
  l.num_processes = static_cast<int>(f.integer(f.member(v, key, "num_processes"), key + ".num_processes", 1, 1 << 20));
  if (l.num_processes != saved_world)
    f.fail(key + ".num_processes", "is ", l.num_processes, " but the checkpoint was saved by ", saved_world,
           " processes");
  const auto& gp =
      f.array(f.member(v, key, "group_params"), key + ".group_params", group_sizes.size(), "parameter group(s)");
  std::vector<size_t> first(group_sizes.size() + 1, 0);
  for (size_t g = 0; g < gp.size(); ++g) {
    const auto n = static_cast<size_t>(f.integer(gp[g], Fields::index(key + ".group_params", g), 0, kMaxCount));
    if (n != group_sizes[g])
      f.fail(Fields::index(key + ".group_params", g), "the checkpoint's group has ", n,
             " parameters, the prepared one ", group_sizes[g]);
    l.group_params.push_back(n);
    first[g + 1] = first[g] + n;
  }
  const json::Value& bs = f.member(v, key, "buckets");
  if (!bs.is_array()) f.fail(key + ".buckets", "expected an array");
  std::vector<char> seen(numels.size(), 0);
  for (size_t k = 0; k < bs.size(); ++k) {
    const std::string at = Fields::index(key + ".buckets", k);
    ZeroLayout::Bucket b;
    b.group = static_cast<size_t>(
        f.integer(f.member(bs.at(k), at, "group"), at + ".group", 0, static_cast<int64_t>(group_sizes.size()) - 1));
    b.padded = f.integer(f.member(bs.at(k), at, "padded"), at + ".padded", 0, kMaxCount);
    const json::Value& ms = f.member(bs.at(k), at, "params");
    if (!ms.is_array() || ms.size() == 0) f.fail(at + ".params", "expected a non-empty array");
    int64_t numel = 0;
    for (size_t j = 0; j < ms.size(); ++j) {
      const std::string mat = Fields::index(at + ".params", j);
      const json::Value& pair = ms.at(j);
      if (!pair.is_array() || pair.size() != 2) f.fail(mat, "expected [parameter index, numel]");
      const auto i = static_cast<size_t>(f.integer(pair.at(0), mat + "[0]", static_cast<int64_t>(first[b.group]),
                                                   static_cast<int64_t>(first[b.group + 1]) - 1));
      const int64_t n = f.integer(pair.at(1), mat + "[1]", 0, kMaxCount);
      if (n != numels[i])
        f.fail(mat + "[1]", "parameter ", i, " has ", n, " elements in the checkpoint, ", numels[i],
               " in the prepared model");
      if (seen[i]++) f.fail(mat, "parameter ", i, " is listed a second time");
      numel += n;
      b.members.push_back({i, n});
    }
    if (b.padded % l.num_processes != 0 || b.padded < numel || b.padded - numel >= l.num_processes)
      f.fail(at + ".padded", "expected ", numel, " rounded up to a multiple of ", l.num_processes, ", got ", b.padded);
    l.buckets.push_back(std::move(b));
  }
  for (size_t i = 0; i < seen.size(); ++i)
    if (!seen[i]) f.fail(key + ".buckets", "parameter ", i, " is in no bucket");
  return l;
}

// The parameters this job's optimizer covers (the model's, not a sharded optimizer's shards), by
// registration order and group.
struct PreparedParams {
  std::vector<Tensor> params;
  std::vector<size_t> group_sizes;
  std::vector<size_t> group_of;  // per parameter
  std::vector<size_t> first;     // group g's parameters: [first[g], first[g + 1])
  std::vector<int64_t> numels;
  std::optional<ZeroLayout> mine;  // this job's layout, when it shards the optimizer
  size_t groups() const { return group_sizes.size(); }
};

PreparedParams prepared_params(const optim::Optimizer& opt, const ZeroEngine* zero) {
  PreparedParams p;
  if (zero) {
    p.params = zero->params();
    p.mine = zero->layout();
    p.group_sizes = p.mine->group_params;
  } else {
    for (size_t g = 0; g < opt.num_groups(); ++g) {
      for (const Tensor& t : opt.params(g)) p.params.push_back(t);
      p.group_sizes.push_back(opt.params(g).size());
    }
  }
  const size_t G = p.groups();
  p.first.assign(G + 1, 0);
  for (size_t g = 0; g < G; ++g) {
    p.first[g + 1] = p.first[g] + p.group_sizes[g];
    p.group_of.insert(p.group_of.end(), p.group_sizes[g], g);
  }
  p.numels.reserve(p.params.size());
  for (const Tensor& t : p.params) p.numels.push_back(t.numel());
  return p;
}

// The saved scalars, checked: this job's hyper-parameter keys go into `sd`, with steps_taken; the
// step count of each of the `slots` saved "state.<i>" entries (a parameter's, or a shard's when
// `sharded`) is returned.
std::vector<int64_t> resharded_scalars(const Fields& f, const json::Value& entry, const std::string& key,
                                       const optim::Optimizer& opt, const PreparedParams& prepared, bool sharded,
                                       size_t slots, optim::StateDict& sd) {
  const size_t G = prepared.groups();
  const std::string skey = key + ".scalars";
  const json::Value& saved = f.object(f.member(entry, key, "scalars"), skey);
  const std::map<std::string, double> current = opt.state_dict().scalars;
  for (const auto& [k, x] : saved.items()) {
    const std::string at = Fields::join(skey, k);
    std::string kind;
    const int64_t slot = state_slot(k, &kind);
    if (slot >= 0) {
      if (static_cast<size_t>(slot) >= slots || kind != "step")
        f.fail(at, "not a key of the saved state (", slots, " ", sharded ? "shard(s)" : "parameter(s)", ")");
      continue;
    }
    if (k == "steps_taken") continue;
    if (ends_with(k, ".num_params")) {
      bool known = false;
      for (size_t g = 0; g < G; ++g)
        if (k == "param_groups." + std::to_string(g) + ".num_params") {
          known = true;
          const int64_t want = sharded ? 1 : static_cast<int64_t>(prepared.group_sizes[g]);
          const int64_t got = f.integer(x, at, 0, kMaxCount);
          if (got != want)
            f.fail(at, "the checkpoint's group has ", got, " ", sharded ? "shard(s)" : "parameter(s)", ", expected ",
                   want);
        }
      if (!known) f.fail(at, "the checkpoint has more parameter groups than the ", G, " prepared");
      continue;
    }
    if (!current.count(k)) f.fail(at, "not a key of the prepared optimizer's state");
    sd.scalars[k] = optimizer_scalar(f, k, x, at);
  }
  for (const auto& [k, v] : current)
    if (k.rfind("param_groups.", 0) == 0 && !ends_with(k, ".num_params") && !sd.scalars.count(k))
      f.fail(Fields::join(skey, k), "missing");
  const json::Value* taken = saved.find("steps_taken");
  if (!taken) f.fail(Fields::join(skey, "steps_taken"), "missing");
  sd.scalars["steps_taken"] = optimizer_scalar(f, "steps_taken", *taken, Fields::join(skey, "steps_taken"));
  std::vector<int64_t> slot_steps(slots);
  for (size_t i = 0; i < slots; ++i) {
    const std::string k = "state." + std::to_string(i) + ".step";
    const json::Value* x = saved.find(k);
    if (!x) f.fail(Fields::join(skey, k), "missing");
    slot_steps[i] = f.integer(*x, Fields::join(skey, k), 0, kMaxCount);
  }
  return slot_steps;
}

// Every parameter's state, flat, by kind.
using FullState = std::vector<std::map<std::string, Tensor>>;

// The whole state of an unsharded optimizer: "state.<parameter index>.<kind>", each shaped like
// its parameter.
FullState read_whole_state(const Fields& f, const CheckpointFolder& folder, const json::Value& entry,
                           const std::string& key, const PreparedParams& prepared) {
  const std::vector<Tensor>& params = prepared.params;
  FullState full(params.size());
  const std::string at = key + ".file";
  const std::string& file = listed_name(f, folder, f.string(f.member(entry, key, "file"), at), at);
  for (auto& [tname, t] : read_safetensors(f, folder, file, at).tensors) {
    std::string kind;
    const int64_t i = state_slot(tname, &kind);
    if (i < 0 || static_cast<size_t>(i) >= params.size())
      f.fail(at, file, " has a tensor ", quoted(tname), " that is not state.<parameter index>.<name> of one of the ",
             params.size(), " parameters");
    const Tensor& p = params[static_cast<size_t>(i)];
    if (t.sizes() != p.sizes() || t.dtype() != p.dtype())
      f.fail(at, file, ": ", quoted(tname), " is ", dtype_name(t.dtype()), " ", t.sizes(), " but parameter ", i, " is ",
             dtype_name(p.dtype()), " ", p.sizes());
    full[static_cast<size_t>(i)][kind] = kernels::contiguous(t).view({t.numel()});
  }
  return full;
}

// The state of an optimizer saved sharded by `saved_world` processes: every rank's shard file
// ("state.<group>.<kind>", the rank's blocks of the group's buckets), checked against the saved
// layout and reassembled parameter by parameter (the padding dropped).
FullState read_sharded_state(const Fields& f, const CheckpointFolder& folder, const json::Value& entry,
                             const std::string& key, const PreparedParams& prepared, int64_t saved_world) {
  const size_t G = prepared.groups();
  const json::Value* lj = entry.find("layout");
  if (!lj)
    f.fail(key + ".layout",
           "missing: the optimizer was saved sharded without its shard layout (by an older brisk), so "
           "its state can be resumed only on the ",
           saved_world, " processes that saved it");
  const ZeroLayout layout = parse_layout(f, *lj, key + ".layout", saved_world, prepared.numels, prepared.group_sizes);
  const auto& names =
      f.array(f.member(entry, key, "shards"), key + ".shards", static_cast<size_t>(saved_world), "shard(s)");
  // Rank r's shard tensors by (group, kind).
  std::vector<std::map<std::pair<size_t, std::string>, Tensor>> shard(names.size());
  for (size_t r = 0; r < names.size(); ++r) {
    const std::string at = Fields::index(key + ".shards", r);
    const std::string& file = listed_name(f, folder, f.string(names[r], at), at);
    for (auto& [tname, t] : read_safetensors(f, folder, file, at).tensors) {
      std::string kind;
      const int64_t g = state_slot(tname, &kind);
      if (g < 0 || static_cast<size_t>(g) >= G)
        f.fail(at, file, " has a tensor ", quoted(tname), " that is not state.<group>.<name> of one of the ", G,
               " groups' shards");
      const Tensor& p0 = prepared.params[prepared.first[static_cast<size_t>(g)]];
      const int64_t n = layout.shard_numel(static_cast<size_t>(g));
      if (t.sizes() != std::vector<int64_t>{n} || t.dtype() != p0.dtype())
        f.fail(at, file, ": ", quoted(tname), " is ", dtype_name(t.dtype()), " ", t.sizes(), " but the layout gives ",
               dtype_name(p0.dtype()), " [", n, "]");
      shard[r][{static_cast<size_t>(g), kind}] = kernels::contiguous(t);
    }
    if (shard[r].size() != shard[0].size())
      f.fail(at, file, " holds other kinds of state than ", f.string(names[0], key + ".shards[0]"));
    for (const auto& [gk, t] : shard[0])
      if (!shard[r].count(gk))
        f.fail(at, file, " lacks ", quoted("state." + std::to_string(gk.first) + "." + gk.second));
  }
  FullState full(prepared.params.size());
  std::vector<int64_t> shard_offset(G, 0);
  for (const ZeroLayout::Bucket& b : layout.buckets) {
    const int64_t block = b.padded / layout.num_processes;
    for (const auto& [gk, t0] : shard[0]) {
      if (gk.first != b.group) continue;
      Tensor flat = empty({b.padded}, t0.dtype(), t0.device());
      for (size_t r = 0; r < shard.size(); ++r)
        kernels::copy_(flat.narrow(0, static_cast<int64_t>(r) * block, block),
                       shard[r].at(gk).narrow(0, shard_offset[b.group], block));
      int64_t off = 0;
      for (const ZeroLayout::Member& m : b.members) {
        full[m.param][gk.second] = flat.narrow(0, off, m.numel);
        off += m.numel;
      }
    }
    shard_offset[b.group] += block;
  }
  return full;
}

// The whole state, for an unsharded optimizer of this job: "state.<parameter index>.<kind>".
void whole_state_dict(const PreparedParams& prepared, const FullState& full, const std::vector<int64_t>& steps,
                      optim::StateDict& sd) {
  for (size_t g = 0; g < prepared.groups(); ++g)
    sd.scalars["param_groups." + std::to_string(g) + ".num_params"] = static_cast<double>(prepared.group_sizes[g]);
  for (size_t i = 0; i < prepared.params.size(); ++i) {
    const std::string sp = "state." + std::to_string(i) + ".";
    sd.scalars[sp + "step"] = static_cast<double>(steps[i]);
    for (const auto& [kind, t] : full[i]) sd.tensors.emplace_back(sp + kind, t.view(prepared.params[i].sizes()));
  }
}

// This rank's shard of every group, for a sharded optimizer of this job: "state.<group>.<kind>",
// the rank's blocks of the group's buckets in this job's layout (zero where the padding is).
void shard_state_dict(const PreparedParams& prepared, const FullState& full, const std::vector<int64_t>& steps,
                      int rank, optim::StateDict& sd) {
  const ZeroLayout& L = *prepared.mine;
  const std::vector<size_t>& first = prepared.first;
  for (size_t g = 0; g < prepared.groups(); ++g) {
    const std::string sp = "state." + std::to_string(g) + ".";
    sd.scalars["param_groups." + std::to_string(g) + ".num_params"] = 1;
    // One step count per shard: its parameters', which a sharded run keeps equal.
    int64_t step = 0;
    std::set<std::string> kinds;
    for (size_t i = first[g]; i < first[g + 1]; ++i) {
      step = std::max(step, steps[i]);
      for (const auto& [kind, t] : full[i]) kinds.insert(kind);
    }
    sd.scalars[sp + "step"] = static_cast<double>(step);
    for (const std::string& kind : kinds) {
      Tensor t = zeros({L.shard_numel(g)}, {.dtype = prepared.params[first[g]].dtype()});
      int64_t so = 0;
      for (const ZeroLayout::Bucket& b : L.buckets) {
        if (b.group != g) continue;
        const int64_t block = b.padded / L.num_processes, lo = rank * block, hi = lo + block;
        int64_t off = 0;
        for (const ZeroLayout::Member& m : b.members) {
          const int64_t a = std::max(lo, off), e = std::min(hi, off + m.numel);
          auto it = full[m.param].find(kind);
          if (a < e && it != full[m.param].end())
            kernels::copy_(t.narrow(0, so + a - lo, e - a), it->second.narrow(0, a - off, e - a));
          off += m.numel;
        }
        so += block;
      }
      sd.tensors.emplace_back(sp + kind, t);
    }
  }
}

}  // namespace

int64_t state_slot(const std::string& tname, std::string* kind) {
  const size_t dot = tname.find('.', 6);
  if (tname.rfind("state.", 0) != 0 || dot == std::string::npos || dot == 6 || dot - 6 > 12 ||
      dot + 1 >= tname.size() ||
      !std::all_of(tname.begin() + 6, tname.begin() + static_cast<std::ptrdiff_t>(dot),
                   [](char c) { return c >= '0' && c <= '9'; }))
    return -1;
  if (kind) *kind = tname.substr(dot + 1);
  return std::stoll(tname.substr(6, dot - 6));
}

optim::StateDict reshard_optimizer(const Fields& f, const CheckpointFolder& folder, const json::Value& entry,
                                   const std::string& key, const optim::Optimizer& opt, const ZeroEngine* zero,
                                   int64_t saved_world, int rank) {
  const PreparedParams prepared = prepared_params(opt, zero);
  const json::Value* shards = entry.find("shards");
  const bool sharded = shards && !shards->is_null();
  const size_t slots = sharded ? prepared.groups() : prepared.params.size();  // the saved "state.<i>" entries
  optim::StateDict sd;
  const std::vector<int64_t> slot_steps = resharded_scalars(f, entry, key, opt, prepared, sharded, slots, sd);
  // Every parameter's state and step, whichever layout saved them.
  FullState full;
  std::vector<int64_t> steps(prepared.params.size());
  if (!sharded) {
    full = read_whole_state(f, folder, entry, key, prepared);
    steps = slot_steps;
  } else {
    full = read_sharded_state(f, folder, entry, key, prepared, saved_world);
    for (size_t i = 0; i < prepared.params.size(); ++i) steps[i] = slot_steps[prepared.group_of[i]];
  }
  // This job's state dict.
  if (zero)
    shard_state_dict(prepared, full, steps, rank, sd);
  else
    whole_state_dict(prepared, full, steps, sd);
  return sd;
}

}  // namespace brisk::accelerate::detail
