// The whole of a file as bytes, for data's readers (internal to data/): a missing or unreadable
// file throws brisk::Error naming `who` (the caller), the path and the system's reason.
#pragma once
#include <string>

namespace brisk::data {

std::string read_whole_file(const std::string& path, const char* who);

}  // namespace brisk::data
