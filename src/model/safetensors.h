// Memory-mapped safetensors files: an 8-byte little-endian header length, a JSON header
// {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}, then the data.
// Tensors are read in place from the mapping.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tessera/core/dtype.h"

namespace tessera::model {

struct StoredTensor {
  std::string name, file, dtype_name;  // dtype_name as stored ("BF16", "F8_E4M3", ...)
  DType dtype = DType::kU8;
  bool dtype_known = false;  // dtypes tessera does not use (e.g. I16) are listed but cannot be bound
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;
  int64_t bytes = 0;
};

class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);  // throws Error naming the file and the rule
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;
  const std::vector<StoredTensor>& tensors() const { return tensors_; }
  // Maps every page of the file into this process now (reading it from disk if it is not cached) and
  // reads one byte of each, so that steps do not pay for the first touch of each weight.
  void prefault() const;
  // Locks the file's pages in memory (mlock: maps them all, and the kernel may not page them out while
  // the file is mapped), then reads one byte of each page as prefault() does. Throws Error naming the
  // file, its size and the locked-memory limit on failure.
  void lock() const;
  size_t size() const { return size_; }

 private:
  void touch_pages() const;
  std::string path_;
  void* map_ = nullptr;
  size_t size_ = 0;
  std::vector<StoredTensor> tensors_;
};

// Every *.safetensors file of a folder; a tensor name found in two files is an error.
class TensorStore {
 public:
  explicit TensorStore(const std::string& dir);
  const StoredTensor* find(const std::string& name) const;
  // The tensor, checked: it exists, has one of `dtypes` and exactly `shape`; errors name the tensor,
  // its file and the rule.
  const StoredTensor& require(const std::string& name, std::initializer_list<DType> dtypes,
                              const std::vector<int64_t>& shape) const;
  size_t size() const { return by_name_.size(); }
  void prefault() const;  // every file's prefault()
  void lock() const;      // every file's lock()
  size_t bytes() const;   // the files' total size

 private:
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const StoredTensor*> by_name_;
};

std::string shape_string(const std::vector<int64_t>& shape);

}  // namespace tessera::model
