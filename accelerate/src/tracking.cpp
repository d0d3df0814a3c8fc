// Trackers: log() writes metrics from the main process to <project_dir>/metrics.jsonl (one JSON
// object per call, appended) and metrics.csv (a column per key seen so far: a row is appended, and
// the file is rewritten atomically only when a new key widens the header).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "accelerator_impl.h"

namespace brisk {

namespace fs = std::filesystem;

namespace {

constexpr const char* kWho = "Accelerator::log";

std::string csv_cell(const json::Value& v) {
  if (v.is_null()) return "";
  std::string s = v.is_string() ? v.as_string() : v.dump();
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::string csv_row(const std::vector<std::string>& columns, const json::Value& r) {
  std::string line;
  for (size_t i = 0; i < columns.size(); ++i) {
    const json::Value* v = r.find(columns[i]);
    if (i) line += ",";
    if (v) line += csv_cell(*v);
  }
  return line + "\n";
}

}  // namespace

void Accelerator::log(const json::Value::Object& values, std::optional<int64_t> step) {
  if (!is_main_process()) return;
  const fs::path dir = s_.project_dir;
  std::error_code ec;
  fs::create_directories(dir, ec);
  BRISK_CHECK(!ec, kWho, ": cannot create the folder '", dir.string(), "': ", ec.message());
  const fs::path jsonl = dir / "metrics.jsonl", csv = dir / "metrics.csv";
  const bool first = !log_started_;
  if (first) {
    // A resumed run appends to what the saved run logged; a fresh run starts the files over.
    if (resumed_ && fs::exists(jsonl)) {
      std::ifstream in(jsonl);
      std::string line;
      while (std::getline(in, line))
        if (!line.empty()) log_rows_.push_back(json::parse(line));
      log_jsonl_ = io::AppendFile(jsonl.string(), /*truncate=*/false, kWho);
    } else {
      log_jsonl_ = io::AppendFile(jsonl.string(), /*truncate=*/true, kWho);
    }
    log_started_ = true;
  }
  json::Value row = json::Value::object();
  if (step) row.set("step", *step);
  for (const auto& [k, v] : values) row.set(k, v);
  log_jsonl_.append(row.dump() + "\n");
  log_rows_.push_back(row);
  // The CSV: the union of keys in order of first appearance.
  // The first call also takes the keys of the rows a resumed run read back, in their order.
  bool widened = first;
  for (size_t i = first ? 0 : log_rows_.size() - 1; i < log_rows_.size(); ++i)
    for (const auto& [k, v] : log_rows_[i].items())
      if (std::find(log_columns_.begin(), log_columns_.end(), k) == log_columns_.end()) {
        log_columns_.push_back(k);
        widened = true;
      }
  if (!widened) {
    log_csv_.append(csv_row(log_columns_, row));
    return;
  }
  std::string text;
  for (size_t i = 0; i < log_columns_.size(); ++i) text += (i ? "," : "") + log_columns_[i];
  text += "\n";
  for (const json::Value& r : log_rows_) text += csv_row(log_columns_, r);
  log_csv_.close();
  io::write_file_atomic(csv.string(), text, kWho);
  log_csv_ = io::AppendFile(csv.string(), /*truncate=*/false, kWho);
}

}  // namespace brisk
