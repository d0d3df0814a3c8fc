// `brisk plot`: draws the curves of one or several runs' metrics.jsonl (loss, accuracy,
// throughput; one panel per metric, one line per run, named by its folder) to PNG and SVG with
// gnuplot, which is looked up on PATH when the command runs (Debian: gnuplot-nox).
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "brisk/util/cli.h"
#include "brisk/util/error.h"
#include "brisk/util/json.h"
#include "commands.h"

namespace brisk::cli_commands {

namespace fs = std::filesystem;
namespace json = brisk::json;

namespace {

struct Series {
  std::string metric;
  std::vector<std::pair<double, double>> points;  // (x, value) in file order
};

struct Run {
  std::string path, name;
  std::vector<Series> series;  // in the order the metrics first appear in the file
  Series* find(const std::string& metric) {
    for (Series& s : series)
      if (s.metric == metric) return &s;
    return nullptr;
  }
  const Series* find(const std::string& metric) const {
    for (const Series& s : series)
      if (s.metric == metric) return &s;
    return nullptr;
  }
};

// Reads one metrics.jsonl: every numeric key of every record that has the x key becomes a point.
Run read_run(const std::string& path, const std::string& x_key) {
  std::ifstream in(path);
  BRISK_CHECK(in, "plot: cannot read '", path, "': ", std::strerror(errno));
  Run run;
  run.path = path;
  std::string line;
  for (size_t line_no = 1; std::getline(in, line); ++line_no) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    json::Value record;
    try {
      record = json::parse(line);
    } catch (const Error& e) {
      BRISK_THROW("plot: ", path, ":", line_no, ": not a JSON record: ", e.message());
    }
    BRISK_CHECK(record.is_object(), "plot: ", path, ":", line_no, ": expected a JSON object, got ",
                json::type_name(record.type()));
    const json::Value* x = record.find(x_key);
    if (!x || !x->is_number()) continue;  // e.g. a summary record without an epoch
    for (const auto& [key, value] : record.items()) {
      if (key == "step" || key == "epoch" || !value.is_number()) continue;
      Series* s = run.find(key);
      if (!s) {
        run.series.push_back({key, {}});
        s = &run.series.back();
      }
      s->points.emplace_back(x->as_double(), value.as_double());
    }
  }
  return run;
}

// Metrics drawn when --metrics is not given: losses, accuracies and throughputs.
bool plotted_by_default(const std::string& m) {
  auto ends_with = [&](const char* suffix) {
    const size_t n = std::strlen(suffix);
    return m.size() >= n && m.compare(m.size() - n, n, suffix) == 0;
  };
  return m.find("loss") != std::string::npos || m.find("acc") != std::string::npos || ends_with("_per_s") ||
         ends_with("per_second");
}

// The folder that holds the file names the run; folders of the same name get their whole path.
void name_runs(std::vector<Run>& runs) {
  std::map<std::string, int> count;
  for (Run& r : runs) {
    fs::path dir = fs::absolute(r.path).lexically_normal().parent_path();
    r.name = dir.filename().string();
    if (r.name.empty()) r.name = dir.string();
    ++count[r.name];
  }
  for (Run& r : runs)
    if (count[r.name] > 1) r.name = fs::path(r.path).parent_path().lexically_normal().string();
  for (Run& r : runs)
    if (r.name.empty() || r.name == ".") r.name = r.path;
}

std::string find_on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const fs::path candidate = fs::path(dir.empty() ? "." : dir) / program;
    if (access(candidate.c_str(), X_OK) == 0 && !fs::is_directory(candidate)) return candidate.string();
  }
  return "";
}

// A gnuplot single-quoted string (no escapes inside; a quote is doubled).
std::string gp_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) {
    if (c == '\'') q += '\'';
    q += c;
  }
  q += '\'';
  return q;
}

// Runs gnuplot on the script; returns its exit status (127 when it could not be started).
int run_gnuplot(const std::string& gnuplot, const std::string& script) {
  const pid_t pid = fork();
  BRISK_CHECK(pid >= 0, "plot: cannot start gnuplot: ", std::strerror(errno));
  if (pid == 0) {
    execl(gnuplot.c_str(), gnuplot.c_str(), script.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// The metrics to draw: those --metrics names (each one some run has), else every key that looks
// like a loss, an accuracy or a throughput, else every key; in order of first appearance.
std::vector<std::string> choose_metrics(const std::vector<Run>& runs, const std::string& metrics,
                                        const std::string& x_key) {
  std::vector<std::string> available;
  for (const Run& r : runs)
    for (const Series& s : r.series)
      if (std::find(available.begin(), available.end(), s.metric) == available.end()) available.push_back(s.metric);
  std::string files;
  for (const Run& r : runs) {
    if (!files.empty()) files += ", ";
    files += r.path;
  }
  BRISK_CHECK(!available.empty(), "plot: no numeric series with an '", x_key, "' in ", files);
  std::vector<std::string> chosen;
  if (!metrics.empty()) {
    for (const std::string& m : cli::split_comma_list(metrics)) {
      if (std::find(available.begin(), available.end(), m) == available.end()) {
        std::string have;
        for (const std::string& a : available) {
          if (!have.empty()) have += ", ";
          have += a;
        }
        BRISK_THROW("plot: unknown metric '", m, "': the files have ", have);
      }
      if (std::find(chosen.begin(), chosen.end(), m) == chosen.end()) chosen.push_back(m);
    }
  } else {
    for (const std::string& m : available)
      if (plotted_by_default(m)) chosen.push_back(m);
    if (chosen.empty()) chosen = available;
  }
  return chosen;
}

// The panels of the plot (a gnuplot multiplot of `rows` x `cols`), each run's points of each metric
// written to a data file in `tmp`.
std::string plot_body(const std::vector<Run>& runs, const std::vector<std::string>& chosen, const std::string& x_key,
                      const fs::path& tmp, size_t rows, size_t cols) {
  std::ostringstream body;
  body << "set multiplot layout " << rows << "," << cols << "\n";
  for (size_t m = 0; m < chosen.size(); ++m) {
    body << "set title " << gp_quote(chosen[m]) << "\nset xlabel " << gp_quote(x_key)
         << "\nset grid\nset key below\nplot ";
    bool first = true;
    for (size_t r = 0; r < runs.size(); ++r) {
      const Series* s = runs[r].find(chosen[m]);
      if (!s) continue;
      char name[64];
      std::snprintf(name, sizeof name, "r%zu_m%zu.dat", r, m);
      const fs::path data = tmp / name;
      std::ofstream f(data);
      f.precision(17);
      for (const auto& [x, y] : s->points) f << x << ' ' << y << '\n';
      BRISK_CHECK(f.good(), "plot: cannot write ", data.string());
      body << (first ? "" : ", ") << gp_quote(data.string()) << " using 1:2 with "
           << (s->points.size() > 30 ? "lines" : "linespoints pt 7 ps 0.6") << " lt " << r + 1 << " lw 1.5 title "
           << gp_quote(runs[r].name);
      first = false;
    }
    body << "\n";
  }
  body << "unset multiplot\nset output\n";
  return body.str();
}

// The gnuplot script that draws `body` to base.png (pngcairo where gnuplot has it) and base.svg.
void write_script(const fs::path& script, const std::string& body, const std::string& base, int width, int height) {
  std::ofstream f(script);
  f << "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n  set terminal pngcairo noenhanced size " << width << ","
    << height << " font 'sans,10'\n} else {\n  set terminal png noenhanced size " << width << "," << height
    << "\n}\nset output " << gp_quote(base + ".png") << "\n"
    << body << "set terminal svg noenhanced size " << width << "," << height
    << " font 'sans,10' background '#ffffff'\nset output " << gp_quote(base + ".svg") << "\n"
    << body;
  BRISK_CHECK(f.good(), "plot: cannot write ", script.string());
}

}  // namespace

int plot(int argc, char** argv) {
  const std::string me = argv[0];
  std::string output = "metrics_plot", metrics, x_key = "step";
  cli::Parser p(me,
                "Draws the loss, accuracy and throughput curves of one or several runs from their metrics.jsonl\n"
                "(what the Trainer, examples/fashion_mnist and examples/gpt2 write) to OUT.png and OUT.svg:\n"
                "one panel per metric, one line per run, each run named by the folder its file is in.\n"
                "Needs gnuplot on PATH (Debian/Ubuntu: apt-get install gnuplot-nox).\n\n"
                "  brisk plot out/fashion_mnist/metrics.jsonl out/run2/metrics.jsonl -o curves");
  p.add("output", "where the pictures go: OUT.png and OUT.svg (a .png/.svg suffix is dropped)", &output, 'o');
  p.add("metrics", "comma-separated keys to draw (default: every key with loss, acc, _per_s or per_second in its name)",
        &metrics);
  p.add("x", "the x axis: step or epoch", &x_key);
  p.allow_positionals("METRICS.jsonl...");
  if (!p.parse(argc, argv)) return p.exit_code();
  try {
    BRISK_CHECK(!p.positionals().empty(), "plot: no metrics.jsonl given; usage: brisk plot METRICS.jsonl... [-o OUT]");
    BRISK_CHECK(x_key == "step" || x_key == "epoch", "plot: --x '", x_key, "' is not valid; expected step or epoch");
    std::vector<Run> runs;
    for (const std::string& path : p.positionals()) runs.push_back(read_run(path, x_key));
    name_runs(runs);
    const std::vector<std::string> chosen = choose_metrics(runs, metrics, x_key);

    // The data (one file per run and metric) and the script go to a temporary folder.
    std::string tmpl = (fs::temp_directory_path() / "brisk-plot-XXXXXX").string();
    BRISK_CHECK(mkdtemp(tmpl.data()), "plot: cannot create a temporary folder: ", std::strerror(errno));
    const fs::path tmp = tmpl;
    struct Cleanup {
      fs::path dir;
      ~Cleanup() {
        std::error_code ec;
        fs::remove_all(dir, ec);
      }
    } cleanup{tmp};

    std::string base = output;
    for (const char* ext : {".png", ".svg"})
      if (fs::path(base).extension() == ext) base = fs::path(base).replace_extension().string();
    BRISK_CHECK(!base.empty(), "plot: --output is empty");
    const fs::path out_dir = fs::path(base).parent_path();
    if (!out_dir.empty()) fs::create_directories(out_dir);

    const size_t n = chosen.size(), cols = n <= 3 ? n : (n == 4 ? 2 : 3), rows = (chosen.size() + cols - 1) / cols;
    const std::string body = plot_body(runs, chosen, x_key, tmp, rows, cols);
    const int width = static_cast<int>(560 * cols), height = static_cast<int>((360 + 20 * runs.size()) * rows);
    const fs::path script = tmp / "plot.gp";
    write_script(script, body, base, width, height);

    const std::string gnuplot = find_on_path("gnuplot");
    BRISK_CHECK(!gnuplot.empty(),
                "plot: gnuplot not found on PATH; install it (Debian/Ubuntu: apt-get install gnuplot-nox; "
                "macOS: brew install gnuplot) and run again");
    const int status = run_gnuplot(gnuplot, script.string());
    BRISK_CHECK(status == 0, "plot: ", gnuplot, " failed (exit status ", status, ")");
    const std::string png = base + ".png", svg = base + ".svg";
    std::printf("wrote %s and %s (%zu run%s, %zu metric%s: ", png.c_str(), svg.c_str(), runs.size(),
                runs.size() == 1 ? "" : "s", chosen.size(), chosen.size() == 1 ? "" : "s");
    for (size_t m = 0; m < chosen.size(); ++m) std::printf("%s%s", m ? ", " : "", chosen[m].c_str());
    std::printf(")\n");
    return 0;
  } catch (const Error& e) {
    return fail(me, e.message());
  } catch (const fs::filesystem_error& e) {
    return fail(me, e.what());
  }
}

}  // namespace brisk::cli_commands
