// The MLA attention engine's view of a problem: groups of query rows, each group attending to one token
// list (dense: a request's cache for one KV head; sparse: the valid indices of one query token).
// The public entry points (decode dense/sparse, sparse prefill) describe their problem as an MlaTask and
// hand it to run_mla with a Schedule; the engine owns tiling, splitting, the online softmax and the
// combine of split parts.
#pragma once

#include <cstdint>
#include <vector>

#include "backends/cpu/mla_kernel_set.h"
#include "tessera/flash_mla.h"

namespace tessera::flash_mla {

// One group's token list, built by MlaTask::open_group on the thread that processes the group.
struct TokenList {
  int64_t group = -1;
  int64_t n = 0;               // list length
  int64_t n_main = 0;          // sparse: slots[0, n_main) are in the main cache, the rest in the extra one
  std::vector<int64_t> slots;  // sparse: flat cache slots in list order (dense lists are implicit)
};

class MlaTask {
 public:
  virtual ~MlaTask() = default;

  int64_t requests = 0;            // schedule items are (request, split) pairs
  int64_t groups_per_request = 0;  // group g belongs to request g / groups_per_request
  int rows = 0;                    // query rows per group (the most any group has; see rows_of)
  int d_qk = 0, d_v = 0;
  float scale = 0;
  bool separate_v = false;  // V rows come from fetch_v (else V is the first d_v elements of each K row)
  const cpu::MlaKernelSet* kernels = nullptr;

  int64_t groups() const { return requests * groups_per_request; }

  // Query rows of group g (varlen problems override it; rows_of(g) <= rows).
  virtual int64_t rows_of(int64_t g) const { return rows; }
  // Fills `list` for group g (thread-private) and returns its length.
  virtual int64_t open_group(int64_t g, TokenList* list) const = 0;
  // How many leading tokens of a list of length n query row r of group g may see (causal masks).
  virtual int64_t visible_tokens(int64_t g, int r, int64_t n) const { return n; }
  // Query rows [r0, r0 + nr) of group g as contiguous rows of d_qk elements of the kernels' type.
  virtual void load_q(int64_t g, int r0, int nr, void* dst) const = 0;
  // Row pointers for list positions [p, p + nt); rows that need conversion are written to buf (nt rows of
  // d_qk elements of the kernels' type).
  virtual void fetch(const TokenList& list, int64_t p, int nt, void* buf, const void** rows) const = 0;
  // V row pointers for list positions [p, p + nt) when separate_v (rows of d_v elements; buf as in fetch).
  virtual void fetch_v(const TokenList& list, int64_t p, int nt, void* buf, const void** rows) const {}
  // Hints the memory system about positions [p, p + nt) before they are fetched.
  virtual void prefetch(const TokenList& list, int64_t p, int nt) const {}
  // Whether the rows of a list are scattered (a gather through indices): the engine then prefetches a
  // unit's first tile in one burst before fetching it, so their misses overlap.
  virtual bool rows_scattered() const { return false; }
  // Final row r of group g: o normalised (d_v values; zeros when the row saw no token), lse (+inf then)
  // and the max scaled score (-inf then).
  virtual void store(int64_t g, int r, const float* o, float lse, float max_logit) const = 0;
};

// Runs every group of the task with the split plan and part assignment of `schedule` (validated by the
// caller against task.requests).
void run_mla(const MlaTask& task, const Schedule& schedule);

// Row blocks of a group of `rows` rows (the engine processes at most cpu::kMlaMaxRows rows per unit).
int64_t row_blocks(int64_t rows);

}  // namespace tessera::flash_mla
