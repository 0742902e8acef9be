// kernels/cuda/simt_hopper.cpp: the emulator's Hopper instructions: wgmma through matrix
// descriptors, mbarriers with phases and transaction bytes, bulk tensor copies (TMA) through
// tensor maps, fence.proxy.async and setmaxnreg. Chapter 21 (Hopper). Read before:
// kernels/cuda/simt_hopper.h (what each does on the GPU), kernels/cuda/simt_tensor_cores.cpp
// (mma.sync, one warp wide). Read next: kernels/cuda/examples_hopper.cu.
//
// wgmma is warpgroup-collective: the 128 threads meet (warpgroup_exchange, simt_emulator.cpp)
// and the one that arrives last, before any other runs on, reads both operands from shared
// memory into the warpgroup's snapshot, through the descriptors exactly as the PTX ISA's
// "Shared Memory Matrix Layout" places each element (below), and tells the race detector that
// the async proxy now reads those bytes until the wgmma's group is waited for. Each thread then
// computes its own accumulators from the snapshot with the tensor cores' sum (truncating, in
// blocks of 8 products, as simt_tensor_cores.cpp models mma.sync on the A100; whether the H100
// adds a k16 step the same way is for the conformance run on a chip to decide). So the result
// is there when wgmma returns; what a GPU does later, the emulator checks instead: an operand
// written before the wait is an error, not a silently different product.
//
// A bulk copy (TMA load) is done the way cp.async is: at issue its destination is marked in
// flight (0xFF bytes; any access is an error), and the copy completes when a thread waits on
// its mbarrier, which then counts its bytes (complete_tx). A phase completes when all its
// arrivals have come and the bytes expected (expect_tx) have arrived; more bytes than expected
// is an error, fewer a deadlock the emulator reports with the mbarrier's state. try_wait
// sleeps until the phase completes (the fiber yields to the others; simt_emulator.cpp).
//
// Descriptors address the block's shared-memory window; the emulator's window is the dynamic
// shared memory (BRRR_DYNAMIC_SHARED, 1024-aligned), so wgmma operands must live there (every
// Hopper kernel's tiles do; mbarriers and TMA may use static __shared__ too).
#include "kernels/cuda/simt_hopper.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <sstream>
#include <unordered_map>
#include <vector>

#include "kernels/cuda/emulator_memory.h"
#include "kernels/cuda/simt_internal.h"

namespace brrr::simt::detail {
namespace {

constexpr int kGroups = 8;  // warpgroups in a block of 1024 threads

std::string hex(std::uint64_t value) {
  std::ostringstream text;
  text << "0x" << std::hex << value;
  return text.str();
}

// --- shared memory: the window and the swizzles ------------------------------------------------

std::uintptr_t window_begin() {
  std::uintptr_t begin = 0;
  std::size_t bytes = 0;
  dynamic_shared_window(begin, bytes);
  return begin;
}

// The address whose swizzle counts: the window's for dynamic shared memory, the variable's own
// (its alignment is its declaration's) for static __shared__.
std::uintptr_t swizzle_key(std::uintptr_t address) {
  std::uintptr_t begin = 0;
  std::size_t bytes = 0;
  dynamic_shared_window(begin, bytes);
  return address - begin < bytes ? address - begin : address;
}

// The 16-byte chunk of a row of `row_bytes` (32, 64, 128) XORed with the row in its pattern.
std::uintptr_t swizzled(std::uintptr_t key, unsigned row_bytes) {
  if (row_bytes <= 16) return key;
  const std::uintptr_t mask = row_bytes / 16 - 1;
  return key ^ (((key >> 7) & mask) << 4);
}

// --- matrix descriptors ---------------------------------------------------------------------------

struct Descriptor {
  std::uint32_t start, leading, stride;
  unsigned base_offset;
  Swizzle swizzle;
};

Descriptor decode(std::uint64_t bits) {
  return {static_cast<std::uint32_t>(bits & 0x3FFF) << 4, static_cast<std::uint32_t>((bits >> 16) & 0x3FFF) << 4,
          static_cast<std::uint32_t>((bits >> 32) & 0x3FFF) << 4, static_cast<unsigned>((bits >> 49) & 7),
          static_cast<Swizzle>(bits >> 62)};
}

// The window address of element (mn, k) of a 16-bit operand, k < 16, as the canonical layouts
// place it (in 16-byte units T of 8 elements; W = the swizzle's row in units, 1 without one):
//   K-major, no swizzle:  ((8, m), (T, 2)) : ((1T, SBO), (1, LBO))   8 x 16-byte core matrices
//   K-major, swizzled:    ((8, m), (T, 2)) : ((W T, SBO), (1, T))    rows of W T, 8-row groups SBO apart
//   MN-major, no swizzle: ((T, 1, m), (8, k)) : ((1, T, SBO), (1T, LBO))
//   MN-major, swizzled:   ((T, W, m), (8, k)) : ((1, T, LBO), (W T, SBO))
// then the swizzle XORs address bits 4.. with bits 7.. (the CUTLASS canonical GMMA layouts,
// which spell the PTX ISA's tables; LBO is unused for a swizzled K-major tile).
std::uint32_t element_address(const Descriptor& d, bool mn_major, int mn, int k) {
  const std::uint32_t row = swizzle_row_bytes(d.swizzle), mn_u = static_cast<std::uint32_t>(mn),
                      k_u = static_cast<std::uint32_t>(k);
  std::uint32_t offset = 0;
  if (!mn_major) {
    offset = (mn_u % 8) * row + (mn_u / 8) * d.stride + (k_u % 8) * 2 +
             (k_u / 8) * (d.swizzle == Swizzle::kNone ? d.leading : 16);
  } else if (d.swizzle == Swizzle::kNone) {
    offset = (mn_u % 8) * 2 + (mn_u / 8) * d.stride + (k_u % 8) * 16 + (k_u / 8) * d.leading;
  } else {
    const std::uint32_t unit = mn_u / 8, w = row / 16;
    offset = (mn_u % 8) * 2 + (unit % w) * 16 + (unit / w) * d.leading + (k_u % 8) * row + (k_u / 8) * d.stride;
  }
  return static_cast<std::uint32_t>(swizzled(d.start + offset, row));
}

// The layout rules a descriptor of an mn x 16 operand must keep (the tile must fit them, not
// only the bytes it happens to touch).
void check_descriptor(const Descriptor& d, std::uint64_t bits, bool mn_major, int mn, const char* operand,
                      const Where& at) {
  const auto fail = [&](const std::string& why) {
    ::brrr::detail::fail(where_in_kernel(&at), ": wgmma.mma_async: the descriptor of ", operand, " (", hex(bits),
                         ": start ", d.start, ", leading ", d.leading, ", stride ", d.stride, " bytes, ",
                         d.swizzle == Swizzle::kNone ? std::string("no swizzle")
                                                     : std::to_string(swizzle_row_bytes(d.swizzle)) + "B swizzle",
                         ", ", mn_major ? "MN-major" : "K-major", ") ", why);
  };
  const unsigned row = swizzle_row_bytes(d.swizzle), pattern = swizzle_pattern_bytes(d.swizzle);
  if (d.swizzle != Swizzle::kNone) {
    if (d.base_offset != 0)
      fail("sets a base offset; the emulator models tiles that start their swizzle pattern (base offset 0) only");
    if (d.start % pattern >= row)
      fail("starts " + std::to_string(d.start % pattern) + " bytes into a " + std::to_string(pattern) +
           "-byte swizzle pattern, past its first row: a swizzled tile starts at a multiple of " +
           std::to_string(pattern) + " bytes (plus an offset within its first " + std::to_string(row) +
           "-byte row, to step through K)");
    if (d.stride % pattern != 0)
      fail("has a stride offset that is not a multiple of the " + std::to_string(pattern) +
           "-byte pattern: each group of 8 rows must start a pattern of its own");
    if (mn_major && mn > static_cast<int>(row / 2) && d.leading % pattern != 0)
      fail("has a leading offset that is not a multiple of the " + std::to_string(pattern) + "-byte pattern");
  } else {
    if (d.leading == 0) fail("has a leading offset of 0: its two 8-wide halves along K would overlap");
    if (mn > 8 && d.stride == 0) fail("has a stride offset of 0: its 8-row groups would overlap");
  }
}

// --- wgmma ------------------------------------------------------------------------------------

struct Warpgroup {
  float a[64][16];
  float b[16][256];  // b[k][n]
  bool fenced = false;
  int committed = 0;                          // commit groups so far
  std::vector<std::pair<int, int>> reading;  // (group, the race detector's read id)
};

struct ThreadBulk {
  int committed = 0;
  std::vector<std::pair<int, int>> reading;  // TMA stores' reads of shared memory: (group, read id)
};

// --- mbarriers -----------------------------------------------------------------------------------

struct Copy {
  std::vector<std::byte*> chunks;  // 16 bytes each
  std::vector<std::byte> data;
  const void* pc;
};

struct Mbarrier {
  unsigned count = 0, pending = 0;
  long long tx = 0, expected = 0, arrived = 0;  // tx = expected - arrived this phase
  unsigned phase = 0;                           // phases completed
  std::vector<Copy> copies;                     // in flight, completing this phase's bytes
  std::vector<int> sleepers;
  std::vector<std::uint32_t> clock, completed;  // the race detector's: this phase's, the last one's
  Where init_at;
  int init_thread = 0;
  std::uint32_t init_serial = 0;
};

struct Block {
  Warpgroup groups[kGroups];
  std::vector<ThreadBulk> bulk;
  std::unordered_map<std::uintptr_t, Mbarrier> barriers;
};

Block& block() {
  static Block instance;
  return instance;
}

float bf16_half(std::uint32_t word, int half) {
  return std::bit_cast<float>((half ? word >> 16 : word & 0xFFFF) << 16);
}

// The 16-byte chunks a set of window addresses fall in, merged into ranges of real addresses.
std::vector<std::pair<std::uintptr_t, std::uintptr_t>> chunk_ranges(std::vector<std::uint32_t>& chunks) {
  std::sort(chunks.begin(), chunks.end());
  chunks.erase(std::unique(chunks.begin(), chunks.end()), chunks.end());
  std::vector<std::pair<std::uintptr_t, std::uintptr_t>> ranges;
  const std::uintptr_t base = window_begin();
  for (std::uint32_t chunk : chunks) {
    const std::uintptr_t begin = base + chunk * 16u;
    if (!ranges.empty() && ranges.back().second == begin) ranges.back().second += 16;
    else ranges.emplace_back(begin, begin + 16);
  }
  return ranges;
}

// Reads an operand of `rows` x 16 through its descriptor into out[mn][k] (B: transposed by the
// caller), noting the chunks it touched.
template <class Store>
void read_operand(std::uint64_t bits, bool mn_major, int rows, const char* operand, const Where& at,
                  std::vector<std::uint32_t>& chunks, Store store) {
  const Descriptor d = decode(bits);
  check_descriptor(d, bits, mn_major, rows, operand, at);
  std::uintptr_t begin = 0;
  std::size_t bytes = 0;
  dynamic_shared_window(begin, bytes);
  for (int mn = 0; mn < rows; ++mn)
    for (int k = 0; k < 16; ++k) {
      const std::uint32_t address = element_address(d, mn_major, mn, k);
      if (address + 2 > bytes)
        ::brrr::detail::fail(where_in_kernel(&at), ": wgmma.mma_async: the descriptor of ", operand, " (", hex(bits),
                             ") places element (", mn, ", ", k, ") at byte ", address,
                             " of shared memory, past the launch's ", bytes,
                             " bytes of dynamic shared memory (the emulator's wgmma operands live there)");
      std::uint16_t value = 0;
      std::memcpy(&value, reinterpret_cast<const void*>(begin + address), 2);
      store(mn, k, std::bit_cast<float>(static_cast<std::uint32_t>(value) << 16));
      chunks.push_back(address / 16);
    }
}

constexpr int kWords = 10;  // desc_a (2), desc_b (2), scale_d, shape, A's registers (4)

// The last thread of the warpgroup to arrive: checks and snapshots the operands.
void issue_wgmma(Warpgroup& group, int g, const std::uint32_t* table, const void* pc, const Where& at) {
  for (int r = 1; r < 128; ++r)
    if (!std::equal(table, table + 6, table + r * kWarpgroupWords))
      ::brrr::detail::fail(where_in_kernel(&at), ": wgmma.mma_async: thread ", 128 * g + r,
                           " of warpgroup ", g, " gives another shape, scale-d or descriptor than thread ", 128 * g,
                           "; the warpgroup issues one instruction together, with the same operands");
  if (!group.fenced)
    ::brrr::detail::fail(where_in_kernel(&at), ": wgmma.mma_async before any wgmma.fence of warpgroup ", g,
                         " (wgmma_fence() must come before the first wgmma, and between a thread's own writes of "
                         "the registers and a wgmma that reads them)");
  const std::uint64_t desc_a = table[0] | std::uint64_t{table[1]} << 32, desc_b = table[2] | std::uint64_t{table[3]} << 32;
  const int n = static_cast<int>(table[5] & 0x1FF);
  const bool trans_a = table[5] >> 9 & 1, trans_b = table[5] >> 10 & 1, registers = table[5] >> 11 & 1;
  std::vector<std::uint32_t> chunks;
  if (registers) {
    for (int r = 0; r < 128; ++r) {  // warp w's A fragment: rows 16 w .. 16 w + 15
      const int w = r / 32, lane = r % 32, q = lane / 4, t = lane % 4;
      for (int i = 0; i < 4; ++i)
        for (int h = 0; h < 2; ++h)
          group.a[16 * w + q + 8 * (i % 2)][2 * t + h + 8 * (i / 2)] = bf16_half(table[r * kWarpgroupWords + 6 + i], h);
    }
  } else {
    read_operand(desc_a, trans_a, 64, "A", at, chunks, [&](int m, int k, float v) { group.a[m][k] = v; });
  }
  read_operand(desc_b, trans_b, n, "B", at, chunks, [&](int nn, int k, float v) { group.b[k][nn] = v; });
  const int id = races::async_read(chunk_ranges(chunks), pc, "wgmma.mma_async", g, true);
  group.reading.emplace_back(group.committed, id);
  if (counters::Recorder* r = counters::active) counters::wgmma(*r, n);
}

// One warpgroup-collective step with nothing but its name and one word to agree on.
void warpgroup_step(const char* name, std::uint32_t word, const Where& at, const auto& last_does) {
  bool last = false;
  const std::uint32_t* table = warpgroup_exchange(name, &word, 1, at, last);
  if (!last) return;
  const int g = thread_in_block() / 128;
  for (int r = 0; r < 128; ++r)
    if (table[r * kWarpgroupWords] != word)
      ::brrr::detail::fail(where_in_kernel(&at), ": ", name, " is given ", table[r * kWarpgroupWords], " by thread ",
                           128 * g + r, " and ", word, " by another of warpgroup ", g,
                           "; it must be the same in all 128 threads");
  last_does(block().groups[g]);
}

// --- mbarriers --------------------------------------------------------------------------------------

Mbarrier& barrier_at(const std::uint64_t* bar, const char* name, const Where& at) {
  auto it = block().barriers.find(reinterpret_cast<std::uintptr_t>(bar));
  if (it == block().barriers.end())
    ::brrr::detail::fail(where_in_kernel(&at), ": ", name, " on ", static_cast<const void*>(bar),
                         ", which no thread of this block has initialized (mbarrier_init, then a __syncthreads)");
  const Mbarrier& m = it->second;
  if (races::unordered(m.init_serial, m.init_thread))
    ::brrr::detail::fail(where_in_kernel(&at), ": ", name, " on the mbarrier at ", static_cast<const void*>(bar),
                         ", which thread ", m.init_thread, " initialized at ", file_name(m.init_at.file_name()), ":",
                         m.init_at.line(), " with no barrier between: an mbarrier may be used by other threads only "
                         "after its init is visible to them (mbarrier_init, then a __syncthreads)");
  return it->second;
}

void wake_all(Mbarrier& m) {
  for (int thread : m.sleepers) wake(thread);
  m.sleepers.clear();
}

// The bulk copies in flight on `m` arrive: their bytes land and count against the phase.
void complete_copies(Mbarrier& m) {
  if (m.copies.empty()) return;
  for (Copy& copy : m.copies) {
    for (std::size_t c = 0; c < copy.chunks.size(); ++c) {
      std::memcpy(copy.chunks[c], copy.data.data() + 16 * c, 16);
      races::bulk_copy_complete(copy.chunks[c], 16, copy.pc);
    }
    m.tx -= static_cast<long long>(copy.data.size());
    m.arrived += static_cast<long long>(copy.data.size());
  }
  m.copies.clear();
  races::release_async(m.clock);
}

void check_phase(Mbarrier& m, const std::uint64_t* bar, const Where& at) {
  if (m.pending != 0) return;
  if (m.tx < 0)
    ::brrr::detail::fail(where_in_kernel(&at), ": the mbarrier at ", static_cast<const void*>(bar), " received ",
                         m.arrived, " bytes of bulk copies in phase ", m.phase, " but expected ", m.expected,
                         " (mbarrier_arrive_expect_tx / mbarrier_expect_tx): the byte count must be the bytes that "
                         "arrive, every box's full size, zeros past the tensor's edges included");
  if (m.tx > 0) return;
  ++m.phase;
  m.completed = std::move(m.clock);
  m.clock.clear();
  m.pending = m.count;
  m.expected = m.arrived = 0;
  wake_all(m);
}

void check_map(const TensorMap* map, const char* name, const Where& at) {
  if (!map || map->magic != kTensorMapMagic)
    ::brrr::detail::fail(where_in_kernel(&at), ": ", name, " is given ", static_cast<const void*>(map),
                         ", which is not a tensor map made by make_tensor_map_2d");
}

// Where each 16-byte chunk of the box lands in shared memory, and which elements it holds.
template <class Each>
void for_each_box_chunk(const TensorMap& map, std::byte* shared, int x, int y, Each each) {
  const unsigned size = element_bytes(map.type), row_bytes = map.box[0] * size;
  const unsigned span = tensor_map_swizzle_bytes(map.swizzle);
  for (unsigned row = 0; row < map.box[1]; ++row)
    for (unsigned c = 0; c < row_bytes / 16; ++c) {
      const std::uintptr_t p = reinterpret_cast<std::uintptr_t>(shared) + row * row_bytes + c * 16;
      const std::uintptr_t key = swizzle_key(p);
      std::byte* chunk = reinterpret_cast<std::byte*>(p - key + swizzled(key, span));
      const long long gx = static_cast<long long>(x) + c * 16 / size, gy = static_cast<long long>(y) + row;
      each(chunk, gx, gy, 16 / size);
    }
}

void check_box_destination(const TensorMap& map, const void* shared, const char* name, const Where& at) {
  const auto p = reinterpret_cast<std::uintptr_t>(shared);
  if (p % 128 != 0)
    ::brrr::detail::fail(where_in_kernel(&at), ": ", name, ": shared memory at ", shared,
                         " is not 128-byte aligned (a bulk tensor copy's shared address must be)");
  std::uintptr_t begin = 0;
  std::size_t bytes = 0;
  dynamic_shared_window(begin, bytes);
  const std::size_t box = std::size_t{map.box[0]} * map.box[1] * element_bytes(map.type);
  if (p - begin < bytes && p - begin + box > bytes)
    ::brrr::detail::fail(where_in_kernel(&at), ": ", name, ": a box of ", box, " bytes at byte ", p - begin,
                         " of dynamic shared memory runs past its ", bytes, " bytes");
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The entry points simt_hopper.h declares

void hopper_begin_block(int threads) {
  Block& b = block();
  for (Warpgroup& g : b.groups) g.fenced = false, g.committed = 0, g.reading.clear();
  b.bulk.assign(static_cast<std::size_t>(threads), ThreadBulk{});
  b.barriers.clear();
}

std::string mbarrier_state(const void* bar) {
  const auto it = block().barriers.find(reinterpret_cast<std::uintptr_t>(bar));
  if (it == block().barriers.end()) return "an mbarrier that is not initialized";
  const Mbarrier& m = it->second;
  std::ostringstream text;
  text << "the mbarrier at " << bar << " (initialized at " << file_name(m.init_at.file_name()) << ":"
       << m.init_at.line() << " for " << m.count << " arrivals) is in phase " << m.phase << " with " << m.pending
       << " of its " << m.count << " arrivals still to come and " << m.tx << " transaction bytes still expected ("
       << m.expected << " expected by expect_tx, " << m.arrived << " arrived, " << m.copies.size()
       << " bulk copies in flight)";
  if (m.pending == 0 && m.tx > 0 && m.copies.empty())
    text << ": expect_tx counted more bytes than the bulk copies bring";
  return text.str();
}

std::uint64_t wgmma_descriptor(const void* tile, unsigned leading_bytes, unsigned stride_bytes, Swizzle swizzle,
                               const Where& at) {
  std::uintptr_t begin = 0;
  std::size_t bytes = 0;
  dynamic_shared_window(begin, bytes);
  const auto p = reinterpret_cast<std::uintptr_t>(tile);
  if (p - begin >= bytes)
    ::brrr::detail::fail(where_in_kernel(&at), ": wgmma_descriptor of ", tile,
                         ", which is not in the launch's dynamic shared memory (the emulator's wgmma operands live "
                         "there: BRRR_DYNAMIC_SHARED)");
  if (p % 16 != 0 || leading_bytes % 16 != 0 || stride_bytes % 16 != 0 || leading_bytes >= (1u << 18) ||
      stride_bytes >= (1u << 18))
    ::brrr::detail::fail(where_in_kernel(&at), ": wgmma_descriptor: the start (byte ", p - begin,
                         "), leading offset (", leading_bytes, ") and stride offset (", stride_bytes,
                         ") must be multiples of 16 bytes below 256 KiB (the descriptor keeps bits 4 to 17)");
  return wgmma_descriptor_bits(static_cast<std::uint32_t>(p - begin), leading_bytes, stride_bytes, swizzle);
}

void wgmma_fence(const Where& at) {
  warpgroup_step("wgmma.fence", 0, at, [](Warpgroup& g) { g.fenced = true; });
}

void wgmma_commit_group(const Where& at) {
  warpgroup_step("wgmma.commit_group", 0, at, [](Warpgroup& g) { ++g.committed; });
}

void wgmma_wait_group(int pending, const Where& at) {
  warpgroup_step("wgmma.wait_group", static_cast<std::uint32_t>(pending), at, [&](Warpgroup& g) {
    std::erase_if(g.reading, [&](const std::pair<int, int>& read) {
      if (read.first >= g.committed - pending) return false;
      races::async_read_end(read.second);
      return true;
    });
  });
}

void wgmma(int n, bool trans_a, bool trans_b, float* d, const unsigned* a, std::uint64_t desc_a, std::uint64_t desc_b,
           int scale_d, const void* pc, const Where& at) {
  std::uint32_t words[kWords] = {static_cast<std::uint32_t>(desc_a), static_cast<std::uint32_t>(desc_a >> 32),
                                 static_cast<std::uint32_t>(desc_b), static_cast<std::uint32_t>(desc_b >> 32),
                                 scale_d != 0,
                                 static_cast<std::uint32_t>(n) | trans_a << 9 | trans_b << 10 | (a != nullptr) << 11};
  if (a)
    for (int i = 0; i < 4; ++i) words[6 + i] = a[i];
  bool last = false;
  const std::uint32_t* table = warpgroup_exchange("wgmma.mma_async", words, kWords, at, last);
  const int thread = thread_in_block(), g = thread / 128, r = thread % 128;
  Warpgroup& group = block().groups[g];
  if (last) issue_wgmma(group, g, table, pc, at);
  // This thread's accumulators: warp w of the group has rows 16 w .., each 8-column chunk j laid
  // out as mma.m16n8's c (value i: row q + 8 (i / 2), column 2 t + i % 2).
  const int w = r / 32, q = r % 32 / 4, t = r % 4;
  for (int j = 0; j < n / 8; ++j)
    for (int i = 0; i < 4; ++i) {
      const int row = 16 * w + q + 8 * (i / 2), column = 8 * j + 2 * t + i % 2;
      double products[16];
      for (int k = 0; k < 16; ++k) products[k] = static_cast<double>(group.a[row][k]) * group.b[k][column];
      d[4 * j + i] = tensor_core_sum(scale_d ? d[4 * j + i] : 0.0f, products, 16, 8);
    }
}

void mbarrier_init(std::uint64_t* bar, unsigned arrivals, const void* pc, const Where& at) {
  if (reinterpret_cast<std::uintptr_t>(bar) % 8 != 0)
    ::brrr::detail::fail(where_in_kernel(&at), ": mbarrier_init: ", static_cast<void*>(bar),
                         " is not 8-byte aligned (an mbarrier is a 64-bit object in shared memory)");
  if (arrivals < 1 || arrivals >= (1u << 20))
    ::brrr::detail::fail(where_in_kernel(&at), ": mbarrier_init: ", arrivals,
                         " arrivals; an mbarrier counts 1 to 2^20 - 1");
  races::kernel_access(bar, 8, true, pc);
  Mbarrier& m = block().barriers[reinterpret_cast<std::uintptr_t>(bar)];
  m = Mbarrier{};
  m.count = m.pending = arrivals;
  m.init_at = at;
  m.init_thread = thread_in_block();
  m.init_serial = races::now();
}

std::uint64_t mbarrier_arrive(std::uint64_t* bar, unsigned expect_bytes, bool arrive, const void* pc,
                              const Where& at) {
  Mbarrier& m = barrier_at(bar, arrive ? "mbarrier_arrive" : "mbarrier_expect_tx", at);
  atomic_access(bar, 8, pc);
  m.tx += expect_bytes;
  m.expected += expect_bytes;
  if (arrive) {
    if (m.pending == 0)
      ::brrr::detail::fail(where_in_kernel(&at), ": mbarrier_arrive on the mbarrier at ", static_cast<void*>(bar),
                           ", whose phase ", m.phase, " already has all its ", m.count,
                           " arrivals (it waits for transaction bytes): more arrivals than the count it was "
                           "initialized with");
    --m.pending;
    races::release(m.clock);
  }
  const std::uint64_t token = m.phase;
  check_phase(m, bar, at);
  wake_all(m);
  return token;
}

bool mbarrier_try_wait_parity(std::uint64_t* bar, unsigned parity, const void* pc, const Where& at) {
  for (;;) {
    Mbarrier& m = barrier_at(bar, "mbarrier_try_wait_parity", at);
    atomic_access(bar, 8, pc);
    if ((m.phase & 1u) != (parity & 1u)) {  // the phase of that parity is the one before: complete
      races::acquire(m.completed);
      if (counters::Recorder* r = counters::active) counters::mbarrier_wait(*r);
      return true;
    }
    complete_copies(m);
    check_phase(m, bar, at);
    if ((m.phase & 1u) != (parity & 1u)) continue;
    m.sleepers.push_back(thread_in_block());
    sleep_on(bar, "mbarrier_try_wait_parity", at);
  }
}

void fence_proxy_async(const Where&) { races::proxy_fence(); }

void bulk_tensor_load(void* shared, const TensorMap* map, int x, int y, std::uint64_t* bar, const void* pc,
                      const Where& at) {
  const char* name = "cp.async.bulk.tensor (load)";
  check_map(map, name, at);
  check_box_destination(*map, shared, name, at);
  Mbarrier& m = barrier_at(bar, name, at);
  const unsigned size = element_bytes(map->type);
  Copy copy{{}, {}, pc};
  for_each_box_chunk(*map, static_cast<std::byte*>(shared), x, y, [&](std::byte* chunk, long long gx, long long gy,
                                                                     unsigned count) {
    copy.chunks.push_back(chunk);
    const std::size_t at_byte = copy.data.size();
    copy.data.resize(at_byte + 16, std::byte{0});  // past the tensor's edges: zeros
    if (gy < 0 || gy >= static_cast<long long>(map->dims[1])) return;
    for (unsigned e = 0; e < count; ++e) {
      if (gx + e < 0 || gx + e >= static_cast<long long>(map->dims[0])) continue;
      const auto* source = static_cast<const std::byte*>(map->global) +
                           static_cast<std::uint64_t>(gy) * map->row_stride_bytes + static_cast<std::uint64_t>(gx + e) * size;
      races::kernel_access(source, size, false, pc);
      if (counters::Recorder* r = counters::active) counters::bulk_bytes(*r, reinterpret_cast<std::uintptr_t>(source), size, false);
      std::memcpy(copy.data.data() + at_byte + e * size, source, size);
    }
  });
  for (std::byte* chunk : copy.chunks) {
    races::bulk_copy_issue(chunk, 16, pc);
    std::memset(chunk, 0xFF, 16);  // in flight: garbage until the mbarrier's wait
  }
  if (counters::Recorder* r = counters::active) counters::bulk_copy(*r, copy.data.size(), false);
  m.copies.push_back(std::move(copy));
  wake_all(m);
}

void bulk_tensor_store(const TensorMap* map, int x, int y, const void* shared, const void* pc, const Where& at) {
  const char* name = "cp.async.bulk.tensor (store)";
  check_map(map, name, at);
  check_box_destination(*map, shared, name, at);
  const unsigned size = element_bytes(map->type);
  std::vector<std::pair<std::uintptr_t, std::uintptr_t>> ranges;
  auto* box = static_cast<std::byte*>(const_cast<void*>(shared));
  for_each_box_chunk(*map, box, x, y, [&](std::byte* chunk, long long, long long, unsigned) {
    const auto p = reinterpret_cast<std::uintptr_t>(chunk);
    ranges.emplace_back(p, p + 16);
  });
  const int id = races::async_read(ranges, pc, "a TMA store (cp.async.bulk.tensor)", -1, true);
  ThreadBulk& mine = block().bulk[static_cast<std::size_t>(thread_in_block())];
  mine.reading.emplace_back(mine.committed, id);
  std::uint64_t bytes = 0;
  for_each_box_chunk(*map, box, x, y, [&](std::byte* chunk, long long gx, long long gy, unsigned count) {
    bytes += 16;
    if (gy < 0 || gy >= static_cast<long long>(map->dims[1])) return;
    for (unsigned e = 0; e < count; ++e) {
      if (gx + e < 0 || gx + e >= static_cast<long long>(map->dims[0])) continue;
      auto* target = static_cast<std::byte*>(const_cast<void*>(map->global)) +
                     static_cast<std::uint64_t>(gy) * map->row_stride_bytes + static_cast<std::uint64_t>(gx + e) * size;
      races::kernel_access(target, size, true, pc);
      if (counters::Recorder* r = counters::active) counters::bulk_bytes(*r, reinterpret_cast<std::uintptr_t>(target), size, true);
      std::memcpy(target, chunk + e * size, size);
    }
  });
  if (counters::Recorder* r = counters::active) counters::bulk_copy(*r, bytes, true);
}

void bulk_commit_group() { ++block().bulk[static_cast<std::size_t>(thread_in_block())].committed; }

void bulk_wait_group(int pending, const void*) {
  ThreadBulk& mine = block().bulk[static_cast<std::size_t>(thread_in_block())];
  std::erase_if(mine.reading, [&](const std::pair<int, int>& read) {
    if (read.first >= mine.committed - pending) return false;
    races::async_read_end(read.second);
    return true;
  });
}

void setmaxnreg(int registers, bool increase, const Where& at) {
  warpgroup_step(increase ? "setmaxnreg.inc" : "setmaxnreg.dec", static_cast<std::uint32_t>(registers), at,
                 [](Warpgroup&) {});
}

}  // namespace brrr::simt::detail

namespace brrr::simt {

void make_tensor_map_2d(TensorMap* map, TensorMapType type, const void* global, std::uint64_t dim0,
                        std::uint64_t dim1, std::uint64_t row_stride_bytes, std::uint32_t box0, std::uint32_t box1,
                        TensorMapSwizzle swizzle) {
  const unsigned size = element_bytes(type), span = tensor_map_swizzle_bytes(swizzle);
  const auto where = [&] {
    return "make_tensor_map_2d (cuTensorMapEncodeTiled) of a " + std::to_string(dim0) + " x " +
           std::to_string(dim1) + " tensor in boxes of " + std::to_string(box0) + " x " + std::to_string(box1) +
           ": ";
  };
  BRRR_CHECK(map && global && reinterpret_cast<std::uintptr_t>(global) % 16 == 0, where(),
             "the tensor's address must be 16-byte aligned");
  BRRR_CHECK(dim0 >= 1 && dim1 >= 1 && dim0 <= (1ull << 32) && dim1 <= (1ull << 32), where(),
             "each dimension is 1 to 2^32");
  BRRR_CHECK(row_stride_bytes % 16 == 0 && row_stride_bytes >= dim0 * size && row_stride_bytes < (1ull << 40), where(),
             "the row stride (", row_stride_bytes, " bytes) must be a multiple of 16 of at least a row's bytes");
  BRRR_CHECK(box0 >= 1 && box1 >= 1 && box0 <= 256 && box1 <= 256, where(), "each box dimension is 1 to 256");
  BRRR_CHECK(box0 * size % 16 == 0, where(), "a box row (", box0 * size, " bytes) must be a multiple of 16 bytes");
  BRRR_CHECK(span == 0 || box0 * size <= span, where(), "a box row of ", box0 * size, " bytes is wider than its ",
             span, "-byte swizzle");
  *map = TensorMap{};
  map->magic = kTensorMapMagic;
  map->type = type;
  map->swizzle = swizzle;
  map->box[0] = box0, map->box[1] = box1;
  map->global = global;
  map->dims[0] = dim0, map->dims[1] = dim1;
  map->row_stride_bytes = row_stride_bytes;
}

}  // namespace brrr::simt
