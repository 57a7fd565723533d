// How tokens sit in a group slot area. A group holding up to `capacity` tokens is laid out as planes:
//   [x: capacity x x_bytes][sf: capacity x sf_bytes][topk: capacity x idx_bytes][meta: capacity x meta_bytes]
// with every per-token field rounded up to 16 bytes (the record of DeepEP's size formula:
// hidden*elem + SF packs*4 + topk*8 + (1+topk)*4). meta = int32 source token index, then topk fp32
// weights. Planes (rather than interleaved records) let a receiver copy a whole group's x rows with one
// contiguous copy. Shared-memory groups use capacity = num_max_tokens_per_rank (fixed slots); MPI
// messages use capacity = the number of tokens sent (compact), so their size gives the count.
//
// Combine groups: [rows: capacity x rows_per_token x row_bytes][weights: capacity x weight_bytes].
#pragma once

#include <cstdint>

namespace tessera::ep::detail {

inline int64_t round16(int64_t v) {
  return (v + 15) / 16 * 16;
}

struct DispatchRecord {
  int64_t x_bytes = 0, sf_bytes = 0, idx_bytes = 0, meta_bytes = 0;
  int num_topk = 0;
  static DispatchRecord make(int64_t hidden_bytes, int64_t sf_pack_count, int num_topk) {
    DispatchRecord r;
    r.x_bytes = round16(hidden_bytes);
    r.sf_bytes = round16(sf_pack_count * 4);
    r.idx_bytes = round16(int64_t(num_topk) * 8);
    r.meta_bytes = round16(int64_t(1 + num_topk) * 4);
    r.num_topk = num_topk;
    return r;
  }
  int64_t per_token() const { return x_bytes + sf_bytes + idx_bytes + meta_bytes; }
  int64_t sf_off(int64_t cap) const { return cap * x_bytes; }
  int64_t idx_off(int64_t cap) const { return cap * (x_bytes + sf_bytes); }
  int64_t meta_off(int64_t cap) const { return cap * (x_bytes + sf_bytes + idx_bytes); }
  int64_t bytes(int64_t cap) const { return cap * per_token(); }
};

struct CombineRecord {
  int64_t row_bytes = 0;     // one bf16 row
  int rows_per_token = 1;    // > 1: one row per local expert copy (no multiple reduction, LL)
  int64_t weight_bytes = 0;  // topk fp32, rounded to 16 (0: no weights)
  static CombineRecord make(int64_t hidden, int rows_per_token, int num_topk_weights) {
    CombineRecord r;
    r.row_bytes = round16(hidden * 2);
    r.rows_per_token = rows_per_token;
    r.weight_bytes = round16(int64_t(num_topk_weights) * 4);
    return r;
  }
  int64_t token_bytes() const { return row_bytes * rows_per_token; }
  int64_t per_token() const { return token_bytes() + weight_bytes; }
  int64_t weights_off(int64_t cap) const { return cap * token_bytes(); }
  int64_t bytes(int64_t cap) const { return cap * per_token(); }
};

// A read-only view of `count` tokens: token i's fields at base + i * stride. src == null means the
// source token index of token i is i itself (a rank's own input); w == null: no weights.
struct TokenRows {
  int64_t count = 0;
  const char* x = nullptr;
  int64_t x_stride = 0;  // bytes
  const char* sf = nullptr;
  int64_t sf_stride = 0;  // bytes; packs are contiguous 4-byte items
  const int64_t* idx = nullptr;
  int64_t idx_stride = 0;  // elements
  const int32_t* src = nullptr;
  const float* w = nullptr;
  int64_t meta_stride = 0;  // elements (int32 / fp32) for src and w
  int32_t src_token(int64_t i) const { return src ? src[i * meta_stride] : int32_t(i); }
};

// The rows of a group area laid out with DispatchRecord planes of `capacity`.
inline TokenRows rows_of_area(const char* area, int64_t capacity, int64_t count, const DispatchRecord& rec,
                              bool with_weights) {
  TokenRows t;
  t.count = count;
  t.x = area;
  t.x_stride = rec.x_bytes;
  t.sf = area + rec.sf_off(capacity);
  t.sf_stride = rec.sf_bytes;
  t.idx = reinterpret_cast<const int64_t*>(area + rec.idx_off(capacity));
  t.idx_stride = rec.idx_bytes / 8;
  const char* meta = area + rec.meta_off(capacity);
  t.src = reinterpret_cast<const int32_t*>(meta);
  t.w = with_weights ? reinterpret_cast<const float*>(meta + 4) : nullptr;
  t.meta_stride = rec.meta_bytes / 4;
  return t;
}

// A received group: `rows`, optionally picked through `picks` (token i of the group is rows' token
// picks[i]; a rank's own tokens are read straight from its input that way).
struct GroupData {
  TokenRows rows;
  const int32_t* picks = nullptr;
  int64_t count = 0;
  bool x_in_place = false;  // direct receive: the x rows are already in the output
  int64_t token(int64_t i) const { return picks ? picks[i] : i; }
};

// Writes tokens picks[0..n) of `from` into slots 0..n of an area with `capacity` slots; only the
// planes present in `rec` (sf_bytes, idx_bytes > 0) are written, and x only when hidden_bytes > 0.
// Streaming stores for large writes.
void write_dispatch_records(char* area, int64_t capacity, const DispatchRecord& rec, const TokenRows& from,
                            const int32_t* picks, int64_t n, int64_t hidden_bytes, int64_t sf_bytes, int threads);

}  // namespace tessera::ep::detail
