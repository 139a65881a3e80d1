// Whole-file reads and atomic writes. See file_io.h.
#include "training/file_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <string>

namespace weft::training {

Result<UniqueFile> open_file(const std::string& path, const char* mode, std::string_view what) {
  errno = 0;
  UniqueFile f(std::fopen(path.c_str(), mode));
  if (!f) return system_error("cannot open " + path + " for " + std::string(what));
  return f;
}

Result<std::string> read_file(const std::string& path) {
  Result<UniqueFile> f = open_file(path, "rb", "reading");
  WEFT_TRY(f);
  std::string content;
  char chunk[1 << 16];
  size_t n;
  while ((n = std::fread(chunk, 1, sizeof(chunk), f->get())) > 0) content.append(chunk, n);
  if (std::ferror(f->get())) return system_error("cannot read " + path);
  return content;
}

Status write_bytes(std::FILE* f, const void* data, size_t n, std::string_view what) {
  errno = 0;
  if (n > 0 && std::fwrite(data, 1, n, f) != n) {
    return system_error("cannot write " + std::string(what));
  }
  return Status();
}

Status write_file_atomically(const std::string& path,
                             const std::function<Status(std::FILE*)>& write_body) {
  const std::string tmp = path + ".tmp";
  Result<UniqueFile> f = open_file(tmp, "wb", "writing");
  WEFT_TRY(f);
  Status written = write_body(f->get());
  // On the disk before the rename: else, after a power loss, the rename may be there and the
  // data not, and the file it replaced is lost with it.
  errno = 0;
  if (written.ok() && (std::fflush(f->get()) != 0 || ::fsync(::fileno(f->get())) != 0))
    written = system_error("cannot write " + tmp);
  errno = 0;
  const bool closed = std::fclose(f->release()) == 0;
  if (written.ok() && !closed) written = system_error("cannot write " + tmp);
  errno = 0;
  if (written.ok() && std::rename(tmp.c_str(), path.c_str()) != 0) {
    written = system_error("cannot rename " + tmp + " to " + path);
  }
  if (!written.ok()) {
    std::remove(tmp.c_str());
    return written;
  }
  // The rename itself, on the disk: the directory's entry.
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    (void)::fsync(fd);  // some file systems refuse a directory's fsync; the file's data is there
    ::close(fd);
  }
  return written;
}

Status write_file_atomically(const std::string& path, std::string_view content) {
  return write_file_atomically(
      path, [&](std::FILE* f) { return write_bytes(f, content.data(), content.size(), path); });
}

}  // namespace weft::training
