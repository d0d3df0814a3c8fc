// Readers of untrusted bytes at the sizes their formats allow (label slow: each test builds and
// parses 100 MB). A safetensors header may be up to 100 MB (the reference implementation's limit);
// it must parse in seconds and in under 1 GB, whatever it is made of. The worst cases per byte are
// the smallest entries there are: empty tensors, and metadata entries with empty values.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <brisk/brisk.h>

#include <chrono>
#include <iostream>
#include <string>

using namespace brisk;
using namespace brisk::data;

namespace {

constexpr size_t kHeader = 100'000'000 - 8;  // with the 8-byte length: the largest header allowed

long peak_rss_mib() {  // ctest runs each test in its own process
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss / 1024;
}

std::string header_of(const std::string& open, const std::string& tail, const std::string& last, size_t* count) {
  std::string bytes;
  for (int i = 0; i < 8; ++i) bytes += static_cast<char>((uint64_t{kHeader} >> (8 * i)) & 0xFF);
  bytes.reserve(kHeader + 8);
  bytes += open;
  *count = 0;
  while (bytes.size() + 100 < kHeader) {
    bytes += std::to_string((*count)++);
    bytes += tail;
  }
  bytes += last;
  bytes.append(kHeader + 8 - bytes.size(), ' ');
  return bytes;
}

template <class F>
void expect_bounded(const std::string& what, F parse) {
  const long before = peak_rss_mib();
  const auto start = std::chrono::steady_clock::now();
  const size_t n = parse();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const long used = peak_rss_mib() - before;
  std::cout << "[          ] 100 MB header of " << n << " " << what << ": " << used << " MiB, " << seconds << " s\n";
  EXPECT_LT(used, 1000) << "MiB";
  EXPECT_LT(seconds, 60.0) << "s";  // seconds on an idle machine; bounds only a runaway here
}

}  // namespace

TEST(LargeSafetensorsHeader, OfTensorsParsesInUnderOneGigabyte) {
  size_t count = 0;
  const std::string bytes = header_of(R"({")", R"(":{"dtype":"U8","shape":[0],"data_offsets":[0,0]},")",
                                      R"(last":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}})", &count);
  ASSERT_EQ(bytes.size(), kHeader + 8);
  expect_bounded("empty tensors", [&] {
    const size_t n = parse_safetensors(bytes).tensors.size();
    EXPECT_EQ(n, count + 1);
    return n;
  });
}

TEST(LargeSafetensorsHeader, OfMetadataParsesInUnderOneGigabyte) {
  size_t count = 0;
  const std::string bytes = header_of(R"({"__metadata__":{")", R"(":"",")", R"(last":""}})", &count);
  ASSERT_EQ(bytes.size(), kHeader + 8);
  expect_bounded("metadata entries", [&] {
    const size_t n = parse_safetensors(bytes).metadata.size();
    EXPECT_EQ(n, count + 1);
    return n;
  });
}

TEST(LargeSafetensorsHeader, OfOneLongShapeAndUnknownFieldsParsesInUnderOneGigabyte) {
  // Values the reader skips (an unknown field holding a 100 MB array) cost nothing.
  std::string bytes;
  for (int i = 0; i < 8; ++i) bytes += static_cast<char>((uint64_t{kHeader} >> (8 * i)) & 0xFF);
  bytes += R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,0],"x":[)";
  while (bytes.size() + 100 < kHeader) bytes += "0,";
  bytes += R"(0]}})";
  bytes.append(kHeader + 8 - bytes.size(), ' ');
  expect_bounded("values skipped", [&] {
    try {
      parse_safetensors(bytes);
      ADD_FAILURE() << "expected brisk::Error (offsets [0, 0] for one byte)";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("needs 1 bytes"), std::string::npos) << e.what();
    }
    return size_t{50'000'000};
  });
}
