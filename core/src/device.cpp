// Device parsing and printing.
#include "brisk/core/device.h"

#include <string>

#include "brisk/util/error.h"

namespace brisk {

Device Device::parse(std::string_view s) {
  if (s == "cpu") return kCPU;
  if (s.substr(0, 4) == "cuda") {
    if (s.size() == 4) return cuda_device(0);
    if (s[4] == ':' && s.size() > 5) {
      int idx = 0;
      for (char c : s.substr(5)) {
        BRISK_CHECK(c >= '0' && c <= '9', "Device::parse: bad device index in '", std::string(s), "'");
        idx = idx * 10 + (c - '0');
      }
      return cuda_device(idx);
    }
  }
  BRISK_THROW("Device::parse: unknown device '", std::string(s), "' (expected 'cpu', 'cuda' or 'cuda:N')");
}

std::string Device::str() const {
  return is_cpu() ? std::string("cpu") : "cuda:" + std::to_string(index);
}

}  // namespace brisk
