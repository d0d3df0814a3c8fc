// brisk_test_check_tests: checks a build's list of tests (`ctest --show-only=json-v1`). No test
// may pass on a regular expression alone (with PASS_REGULAR_EXPRESSION, CTest ignores the exit
// status), and every test labelled multiprocess or example must run through brisk_test_job,
// which judges every rank's exit status, the time limit and leftover processes.
//   brisk_test_check_tests --ctest CTEST --build-dir DIR    this build's tests
//   brisk_test_check_tests FILE.json                       a saved list
// Exits 0 when every test is fine, 1 naming each one that is not.
#include <brisk/util/json.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace json = brisk::json;

namespace {

std::string run(const std::string& command) {
  std::FILE* p = popen(command.c_str(), "r");
  if (!p) return "";
  std::string out;
  char buf[65536];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  if (pclose(p) != 0) {
    std::fprintf(stderr, "check_tests: '%s' failed\n", command.c_str());
    std::exit(1);
  }
  return out;
}

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

}  // namespace

int main(int argc, char** argv) {
  std::string text;
  if (argc == 5 && std::string(argv[1]) == "--ctest" && std::string(argv[3]) == "--build-dir") {
    text = run("cd " + quote(argv[4]) + " && " + quote(argv[2]) + " --show-only=json-v1");
  } else if (argc == 2) {
    std::ifstream f(argv[1]);
    std::stringstream ss;
    ss << f.rdbuf();
    text = ss.str();
  } else {
    std::fprintf(stderr, "usage: %s --ctest CTEST --build-dir DIR | %s FILE.json\n", argv[0], argv[0]);
    return 2;
  }
  try {
    const json::Value doc = json::parse(text);
    std::vector<std::string> problems;
    size_t checked = 0;
    for (const json::Value& t : doc.at("tests").as_array()) {
      const std::string name = t.at("name").as_string();
      std::string program;
      if (const json::Value* cmd = t.find("command"); cmd && cmd->size() > 0)
        program = std::filesystem::path(cmd->at(0).as_string()).filename().string();
      std::vector<std::string> labels;
      bool regex_only = false;
      if (const json::Value* props = t.find("properties"))
        for (const json::Value& p : props->as_array()) {
          const std::string& pname = p.at("name").as_string();
          if (pname == "PASS_REGULAR_EXPRESSION") regex_only = true;
          if (pname == "LABELS")
            for (const json::Value& l : p.at("value").as_array()) labels.push_back(l.as_string());
        }
      if (regex_only)
        problems.push_back(name +
                           ": PASS_REGULAR_EXPRESSION, so CTest ignores its exit status (use brisk_test_job --grep)");
      bool needs_runner = false;
      for (const std::string& l : labels) needs_runner = needs_runner || l == "multiprocess" || l == "example";
      if (needs_runner && program != "brisk_test_job")
        problems.push_back(std::string(name)
                               .append(": a multiprocess or example test that runs ")
                               .append(program)
                               .append(", not brisk_test_job"));
      ++checked;
    }
    if (checked == 0) problems.emplace_back("no tests found");
    for (const std::string& p : problems) std::printf("FAIL: %s\n", p.c_str());
    if (!problems.empty()) return 1;
    std::printf(
        "%zu tests: none passes on a regular expression alone; every multiprocess and example test runs "
        "through brisk_test_job\n",
        checked);
  } catch (const std::exception& e) {
    std::printf("FAIL: cannot read the test list: %s\n", e.what());
    return 1;
  }
  return 0;
}
