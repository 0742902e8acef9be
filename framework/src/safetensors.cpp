// framework/src/safetensors.cpp: the safetensors reader and writer.
// Chapter 08 (training: checkpoints). Read before: brrr/safetensors.h.
#include "brrr/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "brrr/autograd.h"
#include "brrr/io.h"

namespace brrr::safetensors {

namespace {

constexpr std::uint64_t kMaxHeader = 100u << 20;  // the reference implementation's limit

const char* dtype_code(DType d) {
  switch (d) {
    case DType::Float32: return "F32";
    case DType::Float64: return "F64";
    case DType::Int32: return "I32";
    case DType::Int64: return "I64";
    case DType::BFloat16: return "BF16";
  }
  return "?";
}

bool parse_dtype(const std::string& code, DType& out) {
  for (DType d : {kFloat32, kFloat64, kInt32, kInt64, kBFloat16})
    if (code == dtype_code(d)) {
      out = d;
      return true;
    }
  return false;
}

std::uint64_t get_u64(const nlohmann::json& v, const std::string& what, const std::string& label) {
  BRRR_CHECK(v.is_number_unsigned() || (v.is_number_integer() && v.get<std::int64_t>() >= 0), label, ": ", what,
             " must be a non-negative integer, got ", v.dump());
  return v.get<std::uint64_t>();
}

}  // namespace

Header parse(std::string_view bytes, const std::string& label) {
  BRRR_CHECK(bytes.size() >= 8, label, ": file is ", bytes.size(), " bytes, too short for the 8-byte header length");
  std::uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);  // little-endian, as is every machine brrr runs on
  BRRR_CHECK(n <= bytes.size() - 8, label, ": header length ", n, " runs past the end of the file (", bytes.size(),
             " bytes)");
  BRRR_CHECK(n <= kMaxHeader, label, ": header length ", n, " is over the ", kMaxHeader, "-byte limit");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(bytes.substr(8, n));
  } catch (const nlohmann::json::exception& e) {
    detail::fail(label, ": malformed JSON header: ", e.what());
  }
  BRRR_CHECK(j.is_object(), label, ": the header must be a JSON object, got ", j.type_name());

  Header h;
  h.data_start = 8 + n;
  const std::uint64_t data_size = bytes.size() - h.data_start;
  for (const auto& [name, entry] : j.items()) {
    if (name == "__metadata__") {
      BRRR_CHECK(entry.is_object(), label, ": __metadata__ must be an object of strings");
      for (const auto& [key, value] : entry.items()) {
        BRRR_CHECK(value.is_string(), label, ": __metadata__ entry '", key, "' must be a string, got ", value.type_name());
        h.metadata[key] = value.get<std::string>();
      }
      continue;
    }
    const std::string where = label + ": tensor '" + name + "'";
    BRRR_CHECK(entry.is_object(), where, ": entry must be an object");
    BRRR_CHECK(entry.contains("dtype") && entry["dtype"].is_string(), where, ": missing or non-string dtype");
    BRRR_CHECK(entry.contains("shape") && entry["shape"].is_array(), where, ": missing or non-array shape");
    BRRR_CHECK(entry.contains("data_offsets") && entry["data_offsets"].is_array() && entry["data_offsets"].size() == 2,
               where, ": data_offsets must be an array [begin, end]");
    TensorInfo t;
    t.name = name;
    const std::string code = entry["dtype"].get<std::string>();
    BRRR_CHECK(parse_dtype(code, t.dtype), where, ": unknown or unsupported dtype '", code,
               "' (supported: F32, F64, I32, I64, BF16)");
    for (const auto& d : entry["shape"]) {
      const std::uint64_t size = get_u64(d, "a shape entry", where);
      BRRR_CHECK(size <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()), where, ": shape entry ",
                 size, " is too large");
      t.shape.push_back(static_cast<std::int64_t>(size));
    }
    t.begin = get_u64(entry["data_offsets"][0], "data_offsets[0]", where);
    t.end = get_u64(entry["data_offsets"][1], "data_offsets[1]", where);
    BRRR_CHECK(t.begin <= t.end, where, ": data_offsets [", t.begin, ", ", t.end, "] are reversed");
    BRRR_CHECK(t.end <= data_size, where, ": data_offsets [", t.begin, ", ", t.end, "] run past the end of the data (",
               data_size, " bytes)");
    std::int64_t numel = 0;
    try {
      numel = shape_numel(t.shape);
    } catch (const Error& e) {
      detail::fail(where, ": ", e.what());
    }
    const std::uint64_t es = dtype_size(t.dtype);
    BRRR_CHECK(static_cast<std::uint64_t>(numel) <= std::numeric_limits<std::uint64_t>::max() / es &&
                   static_cast<std::uint64_t>(numel) * es == t.end - t.begin,
               where, ": shape ", shape_str(t.shape), " of ", code, " needs ", static_cast<std::uint64_t>(numel) * es,
               " bytes, but data_offsets give ", t.end - t.begin);
    h.tensors.push_back(std::move(t));
  }
  std::sort(h.tensors.begin(), h.tensors.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  for (std::size_t i = 1; i < h.tensors.size(); ++i) {
    const TensorInfo &a = h.tensors[i - 1], &b = h.tensors[i];
    BRRR_CHECK(b.begin >= a.end || a.begin == a.end || b.begin == b.end, label, ": tensors '", a.name, "' [", a.begin,
               ", ", a.end, ") and '", b.name, "' [", b.begin, ", ", b.end, ") overlap");
  }
  return h;
}

// ---------------------------------------------------------------------------------------------
// File

struct File::Mapping {
  void* data = nullptr;
  std::size_t size = 0;
  ~Mapping() {
    if (data && size) ::munmap(data, size);
  }
};

File::File(const std::string& path) : path_(path), mapping_(std::make_shared<Mapping>()) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  BRRR_CHECK(fd >= 0, "cannot open '", path, "': ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    detail::fail("cannot open '", path, "': not a regular file");
  }
  mapping_->size = static_cast<std::size_t>(st.st_size);
  if (mapping_->size > 0) {
    // Private and writable: tensors over the mapping may be written (copy-on-write), the file
    // never changes.
    void* p = ::mmap(nullptr, mapping_->size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      detail::fail("cannot map '", path, "': ", std::strerror(err));
    }
    mapping_->data = p;
  }
  ::close(fd);
  header_ = parse(std::string_view(static_cast<const char*>(mapping_->data), mapping_->size), path);
}

File::~File() = default;

bool File::contains(const std::string& name) const {
  for (const auto& t : header_.tensors)
    if (t.name == name) return true;
  return false;
}

const TensorInfo& File::info(const std::string& name) const {
  for (const auto& t : header_.tensors)
    if (t.name == name) return t;
  detail::fail(path_, ": no tensor named '", name, "'");
}

Tensor File::tensor(const std::string& name) const {
  const TensorInfo& t = info(name);
  char* p = static_cast<char*>(mapping_->data) + header_.data_start + t.begin;
  const std::size_t nbytes = t.end - t.begin;
  auto impl = std::make_shared<TensorImpl>();
  impl->shape = t.shape;
  impl->strides = contiguous_strides(t.shape);
  impl->dtype = t.dtype;
  if (reinterpret_cast<std::uintptr_t>(p) % dtype_size(t.dtype) == 0) {
    views_handed_out_ = true;
    std::shared_ptr<Mapping> keep = mapping_;  // the mapping lives while any tensor uses it
    impl->storage = Storage::wrap(p, nbytes, kCPU, [keep](void*) {});
  } else {  // misaligned data (an unpadded header): copy to an aligned buffer
    impl->storage = Storage::allocate(nbytes, kCPU);
    std::memcpy(impl->storage->data(), p, nbytes);
  }
  return Tensor(std::move(impl));
}

void File::copy_into(const std::string& name, const Tensor& dst, bool transposed) const {
  const TensorInfo& t = info(name);
  BRRR_CHECK(!transposed || t.shape.size() == 2, path_, ": tensor '", name, "' has shape ", shape_str(t.shape),
             ", expected a matrix");
  const Shape want = transposed && dst.defined() && dst.dim() == 2 ? Shape{dst.size(1), dst.size(0)}
                                                                  : (dst.defined() ? dst.shape() : Shape{});
  BRRR_CHECK(dst.defined() && t.shape == want, path_, ": tensor '", name, "' has shape ", shape_str(t.shape),
             ", expected ", dst.defined() ? shape_str(want) : std::string("(undefined)"));
  NoGradGuard no_grad;
  char* src = static_cast<char*>(mapping_->data) + header_.data_start + t.begin;
  const long page = ::sysconf(_SC_PAGESIZE);
  // Lets the kernel drop the file pages of src[done, done + n) (unless a view may still read them).
  auto release = [&](std::size_t done, std::size_t n) {
    if (views_handed_out_) return;
    const auto first = (reinterpret_cast<std::uintptr_t>(src + done) + page - 1) / page * page;
    const auto last = (reinterpret_cast<std::uintptr_t>(src + done + n)) / page * page;
    if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
  };
  const std::size_t nbytes = static_cast<std::size_t>(t.end - t.begin);
  if (!transposed && dst.dtype() == t.dtype && dst.device().is_cpu() && dst.is_contiguous()) {
    // Chunk by chunk, so at most one chunk of file pages is resident beside the weights.
    constexpr std::size_t kChunk = 8u << 20;
    char* out = static_cast<char*>(dst.raw_data());
    for (std::size_t done = 0; done < nbytes; done += kChunk) {
      const std::size_t n = std::min(kChunk, nbytes - done);
      std::memcpy(out + done, src + done, n);
      release(done, n);
    }
    return;
  }
  Tensor source;
  if (reinterpret_cast<std::uintptr_t>(src) % dtype_size(t.dtype) == 0) {
    // A view over the mapping that lives only in this call, so the pages may be dropped after.
    auto impl = std::make_shared<TensorImpl>();
    impl->shape = t.shape;
    impl->strides = contiguous_strides(t.shape);
    impl->dtype = t.dtype;
    impl->storage = Storage::wrap(src, nbytes, kCPU, [keep = mapping_](void*) {});
    source = Tensor(std::move(impl));
  } else {
    source = tensor(name);  // misaligned: an aligned copy
  }
  Tensor target = dst;
  target.copy_(transposed ? source.transpose(0, 1) : source);
  source = Tensor();
  release(0, nbytes);
}

// ---------------------------------------------------------------------------------------------
// save

void save(const std::string& path, const NamedTensors& tensors, const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header;
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::uint64_t offset = 0;
  std::vector<Tensor> data;
  for (const auto& [name, t] : tensors) {
    BRRR_CHECK(!name.empty() && name != "__metadata__", "save '", path, "': invalid tensor name '", name, "'");
    BRRR_CHECK(!header.contains(name), "save '", path, "': tensor name '", name, "' appears twice");
    BRRR_CHECK(t.defined(), "save '", path, "': tensor '", name, "' is undefined");
    const Tensor c = t.detach().to(kCPU).contiguous();
    const std::uint64_t nbytes = static_cast<std::uint64_t>(c.numel()) * dtype_size(c.dtype());
    header[name] = {{"dtype", dtype_code(c.dtype())}, {"shape", c.shape()}, {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
    data.push_back(c);
  }
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' ');  // pad so the data starts 8-byte aligned
  const std::uint64_t n = json.size();
  AtomicFile file(path);
  file.write(&n, 8);
  file.write(json.data(), json.size());
  for (const Tensor& c : data) file.write(c.raw_data(), static_cast<std::size_t>(c.numel()) * dtype_size(c.dtype()));
  file.commit();
}

}  // namespace brrr::safetensors
