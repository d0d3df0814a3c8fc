// ProgressBar drawing.
#include "brisk/util/progress.h"

#include <unistd.h>

#include "brisk/util/cli.h"

namespace brisk {

ProgressBar::ProgressBar(int64_t total, std::string description, std::string unit, bool enabled, std::FILE* out)
    : total_(total), desc_(std::move(description)), unit_(std::move(unit)), enabled_(enabled), out_(out) {
  tty_ = enabled_ && isatty(fileno(out_));
  start_ = last_draw_ = std::chrono::steady_clock::now();
}

ProgressBar::~ProgressBar() {
  close();
}

double ProgressBar::elapsed_seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void ProgressBar::update(int64_t n, const std::string& postfix) {
  count_ += n;
  if (!postfix.empty()) postfix_ = postfix;
  if (!enabled_ || closed_) return;
  auto now = std::chrono::steady_clock::now();
  if (tty_) {
    if (now - last_draw_ >= std::chrono::milliseconds(100) || (total_ > 0 && count_ >= total_)) {
      last_draw_ = now;
      draw(false);
    }
  } else if (total_ > 0) {
    int decile = static_cast<int>(10 * count_ / total_);
    if (decile != last_decile_ && decile < 10) {
      last_decile_ = decile;
      draw(false);
    }
  }
}

void ProgressBar::close() {
  if (closed_) return;
  closed_ = true;
  if (enabled_) draw(true);
}

void ProgressBar::draw(bool final) {
  const double t = elapsed_seconds();
  const double rate = t > 0 ? static_cast<double>(count_) / t : 0.0;
  std::string line = desc_ + ": ";
  if (total_ > 0) {
    const double frac = std::min(1.0, static_cast<double>(count_) / static_cast<double>(total_));
    const int width = 24, filled = static_cast<int>(frac * width);
    char pct[16];
    std::snprintf(pct, sizeof pct, "%3d%% ", static_cast<int>(frac * 100));
    line += pct;
    line += '[';
    line.append(static_cast<size_t>(filled), '#');
    line.append(static_cast<size_t>(width - filled), '.');
    line += "] ";
    line += std::to_string(count_);
    line += '/';
    line += std::to_string(total_);
  } else {
    line += std::to_string(count_);
  }
  char buf[96];
  std::snprintf(buf, sizeof buf, " [%s", cli::format_duration(t).c_str());
  line += buf;
  if (total_ > 0 && count_ > 0 && count_ < total_ && rate > 0) {
    line += '<';
    line += cli::format_duration(static_cast<double>(total_ - count_) / rate);
  }
  std::snprintf(buf, sizeof buf, ", %.1f %s/s]", rate, unit_.c_str());
  line += buf;
  if (!postfix_.empty()) line += " " + postfix_;
  if (tty_) {
    std::fprintf(out_, "\r%s\033[K%s", line.c_str(), final ? "\n" : "");
  } else {
    std::fprintf(out_, "%s\n", line.c_str());
  }
  std::fflush(out_);
}

}  // namespace brisk
