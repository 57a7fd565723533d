// Moving dispatch records and combine contributions between ranks (see comm.h for the region
// protocol). Both directions run in two phases: send() does everything other ranks depend on (writes
// into peers' regions, MPI sends, hybrid forwarding and forwarder reductions) and returns; receive()
// waits for this rank's own groups. finish() completes the MPI requests and releases the region.
//
// Modes between nodes:
//  direct: every token crosses to each destination rank on another node in its own MPI message.
//  hybrid: a token crosses once per destination node, to the rank with this rank's local index there
//          (its rail peer), which writes it into the destination ranks of its node; combine sums the
//          node's contributions at that forwarder (one bf16 rounding) and sends one row back.
// Group indices: dispatch group s at a receiver = source rank s. Combine group at a source (direct) =
// contributing rank d; combine group at a forwarder (hybrid) = node(source) * L + local index of d.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "ep/common/record_layout.h"
#include "ep/common/routing.h"
#include "ep/transport/comm.h"
#include "tessera/core/tensor.h"

namespace tessera::ep::detail {

enum class Mode { kDirect, kHybrid };

// MPI message streams (tags) of one operation.
enum Stream { kStreamDispatch = 1, kStreamBundle = 2, kStreamCombine = 3, kStreamPartial = 4 };

// Staging slots of Comm::staging().
enum Staging { kStageSend = 0, kStageRecv = 1, kStageCombineSend = 2, kStageCombineRecv = 3, kStageScratch = 4 };

struct DispatchPlan {
  const Routing* routing = nullptr;
  TokenRows own;  // this rank's tokens, all of them
  DispatchRecord rec;
  int64_t hidden_bytes = 0, sf_bytes = 0;  // bytes copied per token (unrounded)
  int64_t num_max = 0;
  Mode mode = Mode::kDirect;
  // Direct receive (output_arena.h): per destination rank, where this rank's first x row goes in
  // that rank's output (null: through the slot planes); x_in_place: this rank's own output was placed
  // in its arena, so every received group's x rows are already there.
  const std::vector<char*>* direct_x = nullptr;
  bool x_in_place = false;
};

// What a hybrid forwarder keeps from a dispatch for the matching combine.
struct ForwardPlan {
  // Per node N != own: for bundle token b received from the rail peer on N, the slot it got at each
  // local rank l (fwd_slot[N][b * L + l], -1 = not sent there), and its experts (fwd_idx[N][b * K + k]).
  std::vector<std::vector<int32_t>> fwd_slot;
  std::vector<std::vector<int64_t>> fwd_idx;
  std::vector<int64_t> fwd_count;
  // Per node N != own: the position of each of this rank's tokens in the bundle it sent to N, or -1.
  std::vector<std::vector<int32_t>> bundle_pos;
};

struct DispatchState {
  std::vector<GroupData> groups;  // per source rank, valid after receive()
  ForwardPlan fwd;
  std::vector<int64_t> recv_entry;               // per source rank: MPI entry index (direct, remote) or -1
  std::vector<std::vector<int32_t>> self_picks;  // hybrid: per node, bundle tokens this rank keeps
};

void dispatch_send(Comm& comm, uint64_t seq, const DispatchPlan& plan, DispatchState& st);
void dispatch_receive(Comm& comm, uint64_t seq, const DispatchPlan& plan, DispatchState& st);
// Completes this rank's MPI requests and marks its region free for the next operation.
void transport_finish(Comm& comm, uint64_t seq);

// ---- combine ----

// How the source orders and weighs contributions (see combine.cc).
enum class CombineOrder {
  kLastLane,  // one contribution per destination (or node, in hybrid mode), ascending last top-k lane
  kPerLane,   // one contribution per lane, ascending lane (expand without multiple reduction)
  kRanks,     // one contribution per destination rank, ascending rank (legacy Buffer)
};

struct CombinePlan {
  CombineRecord rec;
  int64_t hidden = 0;
  int64_t num_max = 0;
  int num_topk = 0;
  Mode mode = Mode::kDirect;
  CombineOrder order = CombineOrder::kLastLane;
  bool weighted = false;  // low-latency combine: sum of w * row
  // Rows this rank received per source in the dispatch (the contributions it returns).
  std::vector<int64_t> counts;
  // Contributions for group s, tokens [j0, j1): rows (rows_per_token each, pitch rec.row_bytes) and
  // topk weights (num_topk floats, or nothing when rec.weight_bytes == 0), written at rows + (j-j0)*
  // token_pitch, w + (j-j0)*w_pitch floats.
  // streaming: the destination is another rank's region (use non-temporal stores for large rows).
  std::function<void(int s, int64_t j0, int64_t j1, char* rows, int64_t token_pitch, float* w, int64_t w_pitch,
                     bool streaming)>
      fill;
  // Optional: this rank's contributions to its own tokens are rows of this array (token pitch
  // self_stride bytes, one row per token; weights self_w), read in place instead of copied.
  const char* self_rows = nullptr;
  int64_t self_stride = 0;
  const float* self_w = nullptr;
  int64_t self_w_stride = 0;
  // Optional, for rows_per_token > 1: this rank's contributions to its own tokens as row pointers,
  // rows_per_token per token (low-latency combine reads the expert outputs in place).
  const std::vector<const uint16_t*>* self_lane_rows = nullptr;
  // Optional, single node: per source rank, the byte offset in this rank's arena where its
  // contribution rows already are (in_place_pitch bytes apart; -1: copy them). The source reads them
  // there instead of from its region, and this rank's combine waits until it has (combine_release).
  std::vector<int64_t> in_place_offset;
  int64_t in_place_pitch = 0;
};

// The source-side view of what the dispatch sent (from the handle).
struct CombineSource {
  const Routing* routing = nullptr;
  const ForwardPlan* fwd = nullptr;
  const std::vector<float>* lane_weights = nullptr;  // weighted: [T*K]
};

struct CombineState {
  std::vector<int64_t> recv_entry;  // per contributor rank (direct remote) or node (hybrid partial)
  std::vector<int64_t> partial_count;
  std::vector<int> in_place_readers;  // local ranks reading this rank's rows in place
};

void combine_send(Comm& comm, uint64_t seq, const CombinePlan& plan, const CombineSource& src, CombineState& st);
// Waits for the contributions and reduces them into out_x (bf16 [T, hidden], any row stride); the
// combined weights into out_w (float32 [T, K], contiguous) unless undefined; bias0/bias1 (bf16
// [T, hidden], any row stride) are added unless undefined.
void combine_receive(Comm& comm, uint64_t seq, const CombinePlan& plan, const CombineSource& src, CombineState& st,
                     const TensorView& out_x, const TensorView& out_w, const TensorView& bias0,
                     const TensorView& bias1);
// After transport_finish: waits until every rank that read this rank's rows in place is done with
// them, so the caller may reuse its combine input.
void combine_release(Comm& comm, uint64_t seq, const CombineState& st);

}  // namespace tessera::ep::detail
