// tests/core/test_tensor.cpp: tensors, storage, views, creation, printing (chapter 01).
#include <doctest/doctest.h>

#include "brrr/brrr.h"

using namespace brrr;

TEST_CASE("a tensor is a shaped, strided view of a storage") {
  Tensor t = arange(6).reshape({2, 3});
  CHECK(t.shape() == Shape{2, 3});
  CHECK(t.strides() == Shape{3, 1});
  CHECK(t.numel() == 6);
  CHECK(t.dtype() == kFloat32);
  CHECK(t.is_contiguous());
  CHECK(t.at<float>({1, 2}) == 5.0f);
  CHECK(t.at<float>({-1, -1}) == 5.0f);
}

TEST_CASE("views share storage: transpose, permute, narrow, expand, squeeze") {
  Tensor t = arange(24).reshape({2, 3, 4});
  Tensor tt = t.transpose(0, 2);
  CHECK(tt.shape() == Shape{4, 3, 2});
  CHECK(tt.storage() == t.storage());
  CHECK_FALSE(tt.is_contiguous());
  CHECK(tt.at<float>({3, 2, 1}) == t.at<float>({1, 2, 3}));
  Tensor p = t.permute({1, 2, 0});
  CHECK(p.shape() == Shape{3, 4, 2});
  CHECK(p.at<float>({2, 1, 1}) == t.at<float>({1, 2, 1}));
  Tensor n = t.narrow(2, 1, 2);
  CHECK(n.shape() == Shape{2, 3, 2});
  CHECK(n.at<float>({1, 0, 0}) == 13.0f);
  CHECK(n.storage() == t.storage());
  Tensor e = tensor({1, 2, 3}).reshape({3, 1}).expand({3, 4});
  CHECK(e.strides() == Shape{1, 0});
  CHECK(e.at<float>({2, 3}) == 3.0f);
  Tensor u = t.unsqueeze(1);
  CHECK(u.shape() == Shape{2, 1, 3, 4});
  CHECK(u.squeeze(1).shape() == Shape{2, 3, 4});
  CHECK(ones({1, 3, 1}).squeeze().shape() == Shape{3});
  CHECK(t.select(1, 2).shape() == Shape{2, 4});
  CHECK(t.select(1, 2).at<float>({1, 3}) == 23.0f);
  // a write through a view is seen by the base
  {
    NoGradGuard no_grad;
    t.narrow(0, 1, 1).fill_(-1.0);
  }
  CHECK(t.at<float>({1, 0, 0}) == -1.0f);
  CHECK(t.at<float>({0, 0, 0}) == 0.0f);
}

TEST_CASE("contiguous copies only when needed and keeps values") {
  Tensor t = arange(6).reshape({2, 3});
  CHECK(t.contiguous().storage() == t.storage());
  Tensor c = t.t().contiguous();
  CHECK(c.storage() != t.storage());
  CHECK(c.is_contiguous());
  CHECK(c.to_vector<float>() == std::vector<float>{0, 3, 1, 4, 2, 5});
}

TEST_CASE("reshape infers -1 and copies a non-contiguous input") {
  Tensor t = arange(12).reshape({3, -1});
  CHECK(t.shape() == Shape{3, 4});
  Tensor r = t.t().reshape({-1});
  CHECK(r.to_vector<float>() == std::vector<float>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11});
  CHECK_THROWS_WITH_AS(t.reshape({5, -1}), doctest::Contains("cannot reshape (3, 4)"), Error);
  CHECK_THROWS_WITH_AS(t.t().view({12}), doctest::Contains("cannot be viewed as (12,) without a copy"), Error);
  Tensor base = arange(24).reshape({2, 12});
  Tensor split_last = base.narrow(1, 4, 8).view({2, 2, 4});  // a strided tensor's last dim splits without a copy
  CHECK(split_last.storage() == base.storage());
  CHECK(split_last.at<float>({1, 1, 3}) == 23.0f);
}

TEST_CASE("split, cat and stack") {
  Tensor t = arange(10);
  auto parts = t.split(4);
  REQUIRE(parts.size() == 3);
  CHECK(parts[2].to_vector<float>() == std::vector<float>{8, 9});
  Tensor back = ops::cat(parts, 0);
  CHECK(back.to_vector<float>() == t.to_vector<float>());
  Tensor s = ops::stack({tensor({1, 2}), tensor({3, 4})}, 1);
  CHECK(s.shape() == Shape{2, 2});
  CHECK(s.to_vector<float>() == std::vector<float>{1, 3, 2, 4});
  CHECK_THROWS_WITH_AS(ops::cat({ones({2, 3}), ones({2, 4})}, 0), doctest::Contains("differs from (2, 3)"), Error);
}

TEST_CASE("creation: zeros, ones, full, arange, from_vector, dtypes") {
  CHECK(zeros({2, 2}).to_vector<float>() == std::vector<float>(4, 0.0f));
  CHECK(ones({3}, kFloat64).to_vector<double>() == std::vector<double>(3, 1.0));
  CHECK(full({2}, 7.5).to_vector<float>() == std::vector<float>{7.5f, 7.5f});
  CHECK(arange(0.0, 1.0, 0.25).to_vector<float>() == std::vector<float>{0, 0.25f, 0.5f, 0.75f});
  Tensor i = from_vector(std::vector<std::int64_t>{1, 2, 3}, {3}, kInt64);
  CHECK(i.dtype() == kInt64);
  CHECK(i.to(kFloat64).to_vector<double>() == std::vector<double>{1, 2, 3});
  CHECK(tensor({1.9, -1.9}).to(kInt32).to_vector<std::int32_t>() == std::vector<std::int32_t>{1, -1});
  CHECK_THROWS_WITH_AS(from_vector(std::vector<float>{1, 2, 3}, {2, 2}), doctest::Contains("do not fill shape (2, 2)"), Error);
}

TEST_CASE("the same seed gives the same random numbers and another seed does not") {
  Generator a(42), b(42), c(43);
  Tensor x = randn({1000}, a), y = randn({1000}, b), z = randn({1000}, c);
  CHECK(x.to_vector<float>() == y.to_vector<float>());
  CHECK(x.to_vector<float>() != z.to_vector<float>());
  // the next draw continues the stream
  CHECK(randn({4}, a).to_vector<float>() == randn({4}, b).to_vector<float>());
  // moments of a large sample
  Generator g(7);
  Tensor n = randn({200000}, g, kFloat64);
  CHECK(n.mean().item() == doctest::Approx(0.0).epsilon(0.01).scale(1.0));
  CHECK(ops::var(n).item() == doctest::Approx(1.0).epsilon(0.02));
  Tensor u = rand({200000}, g);
  CHECK(ops::max(u).item() < 1.0);
  CHECK(u.mean().item() == doctest::Approx(0.5).epsilon(0.01));
}

TEST_CASE("random numbers do not depend on the thread count") {
  const int before = get_num_threads();
  set_num_threads(1);
  Generator a(5);
  const std::vector<float> one = randn({100003}, a).to_vector<float>();
  set_num_threads(2);
  Generator b(5);
  const std::vector<float> two = randn({100003}, b).to_vector<float>();
  set_num_threads(before);
  CHECK(one == two);
}

TEST_CASE("printing follows PyTorch's format") {
  CHECK(tensor({1, 2, 3}).str() == "tensor([1., 2., 3.])");
  CHECK(tensor({0.5, -1.25}).str() == "tensor([ 0.5000, -1.2500])");
  CHECK(arange(4).reshape({2, 2}).str() == "tensor([[0., 1.],\n        [2., 3.]])");
  CHECK(scalar_tensor(3).str() == "tensor(3.)");
  CHECK(from_vector(std::vector<std::int64_t>{1, 20}, {2}, kInt64).str() == "tensor([ 1, 20])");
  CHECK(tensor({1}, kFloat64).str() == "tensor([1.], dtype=float64)");
  Tensor w = ones({2}, TensorOptions().requires_grad(true));
  CHECK(w.str() == "tensor([1., 1.], requires_grad=True)");
  CHECK((w * 2.0).str() == "tensor([2., 2.], grad_fn=<mul>)");
  CHECK(tensor({1e-5, 1e5}).str() == "tensor([1.0000e-05, 1.0000e+05])");
}

TEST_CASE("element access checks its indices") {
  Tensor t = zeros({2, 3});
  CHECK_THROWS_WITH_AS(t.at<float>({2, 0}), doctest::Contains("index 2 is out of range for dim 0 of size 2"), Error);
  CHECK_THROWS_WITH_AS(t.at<float>({0}), doctest::Contains("got 1 indices for a tensor of shape (2, 3)"), Error);
  CHECK_THROWS_WITH_AS(t.item(), doctest::Contains("one element"), Error);
  CHECK_THROWS_WITH_AS(t.data_ptr<double>(), doctest::Contains("has dtype float32, asked for float64"), Error);
  CHECK_THROWS_WITH_AS(t.narrow(1, 2, 2), doctest::Contains("out of bounds for dim 1 of size 3"), Error);
  CHECK_THROWS_WITH_AS(t.transpose(0, 2), doctest::Contains("dim 2 is out of range"), Error);
}

TEST_CASE("asking for a CUDA tensor without a GPU is a clear error") {
  CHECK_THROWS_WITH_AS(zeros({2}, TensorOptions().device(Device::cuda())), doctest::Contains("cuda:0 is not available"), Error);
  CHECK_THROWS_WITH_AS(Device::parse("tpu"), doctest::Contains("unknown device 'tpu'"), Error);
}

TEST_CASE("large CPU blocks are cached for reuse, and the cache can be emptied") {
  empty_cpu_cache();
  CHECK(cpu_cache_bytes() == 0);
  void* first = nullptr;
  {
    Tensor big = empty({1 << 20});  // 4 MiB
    first = big.raw_data();
  }
  CHECK(cpu_cache_bytes() >= (4u << 20));
  Tensor again = empty({1 << 20});
  CHECK(again.raw_data() == first);  // the same block, no new pages to fault in
  CHECK(cpu_cache_bytes() == 0);
  Tensor small = empty({16});  // small blocks are not cached
  small = Tensor();
  CHECK(cpu_cache_bytes() == 0);
  again = Tensor();
  empty_cpu_cache();
  CHECK(cpu_cache_bytes() == 0);
}
