// brisk::Error: the message plus where it was raised.
#include "brisk/util/error.h"

#include <cstring>
#include <string_view>

namespace brisk {

static std::string with_location(const std::string& msg, const char* file, int line) {
  const char* base = std::strrchr(file, '/');
  return msg + " (" + (base ? base + 1 : file) + ":" + std::to_string(line) + ")";
}

Error::Error(const std::string& msg, const char* file, int line)
    : std::runtime_error(with_location(msg, file, line)), msg_(msg) {}

void throw_error(const std::string& msg, const char* file, int line) {
  throw Error(msg, file, line);
}

}  // namespace brisk

namespace brisk::detail {

void throw_bad_choice(std::string_view what, std::string_view got, const std::string_view* valid, size_t count) {
  std::string list;
  for (size_t i = 0; i < count; ++i) {
    if (i) list += ", ";
    list += valid[i];
  }
  BRISK_THROW(what, ": '", got, "' is not valid; expected one of: ", list);
}

}  // namespace brisk::detail
