// Whole-file reads and crash-safe whole-file writes for the training stack's data, vocabulary
// and checkpoint files, reporting failures as Status with the path and the OS's reason.
// The binary files (token shards, checkpoints) are little-endian and written as the host lays
// its integers and floats out: the static_assert below keeps a big-endian build from misreading
// them silently.
// Thread-safety: pure functions (of the file system).
#pragma once

#include <bit>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "weft/status.h"

namespace weft::training {

static_assert(std::endian::native == std::endian::little,
              "shards and checkpoints are little-endian; a big-endian host needs byte swaps");

// The whole content of `path`. SystemError naming the path if it cannot be opened or read.
Result<std::string> read_file(const std::string& path);

// Writes `content` to `path` through `path + ".tmp"` and a rename, so a reader never sees a
// half-written file; the data is on the disk (fsync) before the rename, and the rename after it.
// SystemError naming the path on failure (the temporary file is removed).
Status write_file_atomically(const std::string& path, std::string_view content);
// The same for content too large to build in memory: `write_body` writes it to the open
// temporary file and returns OK, or a Status that aborts the write (the file is then removed).
Status write_file_atomically(const std::string& path,
                             const std::function<Status(std::FILE*)>& write_body);
// fwrite of n bytes, or SystemError naming `what`.
Status write_bytes(std::FILE* f, const void* data, size_t n, std::string_view what);

// An owned FILE*, closed on destruction.
struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using UniqueFile = std::unique_ptr<std::FILE, FileCloser>;

// fopen(path, mode), or SystemError "cannot open <path> for <what>: <reason>".
Result<UniqueFile> open_file(const std::string& path, const char* mode, std::string_view what);

}  // namespace weft::training
