// Device: where a tensor's bytes live.
#pragma once
#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>

namespace brisk {

enum class DeviceKind : uint8_t { CPU, CUDA };

struct Device {
  DeviceKind kind = DeviceKind::CPU;
  int index = 0;

  constexpr Device() = default;
  constexpr Device(DeviceKind k, int i = 0) : kind(k), index(i) {}  // NOLINT: Device(kCPU) reads well
  // "cpu", "cuda", "cuda:1"
  static Device parse(std::string_view s);

  constexpr bool is_cpu() const { return kind == DeviceKind::CPU; }
  constexpr bool is_cuda() const { return kind == DeviceKind::CUDA; }
  std::string str() const;
  friend constexpr bool operator==(const Device&, const Device&) = default;
};

inline constexpr Device kCPU{DeviceKind::CPU, 0};
inline Device cuda_device(int i = 0) {
  return Device{DeviceKind::CUDA, i};
}
inline std::ostream& operator<<(std::ostream& os, const Device& d) {
  return os << d.str();
}

}  // namespace brisk
