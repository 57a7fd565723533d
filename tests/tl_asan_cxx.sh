#!/usr/bin/env bash
# The host compiler of the ASan run (scripts/sanitize.sh sets TESSERA_TL_CXX to this file): the kernels
# the tile language compiles at run time get the same instrumentation as the library that loads them,
# so an out-of-bounds access in generated code is reported too. tl's kernel cache keys on this command,
# so these kernels never mix with uninstrumented ones. -O1 last, over tl's -O3, as for the library
# (CMakeLists.txt, TESSERA_OPT_HOT): instrumented -O3 compiles took many times longer.
exec g++ -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer "$@" -O1
