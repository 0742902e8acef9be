# cmake/toolchain-aarch64-linux-gnu.cmake: brrr for 64-bit ARM Linux, built on an x86-64 Debian
# machine with Debian's cross compiler (g++-aarch64-linux-gnu) and run under qemu-user.
# scripts/check_arm64.sh installs what it needs and uses it:
#
#   cmake -S . -B build-arm64 -G Ninja -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-aarch64-linux-gnu.cmake \
#     -DBRRR_CUDA=OFF -DBRRR_SERVE=OFF -DBRRR_BENCH=OFF -DBRRR_NATIVE=OFF
#
# Libraries come the multiarch way, as Debian's arm64 packages installed beside the amd64 ones
# (zlib1g-dev:arm64 puts libz.so in /usr/lib/aarch64-linux-gnu), not from a separate sysroot: the
# cross compiler searches those folders itself, and the header-only libraries (Eigen, doctest,
# CLI11, nlohmann-json, stb) are the same files for every architecture.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

# Programs the build runs (doctest lists each test program's cases at build time) go through
# qemu. Where binfmt_misc knows qemu-aarch64 (check_arm64.sh registers it) an arm64 program also
# runs by its name, which the tests that start the brrr program need.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64-static)

# pkg-config (PCRE2) must read the arm64 .pc files, not the build machine's.
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)

# MPI's compiler wrappers and libraries found on the build machine are x86-64's: leave MPI out
# (training runs on one rank; the mpi tests are not built).
set(CMAKE_DISABLE_FIND_PACKAGE_MPI ON)
