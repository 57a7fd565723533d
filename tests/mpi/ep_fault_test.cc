// Fault test of the ep component, run by ep_fault_test.sh under `mpirun --enable-recovery`:
//   kill:  rank R-1 dies (SIGKILL, TESSERA_EP_TEST_KILL) in the middle of the third dispatch, after
//          writing part of its data; every other rank must raise an error naming rank R-1 and the
//          operation, well within the timeout.
//   stuck: rank R-1 stays alive but never calls the third dispatch; every other rank must raise a
//          timeout error naming rank R-1 after about num_cpu_timeout_secs.
//   pp:    rank R-1 dies right after pp_set_config; its ring neighbours, waiting in pp_recv for its
//          tensor, and the other ranks, in the third dispatch, must raise an error naming rank R-1.
// Survivors print "FAULT-TEST PASS rank r ..." and exit 0; the script counts them.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "tessera/ep.h"

using namespace tessera;
using namespace tessera::ep;

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "kill";
  const double timeout = mode == "stuck" ? 2.0 : 30.0;
  auto group = Group::world();
  const int R = group->size(), me = group->rank(), victim = R - 1;
  const int64_t T = 256, hidden = 1024, K = 4, E = 4 * R;
  ElasticBufferConfig cfg;
  cfg.num_max_tokens_per_rank = int(T);
  cfg.hidden = int(hidden);
  cfg.num_topk = int(K);
  cfg.num_cpu_timeout_secs = timeout;
  ElasticBuffer buf(group, cfg);
  std::vector<uint16_t> x(size_t(T * hidden), 0x3F80);
  std::vector<int64_t> idx(size_t(T * K));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t k = 0; k < K; ++k) idx[size_t(t * K + k)] = (t + k * (E / K)) % E;
  DispatchArgs a;
  a.x = TensorView(x.data(), DType::kBF16, {T, hidden});
  a.topk_idx = TensorView(idx.data(), DType::kI64, {T, K});
  a.num_experts = int(E);
  for (int i = 0; i < 2; ++i) buf.dispatch(a);  // operations 1 and 2 succeed everywhere

  if (me == victim && mode == "stuck") {
    sleep(unsigned(2 * timeout));
    _exit(0);
  }
  const bool pp_neighbour = mode == "pp" && (me == (victim + 1) % R || me == (victim + R - 1) % R);
  if (mode == "pp") {
    buf.pp_set_config(4096, 2);
    if (me == victim) raise(SIGKILL);
  }
  const auto start = std::chrono::steady_clock::now();
  try {
    if (pp_neighbour) {
      std::vector<float> t(64);
      buf.pp_recv(TensorView(t.data(), DType::kF32, {64}), victim);
      std::printf("FAULT-TEST FAIL rank %d: pp_recv returned although rank %d died\n", me, victim);
      std::fflush(stdout);
      _exit(1);
    }
    const DispatchResult d = buf.dispatch(a);  // operation 3: the victim dies inside it
    CombineArgs c;
    std::vector<uint16_t> y(size_t(d.recv_x.view.shape[0] * hidden), 0);
    c.x = TensorView(y.data(), DType::kBF16, {d.recv_x.view.shape[0], hidden});
    buf.combine(c, *d.handle);
    std::printf("FAULT-TEST FAIL rank %d: no error after the victim %s\n", me, mode.c_str());
    std::fflush(stdout);
    _exit(1);
  } catch (const Error& e) {
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const std::string msg = e.what();
    const bool names_peer = msg.find("rank " + std::to_string(victim)) != std::string::npos;
    const bool names_op = pp_neighbour ? msg.find("ElasticBuffer.pp_recv") != std::string::npos
                                       : msg.find("ElasticBuffer.dispatch") != std::string::npos ||
                                             msg.find("ElasticBuffer.combine") != std::string::npos;
    const bool dies = mode != "stuck";
    const bool in_time = dies ? secs < timeout : secs >= timeout * 0.9 && secs < timeout * 3;
    const bool kind = dies ? msg.find("died") != std::string::npos : msg.find("timed out") != std::string::npos;
    std::printf("FAULT-TEST %s rank %d after %.3f s: %s\n", names_peer && names_op && in_time && kind ? "PASS" : "FAIL",
                me, secs, msg.c_str());
    std::fflush(stdout);
    // A later call must refuse instead of hanging.
    try {
      buf.dispatch(a);
      std::printf("FAULT-TEST FAIL rank %d: the broken buffer accepted another call\n", me);
    } catch (const Error&) {
    }
    std::fflush(stdout);
    _exit(0);
  }
}
