// exercises/student/im2col.cpp: exercise ex09.1, im2col, the copy that turns a convolution into
// a matmul (chapter 09, convolutions).
// Read before: docs/chapters/09-convolutions.md ("im2col: convolution is a matmul"),
// kernels/cpu/conv.cpp (the definition, the reference), kernels/signatures.h (ConvShape).
//
// What to write: im2col for one image. The rest of the convolution is given
// (student::conv2d_from_im2col in student.h: a GEMM per group, then the bias), and with your
// im2col it is registered as conv2d_forward variant "student" (exercises/student/register.cpp),
// so once it works it trains the digits CNN:
//
//   build/brrr exercises check ex09.1      (the kernel lab checks it against the definition)
//   BRRR_KERNELS=conv2d_forward=student build/brrr cnn
//
// Requirements
//   - col (C_in kH kW, H_out W_out), row-major, from x (C_in, H, W): the row of (ci, kh, kw) is
//     ci kH kW + kh kW + kw, the column of (oh, ow) is oh W_out + ow, and the entry is
//       x[ci, oh stride_h - pad_h + kh dil_h, ow stride_w - pad_w + kw dil_w]
//     or 0 where that position is outside the image (the padding).
//   - Every option of ConvShape: stride, padding (it may exceed the kernel's half-width, so a
//     whole row of col can be padding), dilation, each different along H and W.
//   - Groups need nothing from you: the rows of group g are simply rows g (C_in/groups) kH kW
//     on, and the GEMM reads them there.
//   - Every entry written (col is not zeroed for you), for float and double.
//
// A plan
//   1. Loop over rows (ci, kh, kw), then over (oh, ow); compute ih and iw; write x's value or 0.
//   2. Check it: `brrr exercises check ex09.1`. A mistake in one option fails at the element
//      where it first shows.
//   3. Then make it fast (optional): for a row and an output row, the columns whose iw is
//      inside the image form one range; fill the rest with zeros and copy the inside without
//      a bounds check (kernels/cpu/conv_im2col.cpp does this). Compare the times
//      `brrr exercises check ex09.1` prints.
#include "exercises/student/student.h"

namespace brrr::student {

template <class T>
void im2col(T* col, const T* x, const kernels::ConvShape& s) {
  // TODO(ex09.1): col (C_in kH kW, H_out W_out) from x (C_in, H, W).
  not_written("ex09.1", "im2col");
}

template void im2col<float>(float*, const float*, const kernels::ConvShape&);
template void im2col<double>(double*, const double*, const kernels::ConvShape&);

}  // namespace brrr::student
