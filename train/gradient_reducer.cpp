// train/gradient_reducer.cpp: GradientReducer, the gradients summed over the ranks bucket by
// bucket while the backward still runs. Chapter 19 (data parallelism, "Overlap"). Read
// before: gradient_reducer.h, distributed.cpp (the collectives it builds on). Read next:
// trainer.cpp, whose steps call it.
#include "train/gradient_reducer.h"

#include <cstdint>
#include <unordered_map>

#include "brrr/brrr.h"
#include "brrr/profiler.h"
#include "kernels/backend.h"
#include "kernels/cuda/runtime.h"
#include "train/distributed.h"
#include "train/distributed_internal.h"

namespace brrr::train::dist {

using namespace internal;

// A bucket goes through Waiting (some gradient in it is not final yet) -> Sent -> Done. On the
// host path, Sent has two halves: the reduce-scatter (MPI_Ialltoallv) in flight, then, once it
// is seen done, this rank's slice summed in rank order and the allgather (MPI_Iallgatherv) in
// flight. "Seen done": OpenMPI moves a nonblocking collective on only inside MPI calls (no
// progress thread in Debian's build; with 2 ranks on 2 cores there is no core to spare for
// one anyway), so the hooks call MPI_Test after every autograd node.

struct GradientReducer::State {
  enum class Phase { Waiting, Scattering, Gathering, Done };
  struct Bucket {
    std::vector<std::size_t> members;  // indices into params, in the bucket's order
    std::int64_t elements = 0;
    std::size_t not_ready = 0;  // gradients of the bucket not yet final in this backward
    Phase phase = Phase::Waiting;
    std::vector<Tensor> grads;  // what is being summed, from when the bucket leaves
    Slices slices;                        // each rank's slice of the bucket
    std::vector<int> recv_counts, recv_displs;  // this rank's slice from each rank, end to end
    std::vector<std::byte> flat, received;  // host path: the packed bucket, the slices received
#if BRRR_WITH_MPI
    MPI_Request request = MPI_REQUEST_NULL;
#endif
    Tensor device_flat;  // NCCL path: the packed bucket, summed in place on the side stream
  };
  std::vector<Tensor> params;
  bool overlap = false;
  std::vector<Bucket> buckets;
  std::unordered_map<const TensorImpl*, std::size_t> bucket_of;  // a parameter's bucket
  std::size_t next_to_send = 0;    // buckets leave in order ...
  std::size_t next_to_finish = 0;  // ... and are moved on in order
  std::size_t sent_early = 0, sent_early_last_step = 0;  // buckets sent before finish()
  bool nccl_pending = false;

  void reset() {
    for (Bucket& b : buckets) b.not_ready = b.members.size(), b.phase = Phase::Waiting, b.grads.clear();
    next_to_send = next_to_finish = 0;
    sent_early_last_step = sent_early;
    sent_early = 0;
  }

  void send(Bucket& b) {
    for (std::size_t i : b.members) b.grads.push_back(params[i].grad());
    check_tensors("GradientReducer", b.grads);
    b.phase = Phase::Scattering;
#if BRRR_WITH_NCCL
    if (use_nccl(b.grads)) {
      // Packed on brrr's stream, after the kernels that made these gradients; summed on the
      // side stream, which waits for the packing but not for the rest of the backward.
      std::vector<Tensor> parts;
      for (const Tensor& g : b.grads) parts.push_back(g.reshape({g.numel()}));
      b.device_flat = ops::cat(parts);
      gpu::Runtime* rt = kernels::cuda_runtime();
      rt->wait_for(rt->side_stream(), rt->stream());
      const ncclDataType_t type = b.device_flat.dtype() == kFloat32 ? ncclFloat : ncclDouble;
      nccl_check(ncclAllReduce(b.device_flat.raw_data(), b.device_flat.raw_data(),
                               static_cast<std::size_t>(b.device_flat.numel()), type, ncclSum, nccl(),
                               static_cast<cudaStream_t>(rt->side_stream())),
                 "ncclAllReduce");
      b.phase = Phase::Done;  // in stream order: finish() makes brrr's stream wait for it
      nccl_pending = true;
      return;
    }
#endif
#if BRRR_WITH_MPI
    b.flat = pack(b.grads);
    const DType dtype = b.grads.front().dtype();
    const std::size_t elem = dtype_size(dtype);
    const int mine = b.slices.counts[my_rank];
    b.received.resize(static_cast<std::size_t>(mine) * ranks * elem);
    const MPI_Datatype type = dtype == kFloat32 ? MPI_FLOAT : MPI_DOUBLE;
    // The buffers and the count arrays must live until the collective is done: the bucket's.
    MPI_Ialltoallv(b.flat.data(), b.slices.counts.data(), b.slices.displs.data(), type, b.received.data(),
                   b.recv_counts.data(), b.recv_displs.data(), type, scatter_comm, &b.request);
    for (int r = 0; r < ranks; ++r)
      if (r != my_rank) sent += static_cast<std::uint64_t>(b.slices.counts[r]) * elem;
#else
    detail::fail("distributed: this brrr was built without MPI");
#endif
  }

#if BRRR_WITH_MPI
  template <class T>
  static void sum_received(Bucket& b) {
    const int mine = b.slices.counts[my_rank];
    const T* received = reinterpret_cast<const T*>(b.received.data());
    T* out = reinterpret_cast<T*>(b.flat.data()) + b.slices.displs[my_rank];
    for (int i = 0; i < mine; ++i) {
      T sum = received[i];
      for (int r = 1; r < ranks; ++r) sum += received[static_cast<std::size_t>(r) * mine + i];
      out[i] = sum;
    }
  }
#endif

  // Moves the buckets on, in order, as far as they go: without waiting (between autograd
  // nodes), or until all that have left are done (finish).
  void progress(bool wait) {
#if BRRR_WITH_MPI
    while (next_to_finish < next_to_send) {
      Bucket& b = buckets[next_to_finish];
      if (b.phase == Phase::Scattering || b.phase == Phase::Gathering) {
        int done = 0;
        if (wait) MPI_Wait(&b.request, MPI_STATUS_IGNORE), done = 1;
        else MPI_Test(&b.request, &done, MPI_STATUS_IGNORE);
        if (!done) return;
        const DType dtype = b.grads.front().dtype();
        if (b.phase == Phase::Scattering) {
          if (dtype == kFloat32) sum_received<float>(b);
          else sum_received<double>(b);
          const std::size_t elem = dtype_size(dtype);
          MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, b.flat.data(), b.slices.counts.data(),
                          b.slices.displs.data(), dtype == kFloat32 ? MPI_FLOAT : MPI_DOUBLE, gather_comm, &b.request);
          sent += static_cast<std::uint64_t>(b.slices.counts[my_rank]) * elem * static_cast<std::uint64_t>(ranks - 1);
          b.phase = Phase::Gathering;
          continue;
        }
        unpack(b.flat, b.grads, 0, b.grads.size());
        b.flat.clear(), b.received.clear();
        b.phase = Phase::Done;
      }
      ++next_to_finish;
    }
#else
    (void)wait;
#endif
  }

  // Sends every bucket, in order, whose gradients are all final.
  void send_ready() {
    while (next_to_send < buckets.size() && buckets[next_to_send].not_ready == 0) {
      send(buckets[next_to_send++]);
  }
  }
};

GradientReducer::GradientReducer(std::vector<Tensor> params, std::int64_t bucket_bytes, bool overlap)
    : state_(std::make_unique<State>()) {
  BRRR_CHECK(bucket_bytes > 0, "GradientReducer: bucket_bytes must be positive, got ", bucket_bytes);
  State& s = *state_;
  s.params = std::move(params);
  s.overlap = overlap;
  // Reverse order: the last parameters the forward used get their gradients first.
  std::int64_t bytes = 0;
  for (std::size_t k = s.params.size(); k-- > 0;) {
    const Tensor& p = s.params[k];
    if (s.buckets.empty() || bytes >= bucket_bytes) s.buckets.emplace_back(), bytes = 0;
    State::Bucket& b = s.buckets.back();
    b.members.push_back(k);
    b.elements += p.numel();
    bytes += p.numel() * static_cast<std::int64_t>(dtype_size(p.dtype()));
    BRRR_CHECK(b.elements < INT32_MAX, "GradientReducer: a bucket of ", b.elements,
               " elements is too large for MPI's int counts; use smaller buckets");
    s.bucket_of[p.impl()] = s.buckets.size() - 1;
  }
  for (State::Bucket& b : s.buckets) {
    b.slices = equal_slices(b.elements);
    const int mine = b.slices.counts[my_rank];
    for (int r = 0; r < ranks; ++r) b.recv_counts.push_back(mine), b.recv_displs.push_back(r * mine);
  }
  s.reset();
}

GradientReducer::~GradientReducer() = default;

autograd::BackwardHooks GradientReducer::hooks() {
  if (!state_->overlap || !collectives_active()) return {};
  State* s = state_.get();
  autograd::BackwardHooks h;
  h.grad_ready = [s](const Tensor& leaf) {
    const auto found = s->bucket_of.find(leaf.impl());
    if (found == s->bucket_of.end()) return;  // a leaf that is not one of the parameters
    BRRR_PROFILE("allreduce");
    Timed timed, in_backward{&communicating_in_backward};
    State::Bucket& b = s->buckets[found->second];
    BRRR_CHECK(b.not_ready > 0, "GradientReducer: a parameter's gradient was reported final twice in one backward");
    if (--b.not_ready == 0) s->send_ready();
    s->progress(false);
  };
  h.node_done = [s] {
    if (s->next_to_finish == s->next_to_send) return;  // nothing in flight
    Timed timed, in_backward{&communicating_in_backward};
    s->progress(false);
  };
  return h;
}

void GradientReducer::finish() {
  State& s = *state_;
  if (!collectives_active()) return;
  BRRR_PROFILE("allreduce");
  Timed timed;
  s.sent_early = s.next_to_send;
  while (s.next_to_send < s.buckets.size()) s.send(s.buckets[s.next_to_send++]);
  s.progress(true);
#if BRRR_WITH_NCCL
  if (s.nccl_pending) {
    // brrr's stream waits for the side stream's sums, then copies them into the gradients.
    gpu::Runtime* rt = kernels::cuda_runtime();
    rt->wait_for(rt->stream(), rt->side_stream());
    for (State::Bucket& b : s.buckets) {
      std::int64_t at = 0;
      for (const Tensor& g : b.grads) {
        Tensor(g).copy_(b.device_flat.narrow(0, at, g.numel()).reshape(g.shape()));
        at += g.numel();
      }
      b.device_flat = Tensor();
    }
    s.nccl_pending = false;
  }
#endif
  s.reset();
}

std::size_t GradientReducer::buckets() const { return state_->buckets.size(); }
std::size_t GradientReducer::buckets_sent_during_backward() const { return state_->sent_early_last_step; }

}  // namespace brrr::train::dist
