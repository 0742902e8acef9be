// train/distributed.cpp: ranks and collectives over MPI (CPU tensors) and NCCL (CUDA tensors).
// Chapter 19 (data parallelism). Read before: distributed.h. Read next: trainer.cpp, where the
// training loop calls these.
//
// The sum in rank order. MPI_Allreduce may add the ranks' values in any grouping (OpenMPI picks
// an algorithm by message size), so its float sums can differ in the last bit from one rank
// count or message size to another. brrr instead takes the ring algorithm's two halves apart:
//   reduce-scatter: the buffer is cut into N slices; rank r receives slice r from every rank
//                   (one MPI_Alltoallv) and adds them in rank order, ((x0 + x1) + x2) + ...;
//   allgather:      every rank sends its summed slice to all the others (MPI_Allgatherv).
// Each rank sends and receives (N - 1) / N of the buffer in each half, as in a ring, and the
// additions happen in an order fixed by the code, not by the library.
#include "train/distributed.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <unordered_map>

#include "brrr/brrr.h"
#include "brrr/profiler.h"
#include "kernels/backend.h"
#include "kernels/cuda/runtime.h"
#include "train/distributed_internal.h"

namespace brrr::train::dist {

// ---------------------------------------------------------------------------------------------
// What gradient_reducer.cpp shares (distributed_internal.h)

namespace internal {
int my_rank = 0, ranks = 1;
double communicating = 0;
double communicating_in_backward = 0;
std::uint64_t sent = 0;

void check_tensors(const char* what, const std::vector<Tensor>& tensors) {
  for (const Tensor& t : tensors) {
    BRRR_CHECK(t.defined(), what, ": a tensor is undefined (a parameter without a gradient?)");
    BRRR_CHECK(t.is_contiguous(), what, ": tensors must be contiguous, got one of shape ", shape_str(t.shape()));
    BRRR_CHECK(t.dtype() == kFloat32 || t.dtype() == kFloat64, what, ": float32 or float64 tensors only, got ",
               dtype_name(t.dtype()));
    BRRR_CHECK(t.dtype() == tensors.front().dtype() && t.device() == tensors.front().device(), what,
               ": all tensors must have one dtype and one device");
  }
}

Slices equal_slices(std::int64_t n) {
  Slices s;
  std::int64_t at = 0;
  for (int r = 0; r < ranks; ++r) {
    const std::int64_t c = n / ranks + (r < n % ranks ? 1 : 0);
    s.counts.push_back(static_cast<int>(c));
    s.displs.push_back(static_cast<int>(at));
    at += c;
  }
  return s;
}

#if BRRR_WITH_MPI
// Host copies of the tensors, end to end, and back (CUDA tensors are copied through the host
// when there is no NCCL, which is also what the emulator does).
std::vector<std::byte> pack(const std::vector<Tensor>& tensors) {
  std::size_t bytes = 0;
  for (const Tensor& t : tensors) bytes += static_cast<std::size_t>(t.numel()) * dtype_size(t.dtype());
  std::vector<std::byte> flat(bytes);
  std::size_t at = 0;
  for (const Tensor& t : tensors) {
    const Tensor host = t.to(kCPU);
    const std::size_t b = static_cast<std::size_t>(t.numel()) * dtype_size(t.dtype());
    std::memcpy(flat.data() + at, host.raw_data(), b);
    at += b;
  }
  return flat;
}
void unpack(const std::vector<std::byte>& flat, const std::vector<Tensor>& tensors, std::size_t from, std::size_t to) {
  std::size_t at = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    const std::size_t b = static_cast<std::size_t>(t.numel()) * dtype_size(t.dtype());
    if (i >= from && i < to) {
      if (t.device().is_cpu()) {
        std::memcpy(t.raw_data(), flat.data() + at, b);
      } else {
        Tensor host = empty(t.shape(), TensorOptions().dtype(t.dtype()));
        std::memcpy(host.raw_data(), flat.data() + at, b);
        Tensor(t).copy_(host);
      }
    }
    at += b;
  }
}

// GradientReducer's two halves travel on communicators of their own: MPI matches the
// collectives of a communicator by the order in which the ranks start them, and a bucket's
// allgather starts when its reduce-scatter is seen to be done, a moment that differs from
// rank to rank. On one communicator each, both halves go in bucket order on every rank.
MPI_Comm scatter_comm = MPI_COMM_NULL, gather_comm = MPI_COMM_NULL;
#endif

#if BRRR_WITH_NCCL
// NCCL: one communicator for the run, made from a unique id that rank 0 draws and MPI
// broadcasts. NCCL's kernels run on brrr's stream, after the backward kernels that made the
// gradients and before the optimizer's, so the host never waits for them.
ncclComm_t nccl_comm = nullptr;

void nccl_check(ncclResult_t r, const char* what) {
  BRRR_CHECK(r == ncclSuccess, what, ": ", ncclGetErrorString(r));
}

ncclComm_t nccl() {
  if (nccl_comm) return nccl_comm;
  ncclUniqueId id;
  if (my_rank == 0) nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId");
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
  nccl_check(ncclCommInitRank(&nccl_comm, ranks, id, my_rank), "ncclCommInitRank");
  return nccl_comm;
}

bool use_nccl(const std::vector<Tensor>& tensors) {
  return !tensors.empty() && tensors.front().device().is_cuda() && !cuda::is_emulated();
}
#endif
}  // namespace internal

using namespace internal;

namespace {
bool initialized = false;
bool forced = false;  // BRRR_FORCE_COLLECTIVES=1: the collectives' path with one rank too
double waiting = 0;        // seconds, in wait_for_all

// How many ranks mpirun started, from the environment it gives each one (OpenMPI, then the
// PMI variables of MPICH and Slurm); 1 without mpirun.
int launched_ranks() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (const char* v = std::getenv(name)) return std::max(1, std::atoi(v));
  return 1;
}

Slices owned_slices(const std::vector<Tensor>& tensors, const std::vector<std::size_t>& first) {
  BRRR_CHECK(first.size() == static_cast<std::size_t>(ranks) + 1 && first.front() == 0 && first.back() == tensors.size(),
             "ZeRO: the split must have world_size + 1 entries from 0 to the number of tensors");
  Slices s;
  std::int64_t at = 0;
  for (int r = 0; r < ranks; ++r) {
    std::int64_t c = 0;
    for (std::size_t i = first[r]; i < first[r + 1]; ++i) c += tensors[i].numel();
    s.counts.push_back(static_cast<int>(c));
    s.displs.push_back(static_cast<int>(at));
    at += c;
  }
  return s;
}

#if BRRR_WITH_MPI
template <class T> MPI_Datatype mpi_type() { return std::is_same_v<T, float> ? MPI_FLOAT : MPI_DOUBLE; }

// Reduce-scatter over MPI: rank r ends with slice r summed in rank order (in place in buf).
template <class T>
void reduce_scatter_host(T* buf, const Slices& s) {
  const int mine = s.counts[my_rank];
  std::vector<T> received(static_cast<std::size_t>(mine) * ranks);
  std::vector<int> recv_counts(ranks, mine), recv_displs(ranks);
  for (int r = 0; r < ranks; ++r) recv_displs[r] = r * mine;
  MPI_Alltoallv(buf, s.counts.data(), s.displs.data(), mpi_type<T>(), received.data(), recv_counts.data(),
                recv_displs.data(), mpi_type<T>(), MPI_COMM_WORLD);
  T* out = buf + s.displs[my_rank];
  for (int i = 0; i < mine; ++i) {
    T sum = received[i];
    for (int r = 1; r < ranks; ++r) sum += received[static_cast<std::size_t>(r) * mine + i];
    out[i] = sum;
  }
  for (int r = 0; r < ranks; ++r)
    if (r != my_rank) sent += static_cast<std::uint64_t>(s.counts[r]) * sizeof(T);
}

template <class T>
void allgather_host(T* buf, const Slices& s) {
  MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, s.counts.data(), s.displs.data(), mpi_type<T>(),
                 MPI_COMM_WORLD);
  sent += static_cast<std::uint64_t>(s.counts[my_rank]) * sizeof(T) * static_cast<std::uint64_t>(ranks - 1);
}

// The two halves on a packed host buffer of float or double.
void host_collective(std::vector<std::byte>& flat, DType dtype, const Slices& s, bool reduce, bool gather) {
  if (dtype == kFloat32) {
    if (reduce) reduce_scatter_host(reinterpret_cast<float*>(flat.data()), s);
    if (gather) allgather_host(reinterpret_cast<float*>(flat.data()), s);
  } else {
    if (reduce) reduce_scatter_host(reinterpret_cast<double*>(flat.data()), s);
    if (gather) allgather_host(reinterpret_cast<double*>(flat.data()), s);
  }
}
#endif

#if BRRR_WITH_NCCL
// The NCCL form of both halves on a packed device buffer (rank-order sums are not promised by
// NCCL; its ring is fixed for a given number of ranks and topology, so runs still repeat).
void device_collective(const std::vector<Tensor>& tensors, const Slices& s, bool reduce, bool gather, bool owned,
                       std::size_t from, std::size_t to) {
  std::vector<Tensor> flat_parts;
  for (const Tensor& t : tensors) flat_parts.push_back(t.reshape({t.numel()}));
  Tensor flat = ops::cat(flat_parts);
  const auto stream = static_cast<cudaStream_t>(kernels::cuda_runtime()->stream());
  const ncclDataType_t type = flat.dtype() == kFloat32 ? ncclFloat : ncclDouble;
  const std::size_t elem = dtype_size(flat.dtype());
  auto* base = static_cast<char*>(flat.raw_data());
  if (reduce && gather && !owned) {
    nccl_check(ncclAllReduce(base, base, static_cast<std::size_t>(flat.numel()), type, ncclSum, nccl(), stream),
               "ncclAllReduce");
  } else {
    nccl_check(ncclGroupStart(), "ncclGroupStart");
    for (int r = 0; r < ranks; ++r) {
      char* slice = base + static_cast<std::size_t>(s.displs[r]) * elem;
      const auto n = static_cast<std::size_t>(s.counts[r]);
      if (reduce) nccl_check(ncclReduce(slice, slice, n, type, ncclSum, r, nccl(), stream), "ncclReduce");
      if (gather) nccl_check(ncclBroadcast(slice, slice, n, type, r, nccl(), stream), "ncclBroadcast");
    }
    nccl_check(ncclGroupEnd(), "ncclGroupEnd");
  }
  std::int64_t at = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (i >= from && i < to) Tensor(t).copy_(flat.narrow(0, at, t.numel()).reshape(t.shape()));
    at += t.numel();
  }
}
#endif

// One bucket, or the whole ZeRO split: the chosen halves on the tensors [from, to) get the
// result (all of them for an allreduce or an allgather).
void collective(const std::vector<Tensor>& tensors, const Slices& s, bool reduce, bool gather, bool owned,
                std::size_t from, std::size_t to) {
#if BRRR_WITH_NCCL
  if (use_nccl(tensors)) return device_collective(tensors, s, reduce, gather, owned, from, to);
#endif
#if BRRR_WITH_MPI
  std::vector<std::byte> flat = pack(tensors);
  host_collective(flat, tensors.front().dtype(), s, reduce, gather);
  unpack(flat, tensors, from, to);
#else
  (void)tensors, (void)s, (void)reduce, (void)gather, (void)owned, (void)from, (void)to;
  detail::fail("distributed: this brrr was built without MPI");
#endif
}
}  // namespace

bool built_with_mpi() {
#if BRRR_WITH_MPI
  return true;
#else
  return false;
#endif
}
bool built_with_nccl() {
#if BRRR_WITH_NCCL
  return true;
#else
  return false;
#endif
}

int init() {
  if (initialized) return ranks;
  initialized = true;
  const int launched = launched_ranks();
  const char* force = std::getenv("BRRR_FORCE_COLLECTIVES");
  forced = force && std::string(force) == "1";
  if (launched <= 1 && !forced) return ranks;  // no mpirun, or one rank: no MPI at all
#if BRRR_WITH_MPI
  int already = 0;
  MPI_Initialized(&already);
  if (!already) MPI_Init(nullptr, nullptr);
  MPI_Comm_rank(MPI_COMM_WORLD, &my_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  MPI_Comm_dup(MPI_COMM_WORLD, &scatter_comm);
  MPI_Comm_dup(MPI_COMM_WORLD, &gather_comm);
  // MPI_Finalize when the program ends normally (a failing rank calls abort_all instead).
  std::atexit([] {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    MPI_Comm_free(&scatter_comm);
    MPI_Comm_free(&gather_comm);
    MPI_Finalize();
  });
#if BRRR_WITH_NCCL
  // One GPU per rank on a node: rank k of a node uses that node's GPU k.
  if (const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK")) {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0) cudaSetDevice(std::atoi(local) % devices);
  }
#endif
  if (my_rank != 0 && !std::freopen("/dev/null", "w", stdout))
    std::fprintf(stderr, "rank %d: could not silence stdout\n", my_rank);
  return ranks;
#else
  if (launched <= 1) detail::fail("BRRR_FORCE_COLLECTIVES=1, but this brrr was built without MPI");
  detail::fail("mpirun started ", launched, " ranks, but this brrr was built without MPI; install Debian's "
               "libopenmpi-dev (scripts/setup.sh does) and build again, or run without mpirun");
#endif
}

int rank() { return my_rank; }
int world_size() { return ranks; }
bool collectives_active() { return ranks > 1 || forced; }

void abort_all(const std::string& message) {
  std::fprintf(stderr, "rank %d of %d: error: %s\n", my_rank, ranks, message.c_str());
  std::fflush(stderr);
  std::fflush(stdout);
#if BRRR_WITH_MPI
  int up = 0;
  MPI_Initialized(&up);
  if (up) MPI_Abort(MPI_COMM_WORLD, 1);
#endif
  std::_Exit(1);
}

std::vector<std::string> allgather(const std::string& text) {
  if (ranks == 1) return {text};
#if BRRR_WITH_MPI
  const int length = static_cast<int>(text.size());
  std::vector<int> lengths(ranks), displs(ranks);
  MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, MPI_COMM_WORLD);
  int total = 0;
  for (int r = 0; r < ranks; ++r) displs[r] = total, total += lengths[r];
  std::string all(static_cast<std::size_t>(total), '\0');
  MPI_Allgatherv(text.data(), length, MPI_CHAR, all.data(), lengths.data(), displs.data(), MPI_CHAR, MPI_COMM_WORLD);
  std::vector<std::string> out;
  for (int r = 0; r < ranks; ++r) out.push_back(all.substr(displs[r], lengths[r]));
  return out;
#else
  return {text};
#endif
}

std::vector<double> sum_over_ranks(const std::vector<double>& values) {
  if (ranks == 1) return values;
#if BRRR_WITH_MPI
  Timed timed;
  const int n = static_cast<int>(values.size());
  std::vector<double> all(values.size() * static_cast<std::size_t>(ranks));
  MPI_Allgather(values.data(), n, MPI_DOUBLE, all.data(), n, MPI_DOUBLE, MPI_COMM_WORLD);
  std::vector<double> sum(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    double s = all[i];
    for (int r = 1; r < ranks; ++r) s += all[static_cast<std::size_t>(r) * values.size() + i];
    sum[i] = s;
  }
  return sum;
#else
  return values;
#endif
}

void barrier() {
#if BRRR_WITH_MPI
  if (ranks > 1) MPI_Barrier(MPI_COMM_WORLD);
#endif
}

void wait_for_all() {
#if BRRR_WITH_MPI
  if (ranks == 1) return;
  Timed timed{&waiting};
  MPI_Barrier(MPI_COMM_WORLD);
#endif
}

void allreduce_sum(const std::vector<Tensor>& tensors, std::int64_t bucket_bytes) {
  if (ranks == 1 || tensors.empty()) return;
  check_tensors("allreduce_sum", tensors);
  BRRR_PROFILE("allreduce");
  Timed timed;
  std::vector<Tensor> bucket;
  std::int64_t bytes = 0;
  auto flush = [&] {
    std::int64_t n = 0;
    for (const Tensor& t : bucket) n += t.numel();
    BRRR_CHECK(n < INT32_MAX, "allreduce_sum: a bucket of ", n, " elements is too large for MPI's int counts");
    collective(bucket, equal_slices(n), true, true, false, 0, bucket.size());
    bucket.clear();
    bytes = 0;
  };
  for (const Tensor& t : tensors) {
    bucket.push_back(t);
    bytes += t.numel() * static_cast<std::int64_t>(dtype_size(t.dtype()));
    if (bytes >= bucket_bytes) flush();
  }
  if (!bucket.empty()) flush();
}

void reduce_scatter_sum(const std::vector<Tensor>& tensors, const std::vector<std::size_t>& first) {
  if (ranks == 1 || tensors.empty()) return;
  check_tensors("reduce_scatter_sum", tensors);
  BRRR_PROFILE("reduce_scatter");
  Timed timed;
  collective(tensors, owned_slices(tensors, first), true, false, true, first[my_rank], first[my_rank + 1]);
}

void allgather_owned(const std::vector<Tensor>& tensors, const std::vector<std::size_t>& first) {
  if (ranks == 1 || tensors.empty()) return;
  check_tensors("allgather_owned", tensors);
  BRRR_PROFILE("allgather");
  Timed timed;
  collective(tensors, owned_slices(tensors, first), false, true, true, 0, tensors.size());
}

std::vector<std::size_t> balanced_split(const std::vector<Tensor>& tensors) {
  std::int64_t total = 0;
  for (const Tensor& t : tensors) total += t.numel();
  // Rank r's run ends at the tensor boundary nearest to (r + 1) / N of the elements (and the
  // last rank's at the end): whole tensors, so the shares are as even as the tensors allow.
  std::vector<std::size_t> first{0};
  std::int64_t at = 0;
  std::size_t i = 0;
  for (int r = 0; r < ranks - 1; ++r) {
    const std::int64_t goal = total * (r + 1) / ranks;
    while (i < tensors.size() && at + tensors[i].numel() <= goal) at += tensors[i++].numel();
    if (i < tensors.size() && goal - at > at + tensors[i].numel() - goal) at += tensors[i++].numel();
    first.push_back(i);
  }
  first.push_back(tensors.size());
  return first;
}

double seconds_communicating() { return communicating; }
double seconds_communicating_in_backward() { return communicating_in_backward; }
double seconds_waiting() { return waiting; }
std::uint64_t bytes_sent() { return sent; }

}  // namespace brrr::train::dist
