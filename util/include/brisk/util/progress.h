// A terminal progress bar for long loops: count/total, a bar, rate and time left, plus a
// caller-supplied postfix (running loss, images/s). Redraws in place on a terminal (at most
// 10 times a second); writes a line per 10% when the output is a file or a pipe.
#pragma once
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace brisk {

class ProgressBar {
 public:
  // total: steps expected (0: unknown); unit: what a step is called in the rate ("it", "img").
  ProgressBar(int64_t total, std::string description, std::string unit = "it", bool enabled = true,
              std::FILE* out = stderr);
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // Advances by n steps; the postfix replaces the previous one.
  void update(int64_t n = 1, const std::string& postfix = "");
  void set_postfix(const std::string& postfix) { postfix_ = postfix; }
  // Draws the final state and ends the line (idempotent; the destructor calls it).
  void close();
  int64_t count() const { return count_; }
  double elapsed_seconds() const;

 private:
  void draw(bool final);
  int64_t total_, count_ = 0;
  std::string desc_, unit_, postfix_;
  bool enabled_, tty_, closed_ = false;
  std::FILE* out_;
  std::chrono::steady_clock::time_point start_, last_draw_;
  int last_decile_ = -1;
};

}  // namespace brisk
