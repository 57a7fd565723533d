#include "ep/transport/shm_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "tessera/core/error.h"

namespace tessera::ep::detail {
namespace {

[[noreturn]] void sys_fail(const char* what, const std::string& name, size_t bytes, int err) {
  fail(ErrorCode::kRuntime, "tessera.ep: ", what, " of shared-memory segment '", name, "' (", bytes,
       " bytes) failed: ", std::strerror(err),
       err == ENOSPC || err == ENOMEM ? " (is /dev/shm large enough? `df -h /dev/shm`)" : "");
}

char* map_fd(int fd, const std::string& name, size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (p == MAP_FAILED) {
    const int err = errno;
    close(fd);
    sys_fail("mmap", name, bytes, err);
  }
  close(fd);
  return static_cast<char*>(p);
}

}  // namespace

void prefault_pages(char* p, size_t bytes) {
  static const size_t page = size_t(sysconf(_SC_PAGESIZE));
  volatile char* c = p;
  for (size_t off = 0; off < bytes; off += page) c[off] = c[off];
}

ShmSegment::~ShmSegment() {
  if (linked_) shm_unlink(name_.c_str());
  if (data_) munmap(data_, bytes_);
}

ShmSegment::ShmSegment(ShmSegment&& o) noexcept {
  *this = std::move(o);
}

ShmSegment& ShmSegment::operator=(ShmSegment&& o) noexcept {
  if (this != &o) {
    if (linked_) shm_unlink(name_.c_str());
    if (data_) munmap(data_, bytes_);
    name_ = std::move(o.name_);
    data_ = std::exchange(o.data_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
    linked_ = std::exchange(o.linked_, false);
  }
  return *this;
}

ShmSegment ShmSegment::create(const std::string& name, size_t bytes) {
  const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) sys_fail("shm_open(create)", name, bytes, errno);
  ShmSegment s;
  s.name_ = name;
  s.linked_ = true;
  if (ftruncate(fd, off_t(bytes)) != 0) {
    const int err = errno;
    close(fd);
    shm_unlink(name.c_str());
    sys_fail("ftruncate", name, bytes, err);
  }
  // Reserve the memory now: a full /dev/shm then fails here rather than with SIGBUS on first touch.
  if (const int err = posix_fallocate(fd, 0, off_t(bytes)); err != 0) {
    close(fd);
    shm_unlink(name.c_str());
    sys_fail("posix_fallocate", name, bytes, err);
  }
  s.data_ = map_fd(fd, name, bytes);
  s.bytes_ = bytes;
  prefault_pages(s.data_, bytes);
  return s;
}

ShmSegment ShmSegment::open(const std::string& name, size_t bytes) {
  const int fd = shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0) sys_fail("shm_open", name, bytes, errno);
  struct stat st {};
  if (fstat(fd, &st) != 0 || size_t(st.st_size) != bytes) {
    close(fd);
    fail(ErrorCode::kRuntime, "tessera.ep: shared-memory segment '", name, "' has ", size_t(st.st_size),
         " bytes, expected ", bytes, " (ranks disagree on the buffer size)");
  }
  ShmSegment s;
  s.name_ = name;
  s.data_ = map_fd(fd, name, bytes);
  s.bytes_ = bytes;
  prefault_pages(s.data_, bytes);
  return s;
}

void ShmSegment::unlink() {
  if (linked_) shm_unlink(name_.c_str());
  linked_ = false;
}

}  // namespace tessera::ep::detail
