#!/usr/bin/env bash
# usage: ep_fault_test.sh <ep_fault_test binary> <mpirun> <ranks> <kill|stuck> [ranks_per_node]
# Runs the fault test under `mpirun --enable-recovery` (without it, mpirun itself kills the whole job
# when one rank dies) and passes when every surviving rank printed "FAULT-TEST PASS".
set -u
bin=$1 mpirun=$2 ranks=$3 mode=$4 rpn=${5:-0}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_hwloc_base_binding_policy=none TESSERA_NUM_THREADS=1 TESSERA_EP_RANKS_PER_NODE=$rpn
if [ "$mode" = kill ]; then export TESSERA_EP_TEST_KILL="$((ranks - 1)):3"; fi
out=$("$mpirun" --enable-recovery -np "$ranks" "$bin" "$mode" 2>&1)
echo "$out" | grep -E "FAULT-TEST" || true
passes=$(echo "$out" | grep -o "FAULT-TEST PASS" | wc -l)  # ranks' lines may be joined
fails=$(echo "$out" | grep -o "FAULT-TEST FAIL" | wc -l)
if [ "$passes" -ne $((ranks - 1)) ] || [ "$fails" -ne 0 ]; then
  echo "ep fault test ($mode, $ranks ranks): expected $((ranks - 1)) passing survivors, got $passes (and $fails failures)"
  echo "$out" | tail -30
  exit 1
fi
echo "ep fault test ($mode, $ranks ranks, ranks_per_node $rpn): all $passes survivors raised the named error"
