// The safetensors reader (safetensors.h): mmap, header parse, bounds and size checks.
#include "safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "tessera/core/error.h"
#include "tessera/core/json.h"
#include "tessera/core/thread_pool.h"

namespace tessera::model {
namespace {

struct DtypeName {
  const char* name;
  DType dtype;
};
constexpr DtypeName kDtypes[] = {
    {"F32", DType::kF32},        {"F64", DType::kF64},        {"BF16", DType::kBF16}, {"F16", DType::kF16},
    {"F8_E4M3", DType::kF8E4M3}, {"F8_E5M2", DType::kF8E5M2}, {"I8", DType::kI8},     {"U8", DType::kU8},
    {"I32", DType::kI32},        {"I64", DType::kI64},        {"BOOL", DType::kBool},
};
// Element sizes of stored dtypes tessera does not bind, so their byte ranges can still be checked.
int64_t other_dtype_bytes(const std::string& name) {
  if (name == "I16" || name == "U16") return 2;
  if (name == "U32") return 4;
  if (name == "U64") return 8;
  return 0;
}

}  // namespace

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(ErrorCode::kInvalidArgument, "safetensors '", path, "': cannot open: ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    fail(ErrorCode::kInvalidArgument, "safetensors '", path, "': cannot stat: ", std::strerror(errno));
  }
  size_ = size_t(st.st_size);
  if (size_ < 8) {
    ::close(fd);
    fail(ErrorCode::kInvalidArgument, "safetensors '", path, "': truncated: ", size_,
         " bytes, shorter than the 8-byte header length");
  }
  map_ = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    fail(ErrorCode::kRuntime, "safetensors '", path, "': mmap failed: ", std::strerror(errno));
  }
  const auto* base = static_cast<const uint8_t*>(map_);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | base[i];
  if (header_len > size_ - 8)
    fail(ErrorCode::kInvalidArgument, "safetensors '", path, "': truncated: the header claims ", header_len,
         " bytes but the file has ", size_ - 8, " after the length");
  const std::string what = "safetensors '" + path + "' header";
  const JsonValue header =
      json_parse(std::string_view(reinterpret_cast<const char*>(base + 8), size_t(header_len)), what);
  if (header.kind != JsonValue::Kind::kObject) fail(ErrorCode::kInvalidArgument, what, ": must be a JSON object");
  const uint8_t* data = base + 8 + header_len;
  const int64_t data_bytes = int64_t(size_ - 8 - header_len);
  for (const auto& [name, entry] : header.object) {
    if (name == "__metadata__") continue;
    auto bad = [&](const auto&... rule) {
      fail(ErrorCode::kInvalidArgument, "safetensors '", path, "': tensor '", name, "': ", rule...);
    };
    if (entry.kind != JsonValue::Kind::kObject) bad("entry must be an object");
    const JsonValue* dt = entry.find("dtype");
    const JsonValue* sh = entry.find("shape");
    const JsonValue* off = entry.find("data_offsets");
    if (!dt || dt->kind != JsonValue::Kind::kString) bad("'dtype' must be a string");
    if (!sh || sh->kind != JsonValue::Kind::kArray) bad("'shape' must be an array");
    if (!off || off->kind != JsonValue::Kind::kArray || off->array.size() != 2)
      bad("'data_offsets' must be [begin, end]");
    StoredTensor t;
    t.name = name;
    t.file = path;
    t.dtype_name = dt->string;
    int64_t elem = other_dtype_bytes(dt->string);
    for (const DtypeName& d : kDtypes)
      if (dt->string == d.name) {
        t.dtype = d.dtype;
        t.dtype_known = true;
        elem = dtype_storage_bytes(d.dtype);
      }
    if (elem == 0) bad("unknown dtype '", dt->string, "'");
    int64_t numel = 1;
    for (const JsonValue& d : sh->array) {
      if (d.kind != JsonValue::Kind::kNumber || !d.is_integer || d.integer < 0)
        bad("shape entries must be integers >= 0");
      t.shape.push_back(d.integer);
      if (d.integer > 0 && numel > (int64_t(1) << 50) / d.integer) bad("shape too large");
      numel *= d.integer;
    }
    for (const JsonValue& o : off->array)
      if (o.kind != JsonValue::Kind::kNumber || !o.is_integer || o.integer < 0)
        bad("data_offsets must be integers >= 0");
    const int64_t begin = off->array[0].integer, end = off->array[1].integer;
    if (begin > end || end > data_bytes)
      bad("data_offsets [", begin, ", ", end, ") outside the file's ", data_bytes, " data bytes (truncated file?)");
    if (end - begin != numel * elem)
      bad("data_offsets span ", end - begin, " bytes but dtype ", dt->string, " and shape ", shape_string(t.shape),
          " need ", numel * elem);
    t.data = data + begin;
    t.bytes = end - begin;
    tensors_.push_back(std::move(t));
  }
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) ::munmap(map_, size_);
}

// Reads one byte of every page, on the pool's threads. Mapping a page (MADV_POPULATE_READ, mlock) does not
// read it, and under some hypervisors the first CPU read of a page the disk just filled costs
// microseconds, which would otherwise land in the first steps that touch it
// (docs/notes/2026-12-07-model-first-touch.md).
void SafetensorsFile::touch_pages() const {
  const int64_t page = ::sysconf(_SC_PAGESIZE);
  const int64_t pages = int64_t((size_ + size_t(page) - 1) / size_t(page));
  const auto* bytes = static_cast<const volatile uint8_t*>(map_);
  parallel_for(pages, [&](int64_t p0, int64_t p1) {
    uint8_t sink = 0;
    for (int64_t i = p0; i < p1; ++i) sink ^= bytes[i * page];
    (void)sink;
  });
}

void SafetensorsFile::prefault() const {
#ifdef MADV_POPULATE_READ
  // One call maps every page (kernels since 5.14); the touch below then only reads them.
  (void)::madvise(map_, size_, MADV_POPULATE_READ);
#endif
  touch_pages();
}

void SafetensorsFile::lock() const {
  if (::mlock(map_, size_) == 0) {
    touch_pages();
    return;
  }
  const int err = errno;
  struct rlimit limit {};
  ::getrlimit(RLIMIT_MEMLOCK, &limit);
  const std::string limit_text =
      limit.rlim_cur == RLIM_INFINITY ? "unlimited" : std::to_string(limit.rlim_cur / 1024) + " KiB";
  fail(ErrorCode::kRuntime, "safetensors '", path_, "': locking its ", size_ >> 20,
       " MiB in memory (mlock) failed: ", std::strerror(err), " (the locked-memory limit, ulimit -l, is ", limit_text,
       "; raise it, run with CAP_IPC_LOCK, or leave lock_weights off)");
}

void TensorStore::prefault() const {
  for (const auto& f : files_) f->prefault();
}

void TensorStore::lock() const {
  for (const auto& f : files_) f->lock();
}

size_t TensorStore::bytes() const {
  size_t total = 0;
  for (const auto& f : files_) total += f->size();
  return total;
}

TensorStore::TensorStore(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) fail(ErrorCode::kInvalidArgument, "checkpoint: '", dir, "' is not a folder");
  std::vector<std::string> paths;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".safetensors") paths.push_back(e.path().string());
  std::sort(paths.begin(), paths.end());
  if (paths.empty()) fail(ErrorCode::kInvalidArgument, "checkpoint: no *.safetensors file in '", dir, "'");
  for (const std::string& p : paths) {
    files_.push_back(std::make_unique<SafetensorsFile>(p));
    for (const StoredTensor& t : files_.back()->tensors()) {
      auto [it, inserted] = by_name_.emplace(t.name, &t);
      if (!inserted)
        fail(ErrorCode::kInvalidArgument, "checkpoint: tensor '", t.name, "' is in both '", it->second->file, "' and '",
             t.file, "'");
    }
  }
}

const StoredTensor* TensorStore::find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

const StoredTensor& TensorStore::require(const std::string& name, std::initializer_list<DType> dtypes,
                                         const std::vector<int64_t>& shape) const {
  const StoredTensor* t = find(name);
  if (!t) fail(ErrorCode::kInvalidArgument, "checkpoint: tensor '", name, "' is missing");
  bool ok = false;
  std::string allowed;
  for (DType d : dtypes) {
    ok |= t->dtype_known && t->dtype == d;
    const char* stored = dtype_name(d);
    for (const DtypeName& n : kDtypes)
      if (n.dtype == d) stored = n.name;
    allowed += (allowed.empty() ? "" : " or ") + std::string(stored);
  }
  if (!ok)
    fail(ErrorCode::kInvalidArgument, "checkpoint: tensor '", name, "' in '", t->file, "' must have dtype ", allowed,
         ", got ", t->dtype_name);
  if (t->shape != shape)
    fail(ErrorCode::kInvalidArgument, "checkpoint: tensor '", name, "' in '", t->file, "' must have shape ",
         shape_string(shape), ", got ", shape_string(t->shape));
  return *t;
}

}  // namespace tessera::model
