// POSIX shared-memory segments: created by one rank, opened by its peers, unlinked as soon as every
// peer has mapped it (so no name outlives the job, even when a process is killed later). Mappings are
// pre-faulted with write touches: the first touch of a page costs several times a copy of it.
#pragma once

#include <cstddef>
#include <string>

namespace tessera::ep::detail {

class ShmSegment {
 public:
  ShmSegment() = default;
  ~ShmSegment();
  ShmSegment(ShmSegment&& other) noexcept;
  ShmSegment& operator=(ShmSegment&& other) noexcept;
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;

  // Creates a fresh segment of `bytes` (zero-filled, backed by reserved memory: fails cleanly when
  // /dev/shm is too small instead of crashing on first touch).
  static ShmSegment create(const std::string& name, size_t bytes);
  // Maps an existing segment of exactly `bytes`.
  static ShmSegment open(const std::string& name, size_t bytes);

  void unlink();  // removes the name; the mappings stay valid
  char* data() const { return data_; }
  size_t size() const { return bytes_; }

 private:
  std::string name_;
  char* data_ = nullptr;
  size_t bytes_ = 0;
  bool linked_ = false;  // this process created it and has not unlinked it yet
};

// Write-touches one byte per page (keeps the values).
void prefault_pages(char* p, size_t bytes);

}  // namespace tessera::ep::detail
