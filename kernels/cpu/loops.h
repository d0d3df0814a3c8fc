// Typed elementwise loops over the strided iterator (internal). Values are loaded into the
// accumulation type (f32 for f16/bf16), passed to `f`, and stored back. Each row loop is
// flattened (everything it calls is inlined into it): otherwise GCC may keep a larger `f` (GELU's
// tanh form) as a call per element, and the loop neither vectorises nor runs at speed.
// One copy per instruction set (cpu/isa.h).
#pragma once
#include <cmath>

#include "brisk/core/tensor.h"
#include "brisk/kernels/strided.h"
#include "cpu/isa.h"

namespace brisk::kernels::cpu::BRISK_CPU_ISA {

template <class Tout, class Tin, class F>
void map1(const Tensor& x, const Tensor& out, F f) {
  using A = acc_t<Tin>;
  auto s = coalesce<2>(out.sizes(), {out.strides(), broadcast_strides(x.sizes(), x.strides(), out.sizes())});
  Tout* po = static_cast<Tout*>(out.data_ptr());
  const Tin* px = static_cast<const Tin*>(x.data_ptr());
  for_each_row<2>(
      s, [&](const std::array<int64_t, 2>& off, int64_t n, const std::array<int64_t, 2>& st) __attribute__((flatten)) {
        Tout* o = po + off[0];
        const Tin* a = px + off[1];
        if (st[0] == 1 && st[1] == 1) {
          for (int64_t i = 0; i < n; ++i) o[i] = static_cast<Tout>(f(static_cast<A>(a[i])));
        } else {
          for (int64_t i = 0; i < n; ++i) o[i * st[0]] = static_cast<Tout>(f(static_cast<A>(a[i * st[1]])));
        }
      });
}

template <class Tout, class Tin, class F>
void map2(const Tensor& a, const Tensor& b, const Tensor& out, F f) {
  using A = acc_t<Tin>;
  const Shape& os = out.sizes();
  auto s = coalesce<3>(os, {out.strides(), broadcast_strides(a.sizes(), a.strides(), os),
                            broadcast_strides(b.sizes(), b.strides(), os)});
  Tout* po = static_cast<Tout*>(out.data_ptr());
  const Tin* pa = static_cast<const Tin*>(a.data_ptr());
  const Tin* pb = static_cast<const Tin*>(b.data_ptr());
  for_each_row<3>(
      s, [&](const std::array<int64_t, 3>& off, int64_t n, const std::array<int64_t, 3>& st) __attribute__((flatten)) {
        Tout* o = po + off[0];
        const Tin* x = pa + off[1];
        const Tin* y = pb + off[2];
        if (st[0] == 1 && st[1] == 1 && st[2] == 1) {
          for (int64_t i = 0; i < n; ++i) o[i] = static_cast<Tout>(f(static_cast<A>(x[i]), static_cast<A>(y[i])));
        } else if (st[0] == 1 && st[1] == 1 && st[2] == 0) {
          const A yv = static_cast<A>(y[0]);
          for (int64_t i = 0; i < n; ++i) o[i] = static_cast<Tout>(f(static_cast<A>(x[i]), yv));
        } else if (st[0] == 1 && st[1] == 0 && st[2] == 1) {
          const A xv = static_cast<A>(x[0]);
          for (int64_t i = 0; i < n; ++i) o[i] = static_cast<Tout>(f(xv, static_cast<A>(y[i])));
        } else {
          for (int64_t i = 0; i < n; ++i)
            o[i * st[0]] = static_cast<Tout>(f(static_cast<A>(x[i * st[1]]), static_cast<A>(y[i * st[2]])));
        }
      });
}

// Three inputs of possibly different types (T1, T2, T3), computed in their own acc types.
template <class Tout, class T1, class T2, class T3, class F>
void map3(const Tensor& a, const Tensor& b, const Tensor& c, const Tensor& out, F f) {
  const Shape& os = out.sizes();
  auto s =
      coalesce<4>(os, {out.strides(), broadcast_strides(a.sizes(), a.strides(), os),
                       broadcast_strides(b.sizes(), b.strides(), os), broadcast_strides(c.sizes(), c.strides(), os)});
  Tout* po = static_cast<Tout*>(out.data_ptr());
  const T1* pa = static_cast<const T1*>(a.data_ptr());
  const T2* pb = static_cast<const T2*>(b.data_ptr());
  const T3* pc = static_cast<const T3*>(c.data_ptr());
  for_each_row<4>(
      s, [&](const std::array<int64_t, 4>& off, int64_t n, const std::array<int64_t, 4>& st) __attribute__((flatten)) {
        Tout* o = po + off[0];
        const T1* x = pa + off[1];
        const T2* y = pb + off[2];
        const T3* z = pc + off[3];
        for (int64_t i = 0; i < n; ++i)
          o[i * st[0]] = static_cast<Tout>(f(static_cast<acc_t<T1>>(x[i * st[1]]), static_cast<acc_t<T2>>(y[i * st[2]]),
                                             static_cast<acc_t<T3>>(z[i * st[3]])));
      });
}

}  // namespace brisk::kernels::cpu::BRISK_CPU_ISA
