// brrr/tensor.h: Tensor, a cheap handle to a shaped, strided view of a Storage.
// Chapter 01 (tensors and storage). Read before: storage.h. Read next: ops.h, autograd.h.
//
// A Tensor is a shared pointer to a TensorImpl: copying a Tensor copies the handle, not the
// data (as in PyTorch). The element at index (i0, i1, ...) lives at
//   storage.data + (offset + i0*strides[0] + i1*strides[1] + ...) * dtype_size
// so reshape, transpose, permute, narrow and expand only make a new TensorImpl with other
// shape/strides/offset over the same Storage. contiguous() copies when the layout is not
// row-major and dense.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "brrr/dtype.h"
#include "brrr/error.h"
#include "brrr/storage.h"

namespace brrr {

namespace autograd {
struct Node;
}
class Generator;
struct TensorImpl;

// Options for creating tensors, with fluent setters as in libtorch:
//   brrr::zeros({2, 3}, brrr::TensorOptions().dtype(brrr::kFloat64).requires_grad(true))
struct TensorOptions {
  DType dtype_ = kFloat32;
  Device device_ = Device::cpu();
  bool requires_grad_ = false;

  TensorOptions() = default;
  TensorOptions(DType d) : dtype_(d) {}  // NOLINT: brrr::zeros({2}, brrr::kInt64) reads well
  TensorOptions& dtype(DType d) { dtype_ = d; return *this; }
  TensorOptions& device(Device d) { device_ = d; return *this; }
  TensorOptions& requires_grad(bool r = true) { requires_grad_ = r; return *this; }
};

class Tensor {
 public:
  Tensor() = default;  // an undefined tensor (no data); defined() is false
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // --- what it is ------------------------------------------------------------------------
  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const;
  std::int64_t size(int dim) const;  // negative dims count from the end
  int dim() const;
  std::int64_t numel() const;
  const Shape& strides() const;
  std::int64_t stride(int dim) const;
  std::int64_t offset() const;  // in elements, into the storage
  DType dtype() const;
  Device device() const;
  bool is_contiguous() const;
  const std::shared_ptr<Storage>& storage() const;
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }

  // Pointer to the first element; T must match the dtype (checked).
  template <class T> T* data_ptr() const;
  void* raw_data() const;  // untyped pointer to the first element

  // --- element access (tests and debugging: slow, CPU copies made as needed) ----------------
  template <class T = double> T item() const;                          // one-element tensor
  template <class T = double> T at(std::initializer_list<std::int64_t> index) const;
  template <class T> std::vector<T> to_vector() const;                 // row-major copy

  // --- views: share storage (no copy) ---------------------------------------------------
  Tensor view(Shape shape) const;     // needs a compatible layout; -1 infers one size
  Tensor reshape(Shape shape) const;  // a view when possible, else a contiguous copy
  Tensor flatten(int start_dim = 0, int end_dim = -1) const;
  Tensor transpose(int dim0, int dim1) const;
  Tensor permute(std::vector<int> dims) const;
  Tensor narrow(int dim, std::int64_t start, std::int64_t length) const;
  Tensor slice(int dim, std::int64_t start, std::int64_t end) const;  // [start, end)
  Tensor select(int dim, std::int64_t index) const;                    // drops dim
  Tensor expand(Shape shape) const;  // broadcast size-1 dims (stride 0); -1 keeps a size
  Tensor squeeze(int dim) const;
  Tensor squeeze() const;  // all size-1 dims
  Tensor unsqueeze(int dim) const;
  std::vector<Tensor> split(std::int64_t split_size, int dim = 0) const;
  Tensor contiguous() const;  // this tensor when already contiguous, else a copy
  Tensor t() const { return transpose(0, 1); }

  // --- copies and conversion --------------------------------------------------------------
  Tensor clone() const;
  Tensor to(DType dtype) const;
  Tensor to(Device device) const;

  // --- autograd ---------------------------------------------------------------------------
  bool requires_grad() const;
  Tensor& requires_grad_(bool on = true);  // only on leaves
  bool is_leaf() const;
  Tensor grad() const;  // undefined until backward() reaches this leaf
  void set_grad(const Tensor& grad) const;
  const std::shared_ptr<autograd::Node>& grad_fn() const;
  // Backpropagate from this tensor. A scalar uses grad = 1; otherwise pass grad.
  void backward(const Tensor& grad = Tensor(), bool retain_graph = false) const;
  Tensor detach() const;  // same storage, cut from the graph

  // --- ops as methods (each forwards to brrr::ops) ----------------------------------------
  Tensor sum() const;
  Tensor sum(std::vector<int> dims, bool keepdim = false) const;
  Tensor mean() const;
  Tensor mean(std::vector<int> dims, bool keepdim = false) const;
  Tensor matmul(const Tensor& other) const;
  Tensor exp() const;
  Tensor log() const;
  Tensor pow(double exponent) const;

  // In place, without autograd (optimizers, initialisation). Throws on a tensor that
  // requires grad while grad mode is on, as PyTorch does for leaves.
  Tensor& fill_(double value);
  Tensor& copy_(const Tensor& source);  // shapes must match (or broadcast)
  Tensor& add_(const Tensor& other, double alpha = 1.0);
  Tensor& mul_(double factor);
  Tensor& zero_() { return fill_(0.0); }
  // Fill with random numbers in place, with no temporary the size of the tensor (so building
  // a large model never holds its weights twice), as torch.nn.init does.
  Tensor& normal_(double mean, double std, Generator& gen);
  Tensor& uniform_(double low, double high, Generator& gen);

  std::string str() const;  // printed as PyTorch prints: tensor([[1., 2.], ...])

 private:
  std::shared_ptr<TensorImpl> impl_;
};

// What a Tensor points to. Plain data; the rules live in Tensor's methods and the ops.
struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape shape;
  Shape strides;
  std::int64_t offset = 0;
  DType dtype = kFloat32;

  // autograd: a leaf has requires_grad and no grad_fn; an op's output has a grad_fn.
  bool requires_grad = false;
  Tensor grad;
  std::shared_ptr<autograd::Node> grad_fn;
};

std::ostream& operator<<(std::ostream& out, const Tensor& tensor);

// --- creation -------------------------------------------------------------------------------
Tensor empty(Shape shape, TensorOptions options = {});
Tensor zeros(Shape shape, TensorOptions options = {});
Tensor ones(Shape shape, TensorOptions options = {});
Tensor full(Shape shape, double value, TensorOptions options = {});
Tensor zeros_like(const Tensor& like);
Tensor ones_like(const Tensor& like);
Tensor empty_like(const Tensor& like);
Tensor arange(double start, double end, double step = 1.0, TensorOptions options = {});
Tensor arange(std::int64_t end, TensorOptions options = {});
Tensor scalar_tensor(double value, TensorOptions options = {});
// A tensor holding values, given its shape (numel must match) and the dtype to store.
Tensor from_vector(const std::vector<double>& values, Shape shape, TensorOptions options = {});
Tensor from_vector(const std::vector<float>& values, Shape shape, TensorOptions options = {});
Tensor from_vector(const std::vector<std::int64_t>& values, Shape shape, TensorOptions options = {});
Tensor from_vector(const std::vector<std::int32_t>& values, Shape shape, TensorOptions options = {});
// 1-D convenience: brrr::tensor({1.0, 2.0, 3.0})
Tensor tensor(std::initializer_list<double> values, TensorOptions options = {});
// Random numbers from a Generator (see generator.h): same seed, same numbers, anywhere.
Tensor rand(Shape shape, Generator& gen, TensorOptions options = {});   // uniform [0, 1)
Tensor randn(Shape shape, Generator& gen, TensorOptions options = {});  // normal(0, 1)
Tensor randint(std::int64_t low, std::int64_t high, Shape shape, Generator& gen,
               TensorOptions options = TensorOptions(kInt64));

// --- helpers used across the framework --------------------------------------------------------
Shape contiguous_strides(const Shape& shape);
int normalize_dim(int dim, int ndim, const char* op);  // -1 -> ndim-1, with a range check

// --- template definitions ---------------------------------------------------------------------
template <class T>
T* Tensor::data_ptr() const {
  BRRR_CHECK(defined(), "data_ptr: tensor is undefined");
  BRRR_CHECK(dtype_of<T>() == impl_->dtype, "data_ptr: tensor has dtype ", dtype_name(impl_->dtype),
             ", asked for ", dtype_name(dtype_of<T>()));
  return static_cast<T*>(raw_data());
}

}  // namespace brrr
