#!/usr/bin/env bash
# usage: model_ep_test.sh <model_ep_test binary> <tessera binary> <mpirun>
# Expert parallelism of the model runner must not change a bit: for an FP8 and a bf16 tiny checkpoint,
# every step's greedy tokens, logits and per-layer hidden states of one rank (no mpirun) must equal those
# of 2 ranks and of 4 ranks (2 experts each; one rank runs no prompt), and `tessera run` must print the
# same sequences under `mpirun -np 2`.
set -u
bin=$1 cli=$2 mpirun=$3
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_hwloc_base_binding_policy=none TESSERA_NUM_THREADS=1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tessera_model_ep_XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "model ep test: $*"; exit 1; }
"$bin" write "$tmp/ckpt" || fail "writing the checkpoints failed"
for kind in fp8 bf16; do
  "$bin" run "$tmp/ckpt/$kind" "$tmp/one_$kind" >/dev/null || fail "$kind: one rank failed"
  for ranks in 2 4; do
    "$mpirun" -np $ranks "$bin" run "$tmp/ckpt/$kind" "$tmp/ep${ranks}_$kind" >/dev/null ||
      fail "$kind: $ranks ranks failed"
    diff -rq "$tmp/one_$kind" "$tmp/ep${ranks}_$kind" >/dev/null ||
      fail "$kind: $ranks ranks differ from one rank: $(diff -rq "$tmp/one_$kind" "$tmp/ep${ranks}_$kind" | head -3)"
  done
  [ "$(ls "$tmp/one_$kind" | wc -l)" -eq 3 ] || fail "$kind: expected 3 sequence files"
  echo "model ep test: $kind: tokens, logits and hidden states of 1, 2 and 4 ranks are bitwise identical"
done
args=(run --checkpoint "$tmp/ckpt/fp8" --prompt 5,17,3,99 --prompt 12,4 --prompt 90,31,6 --max-new-tokens 4 --batch-invariant --quiet)
one=$("$cli" "${args[@]}" | grep '^sequence' | sort) || fail "tessera run failed"
two=$("$mpirun" -np 2 "$cli" "${args[@]}" | grep '^sequence' | sort) || fail "mpirun -np 2 tessera run failed"
[ "$(echo "$one" | wc -l)" -eq 3 ] || fail "tessera run printed: $one"
[ "$one" = "$two" ] || fail "tessera run: 1 rank printed '$one', 2 ranks '$two'"
echo "model ep test: tessera run prints the same sequences with 1 and 2 ranks"
