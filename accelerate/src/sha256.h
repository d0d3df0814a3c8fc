// SHA-256 through OpenSSL's libcrypto (the checkpoint manifest's checksums): streaming, at the
// speed of the CPU's SHA extensions where it has them.
#pragma once
#include <cstddef>
#include <string>

namespace brisk::accelerate::detail {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(const void* data, size_t n);
  // The digest as 64 lowercase hex digits (once; the object is spent afterwards).
  std::string hex();

 private:
  void* ctx_;  // EVP_MD_CTX
};

}  // namespace brisk::accelerate::detail
