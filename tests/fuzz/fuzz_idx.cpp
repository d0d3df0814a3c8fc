// Fuzzes brisk's IDX reader (the MNIST format, plain or gzip) through its in-memory seam.
// The first input byte picks the mode: bit 0 the expected dims (labels: 1, images: 3), bit 1
// whether the rest is gzip-compressed here first (so that most inputs reach the IDX header
// through inflate; without it, gzip seeds exercise corrupt and trailing gzip data). Any input
// must either load or throw brisk::Error; a loaded payload has exactly the size its dims say.
#include <brisk/data/mnist.h>
#include <brisk/util/error.h>
#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace {

std::string gzip(const uint8_t* data, size_t size) {
  z_stream zs{};
  if (deflateInit2(&zs, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) __builtin_trap();
  std::string out(deflateBound(&zs, size), '\0');
  zs.next_in = const_cast<Bytef*>(data);
  zs.avail_in = static_cast<uInt>(size);
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  if (deflate(&zs, Z_FINISH) != Z_STREAM_END) __builtin_trap();
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int dims = (data[0] & 1) ? 3 : 1;
  const std::string bytes =
      (data[0] & 2) ? gzip(data + 1, size - 1) : std::string(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    // 64 MiB bounds what one input may make the reader inflate and keep.
    const brisk::data::IdxData d = brisk::data::parse_idx(bytes, dims, "fuzz.idx", "fuzz", uint64_t{1} << 26);
    uint64_t n = 1;
    for (int64_t v : d.dims) n *= static_cast<uint64_t>(v);
    if (d.dims.size() != static_cast<size_t>(dims) || d.bytes.size() != n) __builtin_trap();
  } catch (const brisk::Error&) {
  }
  return 0;
}
