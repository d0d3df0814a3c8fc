// The disk side of save_state (checkpoint_save_job.h): each rank writes, syncs and hashes its files
// into the temporary folder and (all but the main process) then a small "done" file listing them;
// the main process waits for every rank's done file, writes the manifest, swaps the folder in
// atomically and applies total_limit. Files only, no collectives: safe on a background thread.
#include "checkpoint_save_job.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "brisk/accelerate/accelerator.h"
#include "brisk/data/safetensors.h"
#include "brisk/util/error.h"
#include "brisk/util/fs.h"
#include "brisk/util/trace.h"

namespace brisk::accelerate::detail {

namespace fs = std::filesystem;

namespace {

constexpr const char* kOp = "Accelerator::save_state";

// Test hook: BRISK_TEST_CHECKPOINT_KILL_AFTER_FILES=k makes this process SIGKILL itself after
// writing k checkpoint files, as a crash half-way through a save would.
int files_written = 0;
void count_file_written() {
  ++files_written;
  if (const char* v = std::getenv("BRISK_TEST_CHECKPOINT_KILL_AFTER_FILES"); v && std::atoi(v) == files_written)
    std::raise(SIGKILL);
}

std::string message_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const Error& x) {
    return x.message();
  } catch (const std::exception& x) {
    return std::string(kOp) + ": " + x.what();
  }
}

std::string read_small_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  BRISK_CHECK(in.good(), kOp, ": cannot open '", p.string(), "'");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

std::string SaveJob::done_file(int rank) {
  return ".rank" + std::to_string(rank) + ".done";
}

SaveJob::SaveJob(SavePlan plan, bool background) : plan_(std::move(plan)) {
  if (background) {
    thread_ = std::thread([this] {
      finish_own_files();
      complete();
    });
  } else {
    finish_own_files();  // the rest in wait_all(), after the ranks agreed that every rank's files are there
  }
}

SaveJob::~SaveJob() {
  cancel();
  if (thread_.joinable()) thread_.join();
}

void SaveJob::wait_own_files() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return own_done_; });
  if (own_error_) std::rethrow_exception(own_error_);
}

void SaveJob::cancel() {
  cancelled_ = true;
}

void SaveJob::wait_all() {
  if (thread_.joinable()) {
    thread_.join();
  } else if (!all_done_) {
    complete();
  }
  if (error_) std::rethrow_exception(error_);
}

// This rank's files, then (all but the main process) its done file.
void SaveJob::finish_own_files() {
  std::exception_ptr err;
  try {
    write_own_files();
  } catch (...) {
    err = std::current_exception();
  }
  if (plan_.rank != 0) {
    try {
      write_done_file(err ? message_of(err) : "");
    } catch (...) {
      if (!err) err = std::current_exception();
    }
  }
  {
    std::lock_guard lock(mu_);
    own_done_ = true;
    own_error_ = err;
  }
  cv_.notify_all();
}

// The main process completes the checkpoint: the manifest once every rank's files are there, the
// publication, total_limit. A failure leaves no temporary folder behind.
void SaveJob::complete() {
  std::exception_ptr err = own_error_;
  if (plan_.rank == 0 && !err) {
    try {
      collect_other_ranks();
      write_manifest();
      publish();
      remove_beyond_total_limit();
    } catch (...) {
      err = std::current_exception();
    }
  }
  if (err) discard();
  plan_.files.clear();  // the copy of the state is no longer needed
  std::lock_guard lock(mu_);
  all_done_ = true;
  error_ = err;
}

// Each file written and fsynced; its size and checksum taken from the bytes written (no second read).
void SaveJob::write_own_files() {
  for (SaveFile& f : plan_.files) {
    auto span = trace_span("write " + f.name, "checkpoint", kTraceCheckpointTid);
    if (f.is_safetensors) {
      f.bytes = data::safetensors_bytes(f.tensors, f.metadata);
      f.tensors.clear();  // back to the allocator's cache, for the next save's copies
    }
    io::write_file_synced((plan_.tmp / f.name).string(), f.bytes, kOp);
    count_file_written();
    written_[f.name] = {static_cast<int64_t>(f.bytes.size()), accelerate::sha256_hex(f.bytes)};
    std::string().swap(f.bytes);
  }
}

// What the main process reads to know that this rank's files are on disk (or why they are not).
void SaveJob::write_done_file(const std::string& error) {
  json::Value d = json::Value::object();
  d.set("rank", plan_.rank);
  d.set("error", error.empty() ? json::Value() : json::Value(error));
  d.set("files", manifest_file_list(written_));
  io::write_file_atomic((plan_.tmp / done_file(plan_.rank)).string(), d.dump(), kOp);
}

// Main process: waits for every other rank's done file (polling: no collective on this thread),
// takes the sizes and checksums of their files from it and removes it.
void SaveJob::collect_other_ranks() {
  auto span = trace_span("wait for the other ranks' files", "checkpoint", kTraceCheckpointTid);
  for (int r = 1; r < plan_.world_size; ++r) {
    const fs::path p = plan_.tmp / done_file(r);
    auto pause = std::chrono::microseconds(200);
    std::error_code ec;
    while (!fs::exists(p, ec)) {
      BRISK_CHECK(!cancelled_, kOp, ": rank ", r, " did not finish writing its files into '", plan_.tmp.string(),
                  "' (another rank failed)");
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(20000));
    }
    const json::Value d = json::parse(read_small_file(p));
    BRISK_CHECK(d.at("error").is_null(), kOp, ": rank ", r, " could not write its files: ", d.at("error").as_string());
    for (const json::Value& f : d.at("files").as_array())
      written_[f.at("path").as_string()] = {f.at("size").as_int(), f.at("sha256").as_string()};
    fs::remove(p);
  }
}

// The manifest, written last, lists every file with its size and SHA-256 and carries its own
// checksum: it is what makes the checkpoint complete.
void SaveJob::write_manifest() {
  auto span = trace_span("manifest and publish", "checkpoint", kTraceCheckpointTid);
  std::map<std::string, ManifestEntry> files;
  for (const auto& e : fs::directory_iterator(plan_.tmp)) {
    const std::string name = e.path().filename().string();
    auto it = written_.find(name);
    files[name] = it != written_.end() ? it->second
                                       : ManifestEntry{static_cast<int64_t>(fs::file_size(plan_.tmp / name)),
                                                       accelerate::sha256_file((plan_.tmp / name).string())};
  }
  io::write_file_synced((plan_.tmp / kManifest).string(), manifest_bytes(files), kOp);
  count_file_written();
  io::fsync_dir(plan_.tmp.string(), kOp);
}

// Swaps the finished folder with an older one of that name in one atomic step (renameat2
// RENAME_EXCHANGE), so that a crash at any point leaves a complete checkpoint there; then
// removes the old one.
void SaveJob::publish() {
  const fs::path& tmp = plan_.tmp;
  const fs::path& final_dir = plan_.final_dir;
  std::error_code ec;
  if (fs::exists(final_dir, ec)) {
    if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, final_dir.c_str(), RENAME_EXCHANGE) == 0) {
      io::fsync_dir(plan_.parent.string(), kOp);
      fs::remove_all(tmp);
    } else {
      // A file system without RENAME_EXCHANGE: move the old one aside first.
      BRISK_CHECK(errno == EINVAL || errno == ENOSYS || errno == ENOTSUP, kOp, ": cannot replace '", final_dir.string(),
                  "': ", std::strerror(errno));
      std::string old_name = ".";  // (not "." + name: GCC 12 warns falsely about that at -O3)
      old_name += final_dir.filename().string();
      old_name += ".old";
      const fs::path old = plan_.parent / old_name;
      fs::remove_all(old);
      fs::rename(final_dir, old);
      fs::rename(tmp, final_dir);
      fs::remove_all(old);
    }
  } else {
    fs::rename(tmp, final_dir);
  }
  io::fsync_dir(plan_.parent.string(), kOp);
}

// total_limit: the oldest automatic checkpoints go once the new one is in place.
void SaveJob::remove_beyond_total_limit() {
  if (plan_.root.empty() || !plan_.total_limit) return;
  auto existing = numbered_checkpoints(plan_.root);
  for (size_t i = 0; i + static_cast<size_t>(*plan_.total_limit) < existing.size(); ++i)
    fs::remove_all(existing[i].second);
}

// A failed save leaves nothing behind but the checkpoints that were there before.
void SaveJob::discard() {
  std::error_code ec;
  if (plan_.rank == 0) fs::remove_all(plan_.tmp, ec);
}

}  // namespace brisk::accelerate::detail
