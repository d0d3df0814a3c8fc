// Trackers: log() writes metrics from the main process to <project_dir>/metrics.jsonl (one JSON
// object per call) and metrics.csv (rewritten, a column per key seen so far).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "accelerator_impl.h"

namespace brisk {

namespace fs = std::filesystem;
namespace json = data::json;

namespace {

std::string csv_cell(const json::Value& v) {
  if (v.is_null()) return "";
  std::string s = v.is_string() ? v.as_string() : v.dump();
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

}  // namespace

void Accelerator::log(const json::Value::Object& values, std::optional<int64_t> step) {
  if (!is_main_process()) return;
  const fs::path dir = s_.project_dir;
  fs::create_directories(dir);
  const fs::path jsonl = dir / "metrics.jsonl", csv = dir / "metrics.csv";
  if (!log_started_) {
    log_started_ = true;
    // A resumed run appends to what the saved run logged; a fresh run starts the files over.
    if (resumed_ && fs::exists(jsonl)) {
      std::ifstream in(jsonl);
      std::string line;
      while (std::getline(in, line))
        if (!line.empty()) log_rows_.push_back(json::parse(line));
    } else {
      std::ofstream(jsonl, std::ios::trunc);
    }
  }
  json::Value row = json::Value::object();
  if (step) row.set("step", *step);
  for (const auto& [k, v] : values) row.set(k, v);
  {
    std::ofstream out(jsonl, std::ios::app);
    out << row.dump() << "\n";
    BRISK_CHECK(out.good(), "Accelerator::log: cannot write '", jsonl.string(), "'");
  }
  log_rows_.push_back(row);
  // The CSV: the union of keys in order of first appearance.
  std::vector<std::string> columns;
  for (const json::Value& r : log_rows_)
    for (const auto& [k, v] : r.items())
      if (std::find(columns.begin(), columns.end(), k) == columns.end()) columns.push_back(k);
  std::ostringstream text;
  for (size_t i = 0; i < columns.size(); ++i) text << (i ? "," : "") << columns[i];
  text << "\n";
  for (const json::Value& r : log_rows_) {
    for (size_t i = 0; i < columns.size(); ++i) {
      const json::Value* v = r.find(columns[i]);
      text << (i ? "," : "") << (v ? csv_cell(*v) : "");
    }
    text << "\n";
  }
  const fs::path tmp = dir / ".metrics.csv.tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text.str();
  }
  fs::rename(tmp, csv);
}

}  // namespace brisk
