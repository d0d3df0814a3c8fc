// brisk::Error and BRISK_CHECK: every user-facing failure is an exception that names
// the op and the offending shapes or values, with the file and line it came from.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace brisk {

class Error : public std::runtime_error {
 public:
  Error(const std::string& msg, const char* file, int line);
  // The message without the " (file:line)" suffix.
  const std::string& message() const { return msg_; }

 private:
  std::string msg_;
};

namespace detail {
template <class T>
void stream_one(std::ostringstream& os, const T& v) {
  os << v;
}
template <class T>
void stream_one(std::ostringstream& os, const std::vector<T>& v) {
  os << '[';
  for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  os << ']';
}
inline void stream_one(std::ostringstream& os, bool v) {
  os << (v ? "true" : "false");
}

template <class... Args>
std::string str_cat(const Args&... args) {
  std::ostringstream os;
  (stream_one(os, args), ...);
  return os.str();
}
}  // namespace detail

[[noreturn]] void throw_error(const std::string& msg, const char* file, int line);

}  // namespace brisk

#define BRISK_CHECK(cond, ...)                                                         \
  do {                                                                                 \
    if (!(cond)) [[unlikely]]                                                          \
      ::brisk::throw_error(::brisk::detail::str_cat(__VA_ARGS__), __FILE__, __LINE__); \
  } while (0)

#define BRISK_THROW(...) ::brisk::throw_error(::brisk::detail::str_cat(__VA_ARGS__), __FILE__, __LINE__)
