// Built when oneDNN was not found or TESSERA_WITH_PEERS is OFF: the peer reports itself unavailable.
#include "peers/onednn_matmul.h"
#include "tessera/core/error.h"

namespace tessera::bench {

struct OnednnMatmul::Impl {};

bool OnednnMatmul::available() {
  return false;
}
void OnednnMatmul::set_threads(int) {}
void OnednnMatmul::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  fn(0, n);
}

OnednnMatmul::OnednnMatmul(int64_t, int64_t, int64_t) {
  fail(ErrorCode::kNotImplemented, "OnednnMatmul: this build has no oneDNN (TESSERA_WITH_PEERS=OFF or not found)");
}

OnednnMatmul::~OnednnMatmul() = default;

void OnednnMatmul::run(const void*, const void*, void*) {
  fail(ErrorCode::kNotImplemented, "OnednnMatmul::run: this build has no oneDNN");
}

std::string OnednnMatmul::label() {
  return "oneDNN";
}
std::string OnednnMatmul::description() {
  return "oneDNN: not in this build (TESSERA_WITH_PEERS=OFF or not found)";
}

std::string OnednnMatmul::implementation() const {
  return "n/a";
}

}  // namespace tessera::bench
