// framework/src/tensor.cpp: Tensor's methods: metadata, views (with their backward), copies,
// creation and printing.
// Chapter 01 (tensors and storage). Read next: ops_elementwise.cpp (chapter 02).
#include "brrr/tensor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iomanip>
#include <numeric>
#include <ostream>
#include <sstream>

#include "brrr/autograd.h"
#include "brrr/bfloat16.h"
#include "brrr/generator.h"
#include "brrr/ops.h"
#include "brrr/profiler.h"
#include "dispatch.h"
#include "kernels/cuda/runtime.h"

namespace brrr {

using autograd::TensorList;

// ---------------------------------------------------------------------------------------------
// helpers

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  std::int64_t s = 1;
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    strides[d] = s;
    s *= std::max<std::int64_t>(shape[d], 1);
  }
  return strides;
}

int normalize_dim(int dim, int ndim, const char* op) {
  const int lo = -std::max(ndim, 1), hi = std::max(ndim, 1) - 1;
  BRRR_CHECK(dim >= lo && dim <= hi, op, ": dim ", dim, " is out of range for a tensor of ", ndim,
             " dims (expected ", lo, " to ", hi, ")");
  return dim < 0 ? dim + std::max(ndim, 1) : dim;
}


namespace {

Tensor make_view(const Tensor& base, Shape shape, Shape strides, std::int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = base.storage();
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->dtype = base.dtype();
  return Tensor(std::move(impl));
}

// Resolves one -1 in a requested shape against numel.
Shape infer_shape(Shape shape, std::int64_t numel, const char* op, const Shape& from) {
  int infer = -1;
  std::int64_t known = 1;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == -1) {
      BRRR_CHECK(infer < 0, op, ": only one dimension can be -1, got ", shape_str(shape));
      infer = static_cast<int>(d);
    } else {
      BRRR_CHECK(shape[d] >= 0, op, ": invalid size ", shape[d], " in ", shape_str(shape));
      known *= shape[d];
    }
  }
  if (infer >= 0) {
    BRRR_CHECK(known != 0 && numel % known == 0, op, ": cannot reshape ", shape_str(from), " (", numel,
               " elements) into ", shape_str(shape));
    shape[infer] = numel / known;
  }
  BRRR_CHECK(shape_numel(shape) == numel, op, ": cannot reshape ", shape_str(from), " (", numel, " elements) into ",
             shape_str(shape));
  return shape;
}

// A view with new shape and strides over the same elements (squeeze and unsqueeze); its
// backward reshapes the gradient back.
Tensor restride(const Tensor& t, Shape shape, Shape strides) {
  Tensor out = make_view(t, std::move(shape), std::move(strides), t.offset());
  if (autograd::needs_grad({&t}))
    autograd::record("view", {t}, out, [in_shape = t.shape()](const Tensor& g) { return TensorList{g.reshape(in_shape)}; });
  return out;
}

void check_in_place(const Tensor& t, const char* op) {
  detail::check_defined(op, t);
  BRRR_CHECK(!(t.requires_grad() && autograd::grad_mode_enabled()), op,
             ": a tensor that requires grad cannot be modified in place while grad mode is on (use NoGradGuard)");
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// metadata

const Shape& Tensor::shape() const { detail::check_defined("shape", *this); return impl_->shape; }
int Tensor::dim() const { return static_cast<int>(shape().size()); }
std::int64_t Tensor::size(int d) const { return shape()[normalize_dim(d, dim(), "size")]; }
std::int64_t Tensor::numel() const {
  std::int64_t n = 1;
  for (std::int64_t s : shape()) n *= s;
  return n;
}
const Shape& Tensor::strides() const { detail::check_defined("strides", *this); return impl_->strides; }
std::int64_t Tensor::stride(int d) const { return strides()[normalize_dim(d, dim(), "stride")]; }
std::int64_t Tensor::offset() const { return impl_->offset; }
DType Tensor::dtype() const { detail::check_defined("dtype", *this); return impl_->dtype; }
Device Tensor::device() const { detail::check_defined("device", *this); return impl_->storage->device(); }
const std::shared_ptr<Storage>& Tensor::storage() const { detail::check_defined("storage", *this); return impl_->storage; }
void* Tensor::raw_data() const {
  return static_cast<char*>(storage()->data()) + impl_->offset * static_cast<std::int64_t>(dtype_size(impl_->dtype));
}

bool Tensor::is_contiguous() const {
  std::int64_t expected = 1;
  for (int d = dim() - 1; d >= 0; --d) {
    if (impl_->shape[d] == 1) continue;
    if (impl_->strides[d] != expected) return false;
    expected *= impl_->shape[d];
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// element access

namespace {
template <class T>
T read_as(const void* p, DType dtype) {
  switch (dtype) {
    case DType::Float32: return static_cast<T>(*static_cast<const float*>(p));
    case DType::Float64: return static_cast<T>(*static_cast<const double*>(p));
    case DType::Int32: return static_cast<T>(*static_cast<const std::int32_t*>(p));
    case DType::Int64: return static_cast<T>(*static_cast<const std::int64_t*>(p));
    case DType::BFloat16: return static_cast<T>(static_cast<float>(*static_cast<const bf16*>(p)));
    default: detail::fail("cannot read elements of dtype ", dtype_name(dtype));
  }
}
}  // namespace

template <class T>
T Tensor::item() const {
  BRRR_CHECK(numel() == 1, "item: expected a tensor with one element, got shape ", shape_str(shape()));
  const Tensor cpu = to(kCPU);
  return read_as<T>(cpu.raw_data(), cpu.dtype());
}

template <class T>
T Tensor::at(std::initializer_list<std::int64_t> index) const {
  BRRR_CHECK(static_cast<int>(index.size()) == dim(), "at: got ", index.size(), " indices for a tensor of shape ",
             shape_str(shape()));
  const Tensor cpu = to(kCPU);
  std::int64_t off = 0;
  int d = 0;
  for (std::int64_t i : index) {
    BRRR_CHECK(i >= -shape()[d] && i < shape()[d], "at: index ", i, " is out of range for dim ", d, " of size ",
               shape()[d], " (shape ", shape_str(shape()), ")");
    off += (i < 0 ? i + shape()[d] : i) * strides()[d];
    ++d;
  }
  return read_as<T>(static_cast<const char*>(cpu.raw_data()) + off * static_cast<std::int64_t>(dtype_size(dtype())),
                    dtype());
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  const Tensor c = to(kCPU).contiguous();
  std::vector<T> out(static_cast<std::size_t>(c.numel()));
  const char* p = static_cast<const char*>(c.raw_data());
  const std::size_t es = dtype_size(c.dtype());
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = read_as<T>(p + i * es, c.dtype());
  return out;
}

template double Tensor::item<double>() const;
template float Tensor::item<float>() const;
template std::int64_t Tensor::item<std::int64_t>() const;
template std::int32_t Tensor::item<std::int32_t>() const;
template double Tensor::at<double>(std::initializer_list<std::int64_t>) const;
template float Tensor::at<float>(std::initializer_list<std::int64_t>) const;
template std::int64_t Tensor::at<std::int64_t>(std::initializer_list<std::int64_t>) const;
template std::int32_t Tensor::at<std::int32_t>(std::initializer_list<std::int64_t>) const;
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<std::int64_t> Tensor::to_vector<std::int64_t>() const;
template std::vector<std::int32_t> Tensor::to_vector<std::int32_t>() const;

// ---------------------------------------------------------------------------------------------
// views: each records its backward, which undoes the view on the gradient

namespace {
// Strides that let `shape` view the same elements as (old_shape, old_strides), or false when
// no such strides exist (then a copy is needed). PyTorch's rule: walk the old dims from the
// right in chunks that are contiguous with each other; each chunk must split exactly into
// new dims.
bool view_strides(const Shape& old_shape, const Shape& old_strides, const Shape& shape, Shape& strides) {
  strides.assign(shape.size(), 0);
  if (shape_numel(old_shape) == 0 || old_shape.empty()) {
    strides = contiguous_strides(shape);
    return true;
  }
  int view_d = static_cast<int>(shape.size()) - 1;
  std::int64_t chunk_base_stride = old_strides.back(), tensor_numel = 1, view_numel = 1;
  for (int d = static_cast<int>(old_shape.size()) - 1; d >= 0; --d) {
    tensor_numel *= old_shape[d];
    if (d == 0 || (old_shape[d - 1] != 1 && old_strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
        strides[view_d] = view_numel * chunk_base_stride;
        view_numel *= shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return false;
      if (d > 0) {
        chunk_base_stride = old_strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  return view_d == -1;
}
}  // namespace

Tensor Tensor::view(Shape new_shape) const {
  new_shape = infer_shape(std::move(new_shape), numel(), "view", shape());
  Shape new_strides;
  BRRR_CHECK(view_strides(shape(), strides(), new_shape, new_strides), "view: a tensor of shape ", shape_str(shape()),
             " with strides ", shape_str(strides()), " cannot be viewed as ", shape_str(new_shape),
             " without a copy; use reshape (which copies) or contiguous() first");
  Tensor out = make_view(*this, new_shape, new_strides, offset());
  if (autograd::needs_grad({this}))
    autograd::record("view", {*this}, out, [in_shape = shape()](const Tensor& g) { return TensorList{g.reshape(in_shape)}; });
  return out;
}

Tensor Tensor::reshape(Shape new_shape) const {
  const Shape resolved = infer_shape(new_shape, numel(), "reshape", shape());
  Shape unused;
  return view_strides(shape(), strides(), resolved, unused) ? view(resolved) : contiguous().view(resolved);
}

Tensor Tensor::flatten(int start_dim, int end_dim) const {
  if (dim() == 0) return reshape({1});
  start_dim = normalize_dim(start_dim, dim(), "flatten");
  end_dim = normalize_dim(end_dim, dim(), "flatten");
  BRRR_CHECK(start_dim <= end_dim, "flatten: start_dim ", start_dim, " is after end_dim ", end_dim);
  Shape s;
  for (int d = 0; d < start_dim; ++d) s.push_back(shape()[d]);
  std::int64_t n = 1;
  for (int d = start_dim; d <= end_dim; ++d) n *= shape()[d];
  s.push_back(n);
  for (int d = end_dim + 1; d < dim(); ++d) s.push_back(shape()[d]);
  return reshape(s);
}

Tensor Tensor::permute(std::vector<int> dims) const {
  BRRR_CHECK(static_cast<int>(dims.size()) == dim(), "permute: got ", dims.size(), " dims for a tensor of shape ",
             shape_str(shape()));
  std::vector<bool> seen(dim(), false);
  Shape s(dim()), st(dim());
  std::vector<int> inverse(dim());
  for (int i = 0; i < dim(); ++i) {
    const int d = normalize_dim(dims[i], dim(), "permute");
    BRRR_CHECK(!seen[d], "permute: dim ", d, " appears twice");
    seen[d] = true;
    dims[i] = d;
    s[i] = shape()[d];
    st[i] = strides()[d];
    inverse[d] = i;
  }
  Tensor out = make_view(*this, s, st, offset());
  if (autograd::needs_grad({this}))
    autograd::record("permute", {*this}, out, [inverse](const Tensor& g) { return TensorList{g.permute(inverse)}; });
  return out;
}

Tensor Tensor::transpose(int d0, int d1) const {
  if (dim() == 0) return *this;
  d0 = normalize_dim(d0, dim(), "transpose");
  d1 = normalize_dim(d1, dim(), "transpose");
  std::vector<int> dims(dim());
  std::iota(dims.begin(), dims.end(), 0);
  std::swap(dims[d0], dims[d1]);
  return permute(dims);
}

Tensor Tensor::narrow(int d, std::int64_t start, std::int64_t length) const {
  d = normalize_dim(d, dim(), "narrow");
  const std::int64_t size = shape()[d];
  if (start < 0) start += size;
  BRRR_CHECK(start >= 0 && length >= 0 && start + length <= size, "narrow: range [", start, ", ", start + length,
             ") is out of bounds for dim ", d, " of size ", size, " (shape ", shape_str(shape()), ")");
  Shape s = shape();
  s[d] = length;
  Tensor out = make_view(*this, s, strides(), offset() + start * strides()[d]);
  if (autograd::needs_grad({this}))
    autograd::record("narrow", {*this}, out, [in_shape = shape(), d, start, length](const Tensor& g) {
      Tensor full = zeros(in_shape, TensorOptions().dtype(g.dtype()).device(g.device()));
      full.narrow(d, start, length).copy_(g);
      return TensorList{full};
    });
  return out;
}

Tensor Tensor::slice(int d, std::int64_t start, std::int64_t end) const {
  d = normalize_dim(d, dim(), "slice");
  const std::int64_t size = shape()[d];
  if (start < 0) start += size;
  if (end < 0) end += size;
  start = std::clamp<std::int64_t>(start, 0, size);
  end = std::clamp<std::int64_t>(end, start, size);
  return narrow(d, start, end - start);
}

Tensor Tensor::select(int d, std::int64_t index) const {
  d = normalize_dim(d, dim(), "select");
  BRRR_CHECK(index >= -shape()[d] && index < shape()[d], "select: index ", index, " is out of range for dim ", d,
             " of size ", shape()[d]);
  return narrow(d, index < 0 ? index + shape()[d] : index, 1).squeeze(d);
}

Tensor Tensor::expand(Shape target) const {
  BRRR_CHECK(static_cast<int>(target.size()) >= dim(), "expand: cannot expand shape ", shape_str(shape()), " to ",
             shape_str(target), " (fewer dims)");
  const int lead = static_cast<int>(target.size()) - dim();
  Shape st(target.size(), 0);
  for (int d = 0; d < static_cast<int>(target.size()); ++d) {
    if (d < lead) {
      BRRR_CHECK(target[d] >= 0, "expand: size -1 is not allowed for a new leading dim");
      continue;
    }
    const std::int64_t have = shape()[d - lead];
    if (target[d] == -1) target[d] = have;
    BRRR_CHECK(have == target[d] || have == 1, "expand: the size ", have, " of dim ", d - lead, " of ",
               shape_str(shape()), " cannot expand to ", target[d], " (target ", shape_str(target), ")");
    st[d] = have == target[d] ? strides()[d - lead] : 0;
  }
  Tensor out = make_view(*this, target, st, offset());
  if (autograd::needs_grad({this}))
    autograd::record("expand", {*this}, out, [in_shape = shape()](const Tensor& g) { return TensorList{autograd::sum_to(g, in_shape)}; });
  return out;
}

Tensor Tensor::squeeze(int d) const {
  if (dim() == 0) return *this;
  d = normalize_dim(d, dim(), "squeeze");
  if (shape()[d] != 1) return *this;
  Shape s = shape(), st = strides();
  s.erase(s.begin() + d);
  st.erase(st.begin() + d);
  return restride(*this, s, st);
}

Tensor Tensor::squeeze() const {
  Shape s, st;
  for (int d = 0; d < dim(); ++d)
    if (shape()[d] != 1) {
      s.push_back(shape()[d]);
      st.push_back(strides()[d]);
    }
  return restride(*this, s, st);
}

Tensor Tensor::unsqueeze(int d) const {
  d = normalize_dim(d, dim() + 1, "unsqueeze");
  Shape s = shape(), st = strides();
  const std::int64_t inserted = d < dim() ? strides()[d] * shape()[d] : 1;
  s.insert(s.begin() + d, 1);
  st.insert(st.begin() + d, inserted);
  return restride(*this, s, st);
}

std::vector<Tensor> Tensor::split(std::int64_t split_size, int d) const {
  d = normalize_dim(d, dim(), "split");
  BRRR_CHECK(split_size > 0, "split: split_size must be positive, got ", split_size);
  std::vector<Tensor> parts;
  for (std::int64_t start = 0; start < shape()[d]; start += split_size)
    parts.push_back(narrow(d, start, std::min(split_size, shape()[d] - start)));
  return parts;
}

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  BRRR_PROFILE("contiguous", *this);
  Tensor out = detail::new_like(*this);
  detail::copy_into(out, *this);
  if (autograd::needs_grad({this}))
    autograd::record("contiguous", {*this}, out, [](const Tensor& g) { return TensorList{g}; });
  return out;
}

// ---------------------------------------------------------------------------------------------
// copies and conversion

Tensor Tensor::clone() const {
  Tensor out = detail::new_like(*this);
  detail::copy_into(out, *this);
  if (autograd::needs_grad({this}))
    autograd::record("clone", {*this}, out, [](const Tensor& g) { return TensorList{g}; });
  return out;
}

Tensor Tensor::to(DType target) const {
  if (target == dtype()) return *this;
  const Tensor src = contiguous();
  Tensor out = detail::new_tensor(shape(), target, device());
  static kernels::Kernel cast(kernels::op::cast<float>);  // one signature, any output dtype
  cast(device().type, target)(out.raw_data(), target, src.raw_data(), src.dtype(), numel(), detail::stream(device()));
  if (autograd::needs_grad({this}) && is_floating_point(target))
    autograd::record("to", {*this}, out, [source = dtype()](const Tensor& g) { return TensorList{g.to(source)}; });
  return out;
}

// Copies between the host and the device: the source is made contiguous on its own device
// first (a device-side copy kernel for a CUDA view), then its bytes move in one transfer.
Tensor Tensor::to(Device target) const {
  if (target == device()) return *this;
  const Tensor src = contiguous();
  Tensor out = detail::new_tensor(shape(), dtype(), target);
  const std::size_t nbytes = static_cast<std::size_t>(numel()) * dtype_size(dtype());
  gpu::Runtime& runtime = detail::cuda_runtime_for("to");
  runtime.copy(out.raw_data(), src.raw_data(), nbytes,
               target.is_cuda() ? gpu::CopyKind::HostToDevice : gpu::CopyKind::DeviceToHost);
  if (target.is_cpu()) detail::raise_device_errors();  // the host has waited anyway: report what the device found
  if (autograd::needs_grad({this}))
    autograd::record("to", {*this}, out, [source = device()](const Tensor& g) { return TensorList{g.to(source)}; });
  return out;
}

// ---------------------------------------------------------------------------------------------
// autograd accessors

bool Tensor::requires_grad() const { return defined() && impl_->requires_grad; }
bool Tensor::is_leaf() const { return impl_->grad_fn == nullptr; }
Tensor Tensor::grad() const { return impl_->grad; }
void Tensor::set_grad(const Tensor& grad) const {
  if (grad.defined())
    BRRR_CHECK(grad.shape() == shape(), "set_grad: gradient of shape ", shape_str(grad.shape()),
               " does not match the tensor's shape ", shape_str(shape()));
  impl_->grad = grad;
}
const std::shared_ptr<autograd::Node>& Tensor::grad_fn() const { return impl_->grad_fn; }

Tensor& Tensor::requires_grad_(bool on) {
  detail::check_defined("requires_grad_", *this);
  BRRR_CHECK(is_leaf(), "requires_grad_: only leaf tensors can change requires_grad (this one was made by ",
             impl_->grad_fn->name, ")");
  BRRR_CHECK(!on || is_floating_point(dtype()), "requires_grad_: only floating-point tensors can require grad, got ",
             dtype_name(dtype()));
  impl_->requires_grad = on;
  return *this;
}

void Tensor::backward(const Tensor& grad, bool retain_graph) const { autograd::backward(*this, grad, retain_graph); }

Tensor Tensor::detach() const {
  Tensor out = make_view(*this, shape(), strides(), offset());
  return out;
}

// ---------------------------------------------------------------------------------------------
// methods that forward to ops

Tensor Tensor::sum() const { return ops::sum(*this); }
Tensor Tensor::sum(std::vector<int> dims, bool keepdim) const { return ops::sum(*this, std::move(dims), keepdim); }
Tensor Tensor::mean() const { return ops::mean(*this); }
Tensor Tensor::mean(std::vector<int> dims, bool keepdim) const { return ops::mean(*this, std::move(dims), keepdim); }
Tensor Tensor::matmul(const Tensor& other) const { return ops::matmul(*this, other); }
Tensor Tensor::exp() const { return ops::exp(*this); }
Tensor Tensor::log() const { return ops::log(*this); }
Tensor Tensor::pow(double exponent) const { return ops::pow(*this, exponent); }

// ---------------------------------------------------------------------------------------------
// in place

Tensor& Tensor::fill_(double value) {
  check_in_place(*this, "fill_");
  if (numel() == 0) return *this;
  Tensor target = is_contiguous() ? *this : detail::new_like(*this);
  const std::int64_t n = target.numel();
  const kernels::Stream s = detail::stream(device());
  switch (dtype()) {
    case DType::Float32: { static kernels::Kernel k(kernels::op::fill<float>); k(device().type)(target.data_ptr<float>(), static_cast<float>(value), n, s); break; }
    case DType::Float64: { static kernels::Kernel k(kernels::op::fill<double>); k(device().type)(target.data_ptr<double>(), value, n, s); break; }
    case DType::Int32: { static kernels::Kernel k(kernels::op::fill<std::int32_t>); k(device().type)(target.data_ptr<std::int32_t>(), static_cast<std::int32_t>(value), n, s); break; }
    case DType::Int64: { static kernels::Kernel k(kernels::op::fill<std::int64_t>); k(device().type)(target.data_ptr<std::int64_t>(), static_cast<std::int64_t>(value), n, s); break; }
    case DType::BFloat16: { static kernels::Kernel k(kernels::op::fill<bf16>); k(device().type)(target.data_ptr<bf16>(), bf16(static_cast<float>(value)), n, s); break; }
    default: detail::fail("fill_: unsupported dtype ", dtype_name(dtype()));
  }
  if (target.impl() != impl()) detail::copy_into(*this, target);
  return *this;
}

Tensor& Tensor::copy_(const Tensor& source) {
  check_in_place(*this, "copy_");
  detail::check_defined("copy_", source);
  BRRR_CHECK(ops::broadcast_shapes(shape(), source.shape(), "copy_") == shape(), "copy_: source of shape ",
             shape_str(source.shape()), " does not broadcast to ", shape_str(shape()));
  NoGradGuard no_grad;
  // Host bytes that are already this tensor's layout go to the device in one transfer, with no
  // device block in between: the CUDA graph's batch, every step (chapter 17).
  if (source.device().is_cpu() && device().is_cuda() && source.dtype() == dtype() && source.shape() == shape() &&
      source.is_contiguous() && is_contiguous()) {
    detail::cuda_runtime_for("copy_").copy(raw_data(), source.raw_data(),
                                           static_cast<std::size_t>(numel()) * dtype_size(dtype()),
                                           gpu::CopyKind::HostToDevice);
    return *this;
  }
  Tensor src = source.to(device()).to(dtype());
  detail::copy_into(*this, src);
  return *this;
}

Tensor& Tensor::add_(const Tensor& other, double alpha) {
  check_in_place(*this, "add_");
  NoGradGuard no_grad;
  detail::check_same_dtype("add_", *this, other);
  BRRR_CHECK(ops::broadcast_shapes(shape(), other.shape(), "add_") == shape(), "add_: ", shape_str(other.shape()),
             " does not broadcast to ", shape_str(shape()));
  detail::binary_into("add", *this, *this, alpha == 1.0 ? other : ops::mul(other, alpha));
  return *this;
}

Tensor& Tensor::mul_(double factor) {
  check_in_place(*this, "mul_");
  NoGradGuard no_grad;
  detail::binary_into("mul", *this, *this, scalar_tensor(factor, TensorOptions().dtype(dtype()).device(device())));
  return *this;
}

namespace {
// Draws into a contiguous tensor's own buffer with the "uniform" or "normal" kernel (the one
// place that knows how many numbers each Philox block gives: uniform float64 takes two
// words per number, everything else one).
void draw_into(Tensor& t, const char* kernel_name, Generator& gen) {
  BRRR_CHECK(t.is_contiguous(), kernel_name, "_: tensor must be contiguous");
  detail::refuse_random_in_capture(kernel_name, t.device());
  const std::int64_t n = t.numel();
  detail::dispatch_floating(t.dtype(), kernel_name, [&]<class T>() {
    const int per_block = std::string(kernel_name) == "uniform" && sizeof(T) == 8 ? 2 : 4;
    const std::uint64_t counter = gen.reserve(static_cast<std::uint64_t>((n + per_block - 1) / per_block));
    const auto op = std::string(kernel_name) == "uniform" ? kernels::op::uniform<T> : kernels::op::normal<T>;
    const kernels::random_fn<T> fn = kernels::lookup(op, t.device().type);
    fn(t.data_ptr<T>(), n, gen.seed(), counter, detail::stream(t.device()));
  });
}
}  // namespace

Tensor& Tensor::normal_(double mean, double std, Generator& gen) {
  check_in_place(*this, "normal_");
  draw_into(*this, "normal", gen);
  if (std != 1.0) mul_(std);
  if (mean != 0.0) add_(scalar_tensor(mean, TensorOptions().dtype(dtype()).device(device())));
  return *this;
}

Tensor& Tensor::uniform_(double low, double high, Generator& gen) {
  check_in_place(*this, "uniform_");
  draw_into(*this, "uniform", gen);
  mul_(high - low);
  if (low != 0.0) add_(scalar_tensor(low, TensorOptions().dtype(dtype()).device(device())));
  return *this;
}

// ---------------------------------------------------------------------------------------------
// creation

Tensor empty(Shape shape, TensorOptions options) {
  Tensor t = detail::new_tensor(shape, options.dtype_, options.device_);
  if (options.requires_grad_) t.requires_grad_(true);
  return t;
}

Tensor full(Shape shape, double value, TensorOptions options) {
  Tensor t = detail::new_tensor(shape, options.dtype_, options.device_);
  t.fill_(value);
  if (options.requires_grad_) t.requires_grad_(true);
  return t;
}
Tensor zeros(Shape shape, TensorOptions options) { return full(std::move(shape), 0.0, options); }
Tensor ones(Shape shape, TensorOptions options) { return full(std::move(shape), 1.0, options); }
Tensor zeros_like(const Tensor& like) { return zeros(like.shape(), TensorOptions().dtype(like.dtype()).device(like.device())); }
Tensor ones_like(const Tensor& like) { return ones(like.shape(), TensorOptions().dtype(like.dtype()).device(like.device())); }
Tensor empty_like(const Tensor& like) { return detail::new_like(like); }
Tensor scalar_tensor(double value, TensorOptions options) { return full({}, value, options); }

template <class V>
static Tensor from_values(const std::vector<V>& values, Shape shape, TensorOptions options) {
  BRRR_CHECK(static_cast<std::int64_t>(values.size()) == shape_numel(shape), "from_vector: ", values.size(),
             " values do not fill shape ", shape_str(shape), " (", shape_numel(shape), " elements)");
  Tensor t = detail::new_tensor(shape, dtype_of<V>(), kCPU);
  if (!values.empty()) std::memcpy(t.raw_data(), values.data(), values.size() * sizeof(V));
  Tensor out = t.to(options.dtype_).to(options.device_);
  if (options.requires_grad_) out.requires_grad_(true);
  return out;
}
Tensor from_vector(const std::vector<double>& v, Shape s, TensorOptions o) { return from_values(v, std::move(s), o); }
Tensor from_vector(const std::vector<float>& v, Shape s, TensorOptions o) { return from_values(v, std::move(s), o); }
Tensor from_vector(const std::vector<std::int64_t>& v, Shape s, TensorOptions o) { return from_values(v, std::move(s), o); }
Tensor from_vector(const std::vector<std::int32_t>& v, Shape s, TensorOptions o) { return from_values(v, std::move(s), o); }
Tensor tensor(std::initializer_list<double> values, TensorOptions options) {
  return from_vector(std::vector<double>(values), {static_cast<std::int64_t>(values.size())}, options);
}

Tensor arange(double start, double end, double step, TensorOptions options) {
  BRRR_CHECK(step != 0.0, "arange: step must be nonzero");
  const double count = std::ceil((end - start) / step);
  const std::int64_t n = count > 0 ? static_cast<std::int64_t>(count) : 0;
  std::vector<double> values(n);
  for (std::int64_t i = 0; i < n; ++i) values[i] = start + static_cast<double>(i) * step;
  return from_vector(values, {n}, options);
}
Tensor arange(std::int64_t end, TensorOptions options) { return arange(0.0, static_cast<double>(end), 1.0, options); }

namespace {
// rand and randn: a tensor of `distribution` ("uniform" or "normal") drawn by gen. bfloat16 is
// drawn in float32 and rounded once (chapter 18), so it is the same on every device.
Tensor random_tensor(const char* op, const char* distribution, Shape shape, Generator& gen, TensorOptions options) {
  BRRR_CHECK(is_floating_point(options.dtype_), op, ": dtype must be floating point, got ", dtype_name(options.dtype_));
  Tensor t;
  if (options.dtype_ == kBFloat16) {
    t = random_tensor(op, distribution, std::move(shape), gen, TensorOptions(options).dtype(kFloat32).requires_grad(false))
            .to(kBFloat16);
  } else {
    t = detail::new_tensor(shape, options.dtype_, options.device_);
    draw_into(t, distribution, gen);
  }
  if (options.requires_grad_) t.requires_grad_(true);
  return t;
}
}  // namespace

Tensor rand(Shape shape, Generator& gen, TensorOptions options) {
  return random_tensor("rand", "uniform", std::move(shape), gen, options);
}
Tensor randn(Shape shape, Generator& gen, TensorOptions options) {
  return random_tensor("randn", "normal", std::move(shape), gen, options);
}

Tensor randint(std::int64_t low, std::int64_t high, Shape shape, Generator& gen, TensorOptions options) {
  BRRR_CHECK(low < high, "randint: low (", low, ") must be below high (", high, ")");
  const std::int64_t n = shape_numel(shape);
  std::vector<std::int64_t> values(n);
  const std::uint64_t range = static_cast<std::uint64_t>(high - low);
  for (std::int64_t i = 0; i < n; ++i) values[i] = low + static_cast<std::int64_t>(gen.next_u64() % range);
  return from_vector(values, shape, options);
}

// ---------------------------------------------------------------------------------------------
// printing, as PyTorch prints

namespace {

struct Format {
  bool integer_valued = true;  // floats that are all whole numbers print as "1."
  bool scientific = false;
  int width = 1;
};

std::string format_value(double v, DType dtype, const Format& f) {
  std::ostringstream s;
  if (!is_floating_point(dtype)) {
    s << static_cast<long long>(v);
  } else if (std::isnan(v)) {
    s << "nan";
  } else if (std::isinf(v)) {
    s << (v > 0 ? "inf" : "-inf");
  } else if (f.scientific) {
    s << std::scientific << std::setprecision(4) << v;
  } else if (f.integer_valued) {
    s << std::fixed << std::setprecision(0) << v << ".";
  } else {
    s << std::fixed << std::setprecision(4) << v;
  }
  return s.str();
}

void print_dim(std::ostringstream& out, const std::vector<double>& values, const Shape& shape, std::size_t dim,
               std::int64_t base, std::int64_t stride_elems, DType dtype, const Format& f, int indent, bool summarize) {
  const std::int64_t size = shape[dim];
  std::int64_t inner = 1;
  for (std::size_t d = dim + 1; d < shape.size(); ++d) inner *= shape[d];
  out << "[";
  for (std::int64_t i = 0; i < size; ++i) {
    if (summarize && size > 6 && i == 3) {
      out << (dim + 1 == shape.size() ? "..., " : "...,\n" + std::string(indent + 1 + dim, ' '));
      i = size - 4;
      continue;
    }
    if (dim + 1 == shape.size()) {
      std::string v = format_value(values[base + i], dtype, f);
      out << std::string(std::max<int>(0, f.width - static_cast<int>(v.size())), ' ') << v;
      if (i + 1 < size) out << ", ";
    } else {
      print_dim(out, values, shape, dim + 1, base + i * inner, stride_elems, dtype, f, indent, summarize);
      if (i + 1 < size) out << "," << std::string(shape.size() - dim - 1, '\n') << std::string(indent + dim + 1, ' ');
    }
  }
  out << "]";
}

}  // namespace

std::string Tensor::str() const {
  if (!defined()) return "tensor(undefined)";
  const std::vector<double> values = to_vector<double>();
  Format f;
  double max_abs = 0.0, min_abs = 0.0;
  bool first = true;
  for (double v : values) {
    if (!std::isfinite(v)) continue;
    if (v != std::floor(v)) f.integer_valued = false;
    const double a = std::fabs(v);
    if (a == 0.0) continue;
    max_abs = first ? a : std::max(max_abs, a);
    min_abs = first ? a : std::min(min_abs, a);
    first = false;
  }
  if (is_floating_point(dtype()) && !first) {
    if (max_abs >= 1e8 || (!f.integer_valued && (min_abs < 1e-4 || max_abs / min_abs > 1000.0))) f.scientific = true;
  }
  const bool summarize = numel() > 1000;
  for (double v : values) f.width = std::max<int>(f.width, static_cast<int>(format_value(v, dtype(), f).size()));
  std::ostringstream out;
  out << "tensor(";
  if (dim() == 0) {
    out << format_value(values[0], dtype(), f);
  } else {
    print_dim(out, values, shape(), 0, 0, 1, dtype(), f, 7, summarize);
  }
  if (device().is_cuda()) out << ", device='" << device().str() << "'";
  if (dtype() != kFloat32 && dtype() != kInt64) out << ", dtype=" << dtype_name(dtype());
  if (impl_->grad_fn) out << ", grad_fn=<" << impl_->grad_fn->name << ">";
  else if (requires_grad()) out << ", requires_grad=True";
  out << ")";
  return out.str();
}

std::ostream& operator<<(std::ostream& out, const Tensor& t) { return out << t.str(); }

}  // namespace brrr
