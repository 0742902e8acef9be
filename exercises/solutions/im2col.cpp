// exercises/solutions/im2col.cpp: the reference solution of exercise ex09.1, im2col (chapter 09).
// The plain version: one bounds check per entry (the default kernel, conv_im2col.cpp, hoists
// it out of the inner loop).
#include "exercises/solutions/solutions.h"

namespace brrr::solution {

template <class T>
void im2col(T* col, const T* x, const kernels::ConvShape& s) {
  const std::int64_t P = s.H_out * s.W_out;
  for (std::int64_t ci = 0; ci < s.C_in; ++ci)
    for (std::int64_t kh = 0; kh < s.kH; ++kh)
      for (std::int64_t kw = 0; kw < s.kW; ++kw) {
        T* row = col + ((ci * s.kH + kh) * s.kW + kw) * P;
        for (std::int64_t oh = 0; oh < s.H_out; ++oh)
          for (std::int64_t ow = 0; ow < s.W_out; ++ow) {
            const std::int64_t ih = oh * s.stride_h - s.pad_h + kh * s.dil_h;
            const std::int64_t iw = ow * s.stride_w - s.pad_w + kw * s.dil_w;
            const bool inside = ih >= 0 && ih < s.H && iw >= 0 && iw < s.W;
            row[oh * s.W_out + ow] = inside ? x[(ci * s.H + ih) * s.W + iw] : T(0);
          }
      }
}

template void im2col<float>(float*, const float*, const kernels::ConvShape&);
template void im2col<double>(double*, const double*, const kernels::ConvShape&);

}  // namespace brrr::solution
