# Cross build for 64-bit ARM Linux from an x86-64 Debian host: Debian's g++-aarch64-linux-gnu, its
# sysroot /usr/aarch64-linux-gnu, and multiarch :arm64 libraries under /usr/lib/aarch64-linux-gnu.
# Tests run under qemu-aarch64 (CMAKE_CROSSCOMPILING_EMULATOR; scripts/test_arm64.sh sets the CPU model).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

# Programs (cmake, ninja, the tile-language's embed step) come from the host; headers and libraries from
# the sysroot first, then the host's architecture-independent /usr/include (Highway is header-only).
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)

# -L: the sysroot's dynamic loader. LD_LIBRARY_PATH: its C library too. Without it the loader follows the
# host's ld.so.cache to the multiarch libc6:arm64 in /lib/aarch64-linux-gnu, whose Debian revision
# differs from the cross loader's, and the first pthread_create spins forever. The CPU model comes from
# QEMU_CPU (scripts/test_arm64.sh), so one configuration serves every model.
if(NOT CMAKE_CROSSCOMPILING_EMULATOR)
  set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L /usr/aarch64-linux-gnu -E LD_LIBRARY_PATH=/usr/aarch64-linux-gnu/lib
      CACHE STRING "runs the cross-built tests (and gtest's test discovery) on this host")
endif()
