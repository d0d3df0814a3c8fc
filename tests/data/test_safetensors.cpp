// safetensors: round trips of every dtype (0-dim and empty included), byte-for-byte interop
// with files as the reference implementation writes them, atomic writes, and one test per
// malformation the reader must reject.
#include <gtest/gtest.h>

#include <brisk/brisk.h>

#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "common/bytes.h"
#include "common/rss.h"
#include "common/sanitizers.h"
#include "data/temp_dir.h"

using namespace brisk;
using brisk::testing::le64;
using brisk::testing::peak_rss_mib;
using namespace brisk::data;
using brisk::testing::TempDir;

namespace {

// A file from a raw header and data section (header length = header.size()).
std::string craft(const std::string& header, const std::string& data = "") {
  return le64(header.size()) + header + data;
}

std::string error_of(const std::string& bytes) {
  TempDir dir;
  const std::string path = dir.file("bad.safetensors");
  brisk::testing::write_file(path, bytes);
  try {
    load_safetensors(path);
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find(path), std::string::npos) << "message should name the file: " << m;
    return m;
  }
  return "no error";
}

#define EXPECT_REJECTS(bytes, fragment)                                       \
  do {                                                                        \
    const std::string msg_ = error_of(bytes);                                 \
    EXPECT_NE(msg_.find(fragment), std::string::npos) << "message: " << msg_; \
  } while (0)

const std::string kF32x2 = R"("dtype":"F32","shape":[2],)";

// The bytes of {"a": F32 [2] = {1, 2}, "b": I64 [1] = {7}} with metadata {"format": "pt"} as
// the reference implementation writes them: "__metadata__" first, then tensors by dtype in
// the crate's descending enum order (I64 before F32), each {dtype, shape, data_offsets};
// compact JSON padded with spaces to a multiple of 8 (139 + 5 = 144 = 0x90); data in that order.
const unsigned char kReference[] = {
    0x90, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x7b, 0x22, 0x5f, 0x5f, 0x6d, 0x65, 0x74, 0x61, 0x64, 0x61, 0x74,
    0x61, 0x5f, 0x5f, 0x22, 0x3a, 0x7b, 0x22, 0x66, 0x6f, 0x72, 0x6d, 0x61, 0x74, 0x22, 0x3a, 0x22, 0x70, 0x74, 0x22,
    0x7d, 0x2c, 0x22, 0x62, 0x22, 0x3a, 0x7b, 0x22, 0x64, 0x74, 0x79, 0x70, 0x65, 0x22, 0x3a, 0x22, 0x49, 0x36, 0x34,
    0x22, 0x2c, 0x22, 0x73, 0x68, 0x61, 0x70, 0x65, 0x22, 0x3a, 0x5b, 0x31, 0x5d, 0x2c, 0x22, 0x64, 0x61, 0x74, 0x61,
    0x5f, 0x6f, 0x66, 0x66, 0x73, 0x65, 0x74, 0x73, 0x22, 0x3a, 0x5b, 0x30, 0x2c, 0x38, 0x5d, 0x7d, 0x2c, 0x22, 0x61,
    0x22, 0x3a, 0x7b, 0x22, 0x64, 0x74, 0x79, 0x70, 0x65, 0x22, 0x3a, 0x22, 0x46, 0x33, 0x32, 0x22, 0x2c, 0x22, 0x73,
    0x68, 0x61, 0x70, 0x65, 0x22, 0x3a, 0x5b, 0x32, 0x5d, 0x2c, 0x22, 0x64, 0x61, 0x74, 0x61, 0x5f, 0x6f, 0x66, 0x66,
    0x73, 0x65, 0x74, 0x73, 0x22, 0x3a, 0x5b, 0x38, 0x2c, 0x31, 0x36, 0x5d, 0x7d, 0x7d, 0x20, 0x20, 0x20, 0x20, 0x20,
    0x07, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0x40,
};

std::string reference_bytes() {
  return std::string(reinterpret_cast<const char*>(kReference), sizeof kReference);
}

}  // namespace

// --- interop ---------------------------------------------------------------------

TEST(Safetensors, LoadsAFileWrittenByTheReferenceImplementation) {
  TempDir dir;
  brisk::testing::write_file(dir.file("ref.safetensors"), reference_bytes());
  SafetensorsFile f = load_safetensors(dir.file("ref.safetensors"));
  ASSERT_EQ(f.tensors.size(), 2u);
  EXPECT_EQ(f.tensors[0].first, "b");  // file order
  EXPECT_EQ(f.at("a").dtype(), DType::F32);
  EXPECT_EQ(f.at("a").to_vector<float>(), (std::vector<float>{1.0f, 2.0f}));
  EXPECT_EQ(f.at("b").dtype(), DType::I64);
  EXPECT_EQ(f.at("b").sizes(), (Shape{1}));
  EXPECT_EQ(f.at("b").item<int64_t>(), 7);
  EXPECT_EQ(f.metadata, (std::map<std::string, std::string>{{"format", "pt"}}));
}

TEST(Safetensors, WritesTheSameBytesAsTheReferenceImplementation) {
  NamedTensors t = {{"a", tensor<float>({1.0f, 2.0f})}, {"b", tensor<int64_t>({7})}};
  EXPECT_EQ(safetensors_bytes(t, {{"format", "pt"}}), reference_bytes());
  TempDir dir;
  save_safetensors(dir.file("m.safetensors"), t, {{"format", "pt"}});
  EXPECT_EQ(brisk::testing::read_file(dir.file("m.safetensors")), reference_bytes());
}

TEST(Safetensors, MatchesReferenceLayoutForSingleTensorsAndEmptyFiles) {
  // One F32 (1, 2, 3) tensor named "attn.0": the header is exactly 64 bytes, no padding;
  // "attn0" shaped (1, 1, 2, 3): 65 bytes, padded with 7 spaces to 72.
  std::vector<float> v = {0, 1, 2, 3, 4, 5};
  std::string data(reinterpret_cast<const char*>(v.data()), 24);
  std::string header = R"({"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}})";
  ASSERT_EQ(header.size(), 64u);
  EXPECT_EQ(safetensors_bytes({{"attn.0", from_vector<float>(v, {1, 2, 3})}}), craft(header, data));
  header = R"({"attn0":{"dtype":"F32","shape":[1,1,2,3],"data_offsets":[0,24]}})";
  EXPECT_EQ(safetensors_bytes({{"attn0", from_vector<float>(v, {1, 1, 2, 3})}}),
            craft(header + std::string(7, ' '), data));
  EXPECT_EQ(safetensors_bytes({}), craft("{}      "));
  EXPECT_EQ(safetensors_bytes({}, {{"framework", "pt"}}),
            craft(R"({"__metadata__":{"framework":"pt"}})" + std::string(5, ' ')));
}

TEST(Safetensors, OrdersTensorsByDtypeAlignmentThenName) {
  NamedTensors t = {{"z_bool", tensor<bool>({true})},
                    {"u8", tensor<uint8_t>({1})},
                    {"h", from_vector<Half>({Half(1.0f)}, {1})},
                    {"bf", from_vector<BFloat16>({BFloat16(1.0f)}, {1})},
                    {"i32", tensor<int32_t>({1})},
                    {"f32b", tensor<float>({1})},
                    {"f32a", tensor<float>({1})},
                    {"f64", tensor<double>({1})},
                    {"i64", tensor<int64_t>({1})}};
  SafetensorsFile f = parse_safetensors(safetensors_bytes(t));
  std::vector<std::string> order;
  for (auto& [n, x] : f.tensors) order.push_back(n);
  EXPECT_EQ(order, (std::vector<std::string>{"i64", "f64", "f32a", "f32b", "i32", "bf", "h", "u8", "z_bool"}));
}

// --- round trips -------------------------------------------------------------------

TEST(Safetensors, RoundTripsEveryDtypeIncludingScalarsAndEmptyTensors) {
  NamedTensors t = {
      {"f64", from_vector<double>({1.5, -2.25, 1e300}, {3})},
      {"f32", from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3})},
      {"f16", from_vector<Half>({Half(0.5f), Half(-3.0f)}, {2})},
      {"bf16", from_vector<BFloat16>({BFloat16(1.0f), BFloat16(-0.125f), BFloat16(7.0f)}, {3, 1})},
      {"i32", from_vector<int32_t>({-1, 2147483647}, {2})},
      {"i64", from_vector<int64_t>({-9, 1LL << 40}, {1, 2})},
      {"u8", from_vector<uint8_t>({0, 255, 7}, {3})},
      {"bool", from_vector<bool>({true, false, true, true}, {2, 2})},
      {"scalar", from_vector<float>({3.5f}, {})},
      {"empty", empty({0, 4}, DType::F32)},
      {"empty_i64", empty({3, 0}, DType::I64)},
  };
  TempDir dir;
  const std::string path = dir.file("all.safetensors");
  save_safetensors(path, t, {{"step", "12"}, {"note", "héllo \"quoted\"\n"}});
  SafetensorsFile f = load_safetensors(path);
  EXPECT_EQ(f.tensors.size(), t.size());
  for (const auto& [name, want] : t) {
    const Tensor& got = f.at(name);
    EXPECT_EQ(got.dtype(), want.dtype()) << name;
    EXPECT_EQ(got.sizes(), want.sizes()) << name;
    ASSERT_EQ(got.nbytes(), want.nbytes()) << name;
    if (got.nbytes() > 0) {
      EXPECT_EQ(std::memcmp(got.data_ptr(), want.data_ptr(), got.nbytes()), 0) << name;
    }
  }
  EXPECT_EQ(f.metadata.at("step"), "12");
  EXPECT_EQ(f.metadata.at("note"), "héllo \"quoted\"\n");
  const std::string bytes = brisk::testing::read_file(path);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u);
}

TEST(Safetensors, WritesNonContiguousTensorsInCOrder) {
  Tensor x = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}).t();  // (3, 2) view
  SafetensorsFile f = parse_safetensors(safetensors_bytes({{"x", x}}));
  EXPECT_EQ(f.at("x").sizes(), (Shape{3, 2}));
  EXPECT_EQ(f.at("x").to_vector<float>(), (std::vector<float>{1, 4, 2, 5, 3, 6}));
}

TEST(Safetensors, SaveReplacesAtomicallyAndLeavesNoTemporaryFile) {
  TempDir dir;
  const std::string path = dir.file("w.safetensors");
  save_safetensors(path, {{"a", tensor<float>({1})}});
  save_safetensors(path, {{"a", tensor<float>({2})}});
  EXPECT_EQ(load_safetensors(path).at("a").item<float>(), 2.0f);
  int files = 0;
  for (auto& e : std::filesystem::directory_iterator(dir.path())) {
    (void)e;
    ++files;
  }
  EXPECT_EQ(files, 1);
  EXPECT_THROW(save_safetensors(dir.file("no/such/dir/x.safetensors"), {{"a", tensor<float>({1})}}), Error);
}

TEST(Safetensors, WriterRejectsDuplicateAndReservedNames) {
  EXPECT_THROW(safetensors_bytes({{"a", tensor<float>({1})}, {"a", tensor<float>({2})}}), Error);
  EXPECT_THROW(safetensors_bytes({{"__metadata__", tensor<float>({1})}}), Error);
}

// --- rejections --------------------------------------------------------------------

// Disjoint views of one buffer (an optimizer's flat state) are separate tensors; views that
// overlap are one tensor under two names and are refused, as tied weights are.
TEST(Safetensors, WriterSavesDisjointViewsOfOneBufferAndRefusesOverlappingOnes) {
  Tensor flat = from_vector<float>({1, 2, 3, 4, 5, 6}, {6});
  SafetensorsFile f = parse_safetensors(safetensors_bytes({{"a", flat.narrow(0, 0, 2)}, {"b", flat.narrow(0, 2, 4)}}));
  EXPECT_EQ(f.at("a").to_vector<float>(), (std::vector<float>{1, 2}));
  EXPECT_EQ(f.at("b").to_vector<float>(), (std::vector<float>{3, 4, 5, 6}));
  EXPECT_THROW(safetensors_bytes({{"a", flat.narrow(0, 0, 3)}, {"b", flat.narrow(0, 2, 4)}}), Error);
  EXPECT_THROW(safetensors_bytes({{"a", flat}, {"b", flat.view({2, 3})}}), Error);
  // A strided view spans from its first to its last element.
  EXPECT_THROW(safetensors_bytes({{"cols", flat.view({2, 3}).narrow(1, 0, 1)}, {"mid", flat.narrow(0, 1, 1)}}), Error);
}

TEST(SafetensorsReader, RejectsFilesShorterThanEightBytes) {
  EXPECT_REJECTS(std::string("abc"), "file is 3 bytes, smaller than the 8-byte header length");
}

TEST(SafetensorsReader, RejectsHeaderLengthOverTheLimit) {
  EXPECT_REJECTS(le64(100'000'001) + "{}", "header length 100000001 exceeds the limit of 100000000 bytes");
  EXPECT_REJECTS(le64(~0ull) + "{}", "exceeds the limit");
}

TEST(SafetensorsReader, RejectsHeaderRunningPastEndOfFile) {
  EXPECT_REJECTS(le64(100) + "{}", "header length 100 runs past the end of the file (10 bytes)");
}

TEST(SafetensorsReader, RejectsInvalidUtf8) {
  EXPECT_REJECTS(craft("{\"\xff\":{}}"), "header is not valid UTF-8 (byte 2 of the header)");
  EXPECT_REJECTS(craft("{\"\xc0\xaf\":{}}"), "not valid UTF-8");  // overlong '/'
}

TEST(SafetensorsReader, RejectsInvalidJsonWithItsPosition) {
  EXPECT_REJECTS(craft(R"({"a":)"), "header is not valid JSON: json: unexpected end of input at line 1, column 6");
  EXPECT_REJECTS(craft(R"({"a":{}} x)"), "unexpected text after the value");
  EXPECT_REJECTS(craft("[1, 2]"), "header must be a JSON object, got array");
}

TEST(SafetensorsReader, RejectsDuplicateNames) {
  EXPECT_REJECTS(craft(R"({"a":{)" + kF32x2 + R"("data_offsets":[0,8]},"a":{)" + kF32x2 + R"("data_offsets":[8,16]}})",
                       std::string(16, '\0')),
                 "duplicate tensor name \"a\"");
}

// The reference implementation refuses an entry that repeats one of its fields (which value
// would count?), and so does brisk, as it refuses repeated tensor names and "__metadata__".
TEST(SafetensorsReader, RejectsDuplicatedFieldsInAnEntry) {
  EXPECT_REJECTS(craft(R"({"a":{"dtype":"F32","dtype":"I64","shape":[2],"data_offsets":[0,8]}})", std::string(8, '\0')),
                 "tensor \"a\" has a duplicated field \"dtype\"");
  EXPECT_REJECTS(craft(R"({"a":{"dtype":"F32","shape":[2],"shape":[1],"data_offsets":[0,8]}})", std::string(8, '\0')),
                 "tensor \"a\" has a duplicated field \"shape\"");
  EXPECT_REJECTS(
      craft(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"data_offsets":[0,4]}})", std::string(8, '\0')),
      "tensor \"a\" has a duplicated field \"data_offsets\"");
}

TEST(SafetensorsReader, RejectsDuplicatedMetadata) {
  EXPECT_REJECTS(craft(R"({"__metadata__":{"k":"1"},"__metadata__":{"j":"2"}})"), "duplicate \"__metadata__\"");
  EXPECT_REJECTS(craft(R"({"__metadata__":{"k":"1","k":"2"}})"), "duplicated metadata key \"k\"");
}

TEST(SafetensorsReader, RejectsOffsetsThatAreNotContiguous) {
  EXPECT_REJECTS(craft(R"({"a":{)" + kF32x2 + R"("data_offsets":[0,8]},"b":{)" + kF32x2 + R"("data_offsets":[12,20]}})",
                       std::string(20, '\0')),
                 "tensor \"b\" has data_offsets [12, 20] that are not contiguous: expected it to begin at 8");
  EXPECT_REJECTS(craft(R"({"a":{)" + kF32x2 + R"("data_offsets":[4,12]}})", std::string(12, '\0')),
                 "not contiguous: expected it to begin at 0");
}

TEST(SafetensorsReader, RejectsOverlappingOffsets) {
  EXPECT_REJECTS(craft(R"({"a":{)" + kF32x2 + R"("data_offsets":[0,8]},"b":{)" + kF32x2 + R"("data_offsets":[4,12]}})",
                       std::string(12, '\0')),
                 "tensor \"b\" has data_offsets [4, 12] overlapping \"a\", which ends at 8");
}

TEST(SafetensorsReader, RejectsOffsetsThatAreNotSorted) {
  EXPECT_REJECTS(craft(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", std::string(8, '\0')),
                 "data_offsets [8, 0] that are not sorted (end before begin)");
}

TEST(SafetensorsReader, AcceptsTensorsListedOutOfOffsetOrder) {
  SafetensorsFile f = parse_safetensors(
      craft(R"({"b":{)" + kF32x2 + R"("data_offsets":[8,16]},"a":{)" + kF32x2 + R"("data_offsets":[0,8]}})",
            std::string(16, '\0')));
  EXPECT_EQ(f.tensors[0].first, "a");
}

TEST(SafetensorsReader, RejectsByteCountThatDisagreesWithShapeAndDtype) {
  EXPECT_REJECTS(craft(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", std::string(8, '\0')),
                 "tensor \"a\" has data_offsets [0, 8] (8 bytes) but shape [3] of F32 needs 12 bytes");
}

TEST(SafetensorsReader, RejectsShapesWhoseSizeOverflows) {
  EXPECT_REJECTS(
      craft(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,8]}})", std::string(8, '\0')),
      "tensor \"a\": shape [4294967296, 4294967296, 16] is too large");
  EXPECT_REJECTS(
      craft(R"({"a":{"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,8]}})", std::string(8, '\0')),
      "overflow int64");
}

// No element, so the byte count (0) matches, but the strides of [0, 2^32, 2^32] overflow int64.
TEST(SafetensorsReader, RejectsEmptyShapesWhoseStridesOverflow) {
  EXPECT_REJECTS(craft(R"({"a":{"dtype":"U8","shape":[0,4294967296,4294967296],"data_offsets":[0,0]}})"),
                 "tensor \"a\": shape [0, 4294967296, 4294967296] is too large");
  EXPECT_REJECTS(craft(R"({"a":{"dtype":"F32","shape":[0,4611686018427387904],"data_offsets":[0,0]}})"),
                 "overflow int64");
  // Large but representable: loads as an empty tensor.
  SafetensorsFile f =
      parse_safetensors(craft(R"({"a":{"dtype":"U8","shape":[0,2147483648,2147483648],"data_offsets":[0,0]}})"));
  EXPECT_EQ(f.at("a").sizes(), (Shape{0, int64_t{1} << 31, int64_t{1} << 31}));
}

TEST(SafetensorsReader, RejectsShapesWithTooManyDims) {
  std::string dims = "1";
  for (int i = 1; i < 65; ++i) dims += ",1";
  EXPECT_REJECTS(craft(R"({"a":{"dtype":"U8","shape":[)" + dims + R"(],"data_offsets":[0,1]}})", "x"),
                 "65 dims, more than the 64 allowed");
}

TEST(SafetensorsReader, RejectsDataThatDoesNotEndAtEndOfFile) {
  const std::string h = R"({"a":{)" + kF32x2 + R"("data_offsets":[0,8]}})";
  EXPECT_REJECTS(craft(h, std::string(9, '\0')),
                 "data ends at byte 8 of the data section but the file has 9 data bytes (trailing bytes)");
  EXPECT_REJECTS(craft(h, std::string(7, '\0')), "(truncated)");
}

TEST(SafetensorsReader, RejectsUnknownDtypes) {
  EXPECT_REJECTS(craft(R"({"a":{"dtype":"F8_E4M3","shape":[1],"data_offsets":[0,1]}})", std::string(1, '\0')),
                 "tensor \"a\" has unknown dtype \"F8_E4M3\"");
}

TEST(SafetensorsReader, RejectsMalformedEntriesAndMetadata) {
  EXPECT_REJECTS(craft(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}})"), "bad shape [-1]");
  EXPECT_REJECTS(craft(R"({"a":{"dtype":"F32","shape":[1]}})"), "needs \"dtype\", \"shape\" and \"data_offsets\"");
  EXPECT_REJECTS(craft(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}})"), "bad data_offsets [0]");
  EXPECT_REJECTS(craft(R"({"__metadata__":{"k":1}})"), "metadata \"k\" must be a string, got number");
}

TEST(SafetensorsReader, RejectsBoolBytesOtherThanZeroAndOne) {
  const std::string h = R"({"m":{"dtype":"BOOL","shape":[3],"data_offsets":[0,3]}})";
  EXPECT_REJECTS(craft(h, std::string("\x01\x02\x00", 3)),
                 "tensor \"m\" (BOOL) has byte 2 at element 1; BOOL bytes must be 0 or 1");
  EXPECT_REJECTS(craft(h, std::string("\x00\x00\xff", 3)), "has byte 255 at element 2");
  SafetensorsFile f = parse_safetensors(craft(h, std::string("\x01\x00\x01", 3)));
  EXPECT_EQ(f.at("m").to_vector<bool>(), (std::vector<bool>{true, false, true}));
}

// Loading a file into a module goes through load_state_dict: a float NaN never reaches an
// integer buffer; floating dtypes convert.
TEST(SafetensorsReader, LoadingIntoAModuleConvertsOnlyBetweenFloatingTypes) {
  struct M : nn::Module {
    M() {
      register_parameter("w", zeros({2}));
      register_buffer("n", zeros({1}, {.dtype = DType::I64}));
    }
  } m;
  SafetensorsFile f = parse_safetensors(safetensors_bytes(NamedTensors{
      {"w", full({2}, 0.5, {.dtype = DType::F16})}, {"n", full({1}, std::nan(""), {.dtype = DType::F32})}}));
  try {
    m.load_state_dict(f.tensors);
    ADD_FAILURE() << "expected brisk::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("\"n\" is I64 but the state dict holds F32"), std::string::npos) << e.what();
  }
  f = parse_safetensors(safetensors_bytes(
      NamedTensors{{"w", full({2}, 0.5, {.dtype = DType::F16})}, {"n", full({1}, 7, {.dtype = DType::I64})}}));
  m.load_state_dict(f.tensors);
  EXPECT_EQ(m.get("w").to_vector<float>(), (std::vector<float>{0.5, 0.5}));
  EXPECT_EQ(m.get("n").to_vector<int64_t>(), std::vector<int64_t>{7});
}

namespace {

// A header of `size` bytes made of as many `tail` entries as fit (numbered names), then `last`.
std::string header_of(size_t size, const std::string& open, const std::string& tail, const std::string& last,
                      size_t* count) {
  std::string bytes = le64(size) + open;
  bytes.reserve(size + 8);
  *count = 0;
  while (bytes.size() + 100 < size) {
    bytes += std::to_string((*count)++);
    bytes += tail;
  }
  bytes += last;
  bytes.append(size + 8 - bytes.size(), ' ');
  return bytes;
}

}  // namespace

// The header is read value by value, never held as a JSON tree (which cost ~100 bytes per input
// byte), so memory is bounded by what is kept: under 10 bytes per header byte for the worst cases,
// the smallest entries there are (empty tensors) and metadata entries with empty values. The same
// at the 100 MB the format allows: tests/data/large (label slow).
TEST(SafetensorsReader, HeaderOfManyTensorsCostsUnderTenBytesPerByte) {
  BRISK_SKIP_MEMORY_MEASUREMENT_UNDER_ASAN();
  size_t count = 0;
  const std::string bytes = header_of(10'000'000, R"({")", R"(":{"dtype":"U8","shape":[0],"data_offsets":[0,0]},")",
                                      R"(last":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}})", &count);
  const long before = peak_rss_mib();
  EXPECT_EQ(parse_safetensors(bytes).tensors.size(), count + 1);
  EXPECT_LT(peak_rss_mib() - before, 100) << "MiB for a 10 MB header";
}

TEST(SafetensorsReader, HeaderOfManyMetadataEntriesCostsUnderTenBytesPerByte) {
  BRISK_SKIP_MEMORY_MEASUREMENT_UNDER_ASAN();
  size_t count = 0;
  const std::string bytes = header_of(10'000'000, R"({"__metadata__":{")", R"(":"",")", R"(last":""}})", &count);
  const long before = peak_rss_mib();
  EXPECT_EQ(parse_safetensors(bytes).metadata.size(), count + 1);
  EXPECT_LT(peak_rss_mib() - before, 100) << "MiB for a 10 MB header";
}
