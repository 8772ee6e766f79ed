// Causal attention of TinyCharLM's training forward, one fused pass per (sequence, head).
// Built and called by core/model/attention_cpp.py (plain C ABI through ctypes: no torch headers, so
// the build takes about 2.5 CPU-seconds). Computes what core.model.hooks.attend computes, in this layout:
//
//   qkv [B, T, 3, H, D]   the fused projection; q and k columns in pair_order (rotary pair (2j, 2j+1))
//   cs, sn [T, D]         per coordinate of q and k in pair_order: cos(t theta_j) at 2j and 2j+1,
//                         sin(t theta_j) at 2j + 1 and its negative at 2j (so rot(x) = x cs + swap(x) sn)
//   z  [B, T, H, D]       every head's A v
//   P  [B, H, T, T]       the pattern (zero above the diagonal), written only when the caller asks
//                         for it (else null); the backward does not read it
//   stats [B, H, T, 2]    each row's softmax max and 1 / sum, kept by the forward when a gradient
//                         is needed (else null): the backward recomputes the pattern's rows from them
//                         and q, k (the same floats), instead of reading a [B, H, T, T] pattern back
//   g  [B, T, 3, H, D]    d loss / d qkv
//
// A head's q, k, v (12 KB at T = 96, D = 32) are packed rotated into contiguous buffers (a sequence's
// heads at a time) that stay in cache; every product is a register tile (MR rows x NV vectors) that broadcasts one element of A and
// multiplies it with contiguous vectors of B, so g++ vectorises it without reassociating any sum
// (each output is summed in index order; only the softmax's max and sum and the dz . z row sums are
// summed lane-wise, in a fixed order). hold >= 0 is the held head: its pattern is one-hot on i - 1
// (row 0 on 0) and its q and k get no gradient.
//
// z and g are written with plain stores: the products that follow (z W_O; g's two, dW and dh) read
// them from the cache. Streamed past the caches, a default training step took 1.0-1.5 ms longer on
// AVX-512 (30.1 against 28.6 CPU-ms in situ), although the kernel alone was a little faster.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

namespace {

// One vector is one register of the machine the library is built for (-march): 64 bytes with
// AVX-512, 32 with AVX2, 16 elsewhere (SSE, NEON). A 64-byte vector in an AVX2 build is split by g++
// into register pairs whose tiles spill and whose shuffles go scalar: 13x slower than the eager kernel.
#if defined(__AVX512F__)
constexpr int kVecBytes = 64;
#elif defined(__AVX__)
constexpr int kVecBytes = 32;
#else
constexpr int kVecBytes = 16;
#endif

template <typename T> struct Vec;
template <> struct Vec<float> {
  typedef float type __attribute__((vector_size(kVecBytes)));
  typedef int itype __attribute__((vector_size(kVecBytes)));
  static constexpr int W = kVecBytes / 4;
};
template <> struct Vec<double> {
  typedef double type __attribute__((vector_size(kVecBytes)));
  typedef long long itype __attribute__((vector_size(kVecBytes)));
  static constexpr int W = kVecBytes / 8;
};

template <typename T> using V = typename Vec<T>::type;
template <typename T> using VI = typename Vec<T>::itype;

template <typename T> inline VI<T> iota() { VI<T> v; for (int l = 0; l < Vec<T>::W; ++l) v[l] = l; return v; }
// (x1, x0, x3, x2, ...): each rotary pair's two coordinates swapped
template <typename T> inline V<T> swap_pairs(V<T> x) { VI<T> m; for (int l = 0; l < Vec<T>::W; ++l) m[l] = l ^ 1; return __builtin_shuffle(x, m); }

template <typename T> inline V<T> loadu(const T* p) { V<T> v; std::memcpy(&v, p, sizeof v); return v; }
template <typename T> inline void storeu(T* p, V<T> v) { std::memcpy(p, &v, sizeof v); }
// Horizontal sum and max of a vector as a tree of halves (a fixed order, log2 W dependent steps). The
// halves are taken by shuffles, not copied out through memory: with memcpy the softmax's running max
// and sum vectors lived on the stack, stored and reloaded every iteration of their loops.
template <typename T, int Bytes> struct Part { typedef T type __attribute__((vector_size(Bytes))); };
template <int Off, typename VT, std::size_t... I> inline auto half_of(VT v, std::index_sequence<I...>) {
  return __builtin_shufflevector(v, v, (int)(Off + I)...);
}
template <typename T, int Bytes, bool Max>
inline T fold(typename Part<T, Bytes>::type v) {
  if constexpr (Bytes == 2 * sizeof(T)) {
    return Max ? (v[1] > v[0] ? v[1] : v[0]) : v[0] + v[1];
  } else {
    constexpr int N = Bytes / sizeof(T) / 2;
    const typename Part<T, Bytes / 2>::type lo = half_of<0>(v, std::make_index_sequence<N>());
    const typename Part<T, Bytes / 2>::type hi = half_of<N>(v, std::make_index_sequence<N>());
    return fold<T, Bytes / 2, Max>(Max ? (hi > lo ? hi : lo) : lo + hi);
  }
}
template <typename T> inline T hsum(V<T> v) { return fold<T, sizeof(V<T>), false>(v); }
template <typename T> inline T hmax(V<T> v) { return fold<T, sizeof(V<T>), true>(v); }

inline int round_up(int n, int m) { return (n + m - 1) / m * m; }

// n (= D, at most a few hundred) elements: whole vectors when n is a multiple of the width (a memcpy
// call per row of a head was 8% of the kernel's time, most rows being 128 bytes).
template <typename T> inline void copy_row(T* dst, const T* src, int n) {
  if (n % Vec<T>::W == 0)
    for (int d = 0; d < n; d += Vec<T>::W) storeu(dst + d, loadu(src + d));
  else
    std::memcpy(dst, src, sizeof(T) * n);
}

// A W x W block transposed in registers: log2 W stages, stage b swapping bit b of the row index with
// bit b of the column index through two-source shuffles of row pairs (no arithmetic: the same floats).
template <typename T, int Bit> inline void transpose_stage(V<T>* r) {
  constexpr int W = Vec<T>::W;
  VI<T> lo, hi;
#pragma GCC unroll 16
  for (int j = 0; j < W; ++j) {
    lo[j] = (j & Bit) ? W + j - Bit : j;
    hi[j] = (j & Bit) ? W + j : j + Bit;
  }
#pragma GCC unroll 16
  for (int i = 0; i < W; ++i) {
    if (i & Bit) continue;
    const V<T> a = r[i], b = r[i + Bit];
    r[i] = __builtin_shuffle(a, b, lo);
    r[i + Bit] = __builtin_shuffle(a, b, hi);
  }
  if constexpr (Bit > 1) transpose_stage<T, Bit / 2>(r);
}
template <typename T> inline void transpose_block(V<T>* r) { transpose_stage<T, Vec<T>::W / 2>(r); }
// dst[d][t] = src[t][d] for d < D, t < rows (a multiple of W; src rows lds apart with at least
// round_up(D, W) readable columns, dst rows ldd apart), in W x W blocks: a strided scalar store per
// element (the old pack_row's K^T and V^T) was about a tenth of the forward's own samples and a sixth of
// the backward's under perf.
template <typename T> void transpose(const T* src, long lds, int rows, int D, T* dst, long ldd) {
  constexpr int W = Vec<T>::W;
  V<T> r[W];
  for (int t0 = 0; t0 < rows; t0 += W)
    for (int d0 = 0; d0 < D; d0 += W) {
#pragma GCC unroll 16
      for (int l = 0; l < W; ++l) r[l] = loadu(src + (long)(t0 + l) * lds + d0);
      transpose_block<T>(r);
      if (d0 + W <= D) {
#pragma GCC unroll 16
        for (int l = 0; l < W; ++l) storeu(dst + (long)(d0 + l) * ldd + t0, r[l]);
      } else {
        for (int l = 0; l < D - d0; ++l) storeu(dst + (long)(d0 + l) * ldd + t0, r[l]);
      }
    }
}

// exp on x <= 0 (softmax arguments): Cephes' expf polynomial, about 1 ulp; below -87.3 it gives
// 2^-126 (callers zero the masked lanes).
inline V<float> vexp(V<float> x) {
  const V<float> lo = V<float>{} - 87.3365447f, hi = V<float>{} + 88.3762626f;
  x = x < lo ? lo : x;
  x = x > hi ? hi : x;
  const float magic = 12582912.0f;  // 1.5 * 2^23: adding and subtracting it rounds to an integer
  V<float> n = (x * 1.44269504088896341f + magic) - magic;
  V<float> r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  V<float> y = r * 1.9875691500E-4f + 1.3981999507E-3f;
  y = y * r + 8.3334519073E-3f;
  y = y * r + 4.1665795894E-2f;
  y = y * r + 1.6666665459E-1f;
  y = y * r + 5.0000001201E-1f;
  y = y * (r * r) + r + 1.0f;
  VI<float> e = (__builtin_convertvector(n, VI<float>) + 127) << 23;
  return y * (V<float>)e;
}
inline V<double> vexp(V<double> x) {
  for (int l = 0; l < Vec<double>::W; ++l) x[l] = std::exp(x[l]);
  return x;
}

// out[r][c] = sum_{k0 <= k < k1} A[r * am + k * ak] * B[k * ldb + c * W .. + W], r < MR, c < NV.
template <typename T, int MR, int NV>
inline void tile(const T* A, long am, long ak, const T* B, long ldb, int k0, int k1, V<T>* out) {
  constexpr int W = Vec<T>::W;
  V<T> acc[MR][NV];
  for (int r = 0; r < MR; ++r)
    for (int c = 0; c < NV; ++c) acc[r][c] = V<T>{};
  for (int k = k0; k < k1; ++k) {
    V<T> b[NV];
    for (int c = 0; c < NV; ++c) b[c] = loadu(B + (long)k * ldb + c * W);
    for (int r = 0; r < MR; ++r) {
      const T a = A[r * am + (long)k * ak];
      for (int c = 0; c < NV; ++c) acc[r][c] += a * b[c];
    }
  }
  for (int r = 0; r < MR; ++r)
    for (int c = 0; c < NV; ++c) out[r * NV + c] = acc[r][c];
}

constexpr int MR = 6;  // rows of a register tile: 6 x 2 accumulators + 2 loads fit AVX-512's 32 registers

template <typename T, int NV>
inline void tile_rows(int mr, const T* A, long am, long ak, const T* B, long ldb, int k0, int k1, V<T>* out) {
  switch (mr) {
    case 6: tile<T, 6, NV>(A, am, ak, B, ldb, k0, k1, out); break;
    case 5: tile<T, 5, NV>(A, am, ak, B, ldb, k0, k1, out); break;
    case 4: tile<T, 4, NV>(A, am, ak, B, ldb, k0, k1, out); break;
    case 3: tile<T, 3, NV>(A, am, ak, B, ldb, k0, k1, out); break;
    case 2: tile<T, 2, NV>(A, am, ak, B, ldb, k0, k1, out); break;
    default: tile<T, 1, NV>(A, am, ak, B, ldb, k0, k1, out); break;
  }
}

// C[r][0 .. nvec * W) = sum_{k0 <= k < k1} A(r, k) B[k][..] for r < mr (<= MR), C's rows ldc apart.
template <typename T>
void product(int mr, int nvec, const T* A, long am, long ak, const T* B, long ldb, int k0, int k1, T* C, long ldc) {
  constexpr int W = Vec<T>::W;
  V<T> out[MR * 2];
  int c = 0;
  for (; c + 2 <= nvec; c += 2) {
    tile_rows<T, 2>(mr, A, am, ak, B + c * W, ldb, k0, k1, out);
    for (int r = 0; r < mr; ++r) { storeu(C + r * ldc + c * W, out[r * 2]); storeu(C + r * ldc + (c + 1) * W, out[r * 2 + 1]); }
  }
  if (c < nvec) {
    tile_rows<T, 1>(mr, A, am, ak, B + c * W, ldb, k0, k1, out);
    for (int r = 0; r < mr; ++r) storeu(C + r * ldc + c * W, out[r]);
  }
}

// One head's packed operands and scratch, sized for T x D, reused across heads.
template <typename T>
struct Head {
  int Tn, D, Dp, Tp, half;
  std::vector<T> Q, K, Vv, KT, VT, dZ, dQ, dK, dV, S, dS, delta, Zt;
  Head(int Tn_, int D_) : Tn(Tn_), D(D_) {
    Dp = round_up(D, Vec<T>::W);
    Tp = round_up(Tn, Vec<T>::W);
    half = D / 2;
    // Q, K, Vv have Tp rows, those past Tn zero: K^T and V^T are transposed from them in whole blocks
    for (auto* b : {&Q, &K, &Vv}) b->assign((size_t)Tp * Dp, T(0));
    for (auto* b : {&dZ, &dQ, &dK, &dV}) b->assign((size_t)Tn * Dp, T(0));
    for (auto* b : {&KT, &VT}) b->assign((size_t)D * Tp, T(0));
    S.assign((size_t)MR * Tp, T(0));
    dS.assign((size_t)Tn * Tp, T(0));
    delta.assign(Tn, T(0));
    Zt.assign((size_t)MR * Dp, T(0));
  }
  // Row t of q (rotated, scaled by 1/sqrt(D)) and k (rotated) into Q, K [Tp][Dp], v into Vv.
  // q, k, v: this head's row t in qkv.
  void pack_row(int t, const T* q, const T* k, const T* v, const T* cs, const T* sn, bool copy_v = true) {
    const T scale = T(1) / std::sqrt(T(D));
    {
      T* Qt = Q.data() + (long)t * Dp;
      T* Kt = K.data() + (long)t * Dp;
      const T* c = cs + (long)t * D;
      const T* s = sn + (long)t * D;
      if (D % Vec<T>::W == 0) {
        for (int d = 0; d < D; d += Vec<T>::W) {
          const V<T> cv = loadu(c + d), sv = loadu(s + d), qv = loadu(q + d), kv = loadu(k + d);
          storeu(Qt + d, (qv * cv + swap_pairs<T>(qv) * sv) * scale);
          storeu(Kt + d, kv * cv + swap_pairs<T>(kv) * sv);
        }
      } else {
        for (int j = 0; j < half; ++j) {
          Qt[2 * j] = (q[2 * j] * c[2 * j] + q[2 * j + 1] * s[2 * j]) * scale;
          Qt[2 * j + 1] = (q[2 * j + 1] * c[2 * j + 1] + q[2 * j] * s[2 * j + 1]) * scale;
          Kt[2 * j] = k[2 * j] * c[2 * j] + k[2 * j + 1] * s[2 * j];
          Kt[2 * j + 1] = k[2 * j + 1] * c[2 * j + 1] + k[2 * j] * s[2 * j + 1];
        }
      }
      if (copy_v) copy_row(Vv.data() + (long)t * Dp, v, D);
    }
  }
  // K^T into KT (the scores) once all rows are packed, in the backward V^T into VT too (dA)
  void transpose_kv(bool forward) {
    transpose(K.data(), Dp, Tp, D, KT.data(), Tp);
    if (!forward) transpose(Vv.data(), Dp, Tp, D, VT.data(), Tp);
  }
};

// Row i of the pattern over s[0 .. ncol) from its scores there: exp(s - mx) / sum masked to keys
// j <= i (zero above the diagonal). The forward finds mx and inv = 1 / sum (and keeps them in stat
// when stat is not null); the backward passes them back (recompute) and gets the same floats.
template <typename T>
inline void softmax_row(T* s, int i, int ncol, T* stat) {
  constexpr int W = Vec<T>::W;
  const VI<T> lane = iota<T>();
  const V<T> ninf = V<T>{} - std::numeric_limits<T>::infinity(), zero = V<T>{};
  V<T> m = ninf;
  for (int c = 0; c < ncol; c += W) {
    V<T> x = lane + c <= i ? loadu(s + c) : ninf;
    m = x > m ? x : m;
  }
  const T mx = hmax<T>(m);
  V<T> acc = zero;
  for (int c = 0; c < ncol; c += W) {
    V<T> e = lane + c <= i ? vexp(loadu(s + c) - mx) : zero;
    storeu(s + c, e);
    acc += e;
  }
  const T inv = T(1) / hsum<T>(acc);
  for (int c = 0; c < ncol; c += W) storeu(s + c, loadu(s + c) * inv);
  if (stat) { stat[0] = mx; stat[1] = inv; }
}
template <typename T>
inline void pattern_row(const T* s, int i, int ncol, T mx, T inv, T* out) {
  constexpr int W = Vec<T>::W;
  const VI<T> lane = iota<T>();
  for (int c = 0; c < ncol; c += W) {
    const V<T> e = lane + c <= i ? vexp(loadu(s + c) - mx) : V<T>{};
    storeu(out + c, e * inv);
  }
}

// stats [B, H, T, 2]: each row's (max, 1 / sum) for the backward's recompute (null: not kept); the
// held head's are not written (its pattern is known).
// The heads' packed operands and scratch, and the backward's pattern rows Pl, kept from call to call
// on this thread (a training calls with the same sizes every block and step) instead of allocated and
// zero-filled per call. Reuse is safe for the same (T, D, H): every buffer is written over the same
// regions on every call (they depend on T and D only), so what was zero stays zero.
template <typename T>
struct Scratch {
  int Tn = -1, D = -1, H = -1;
  std::vector<Head<T>> heads;
  std::vector<T> Pl;
  std::vector<Head<T>>& get(int Tn_, int D_, int H_) {
    if (Tn_ != Tn || D_ != D || H_ != H) {
      heads.assign(H_, Head<T>(Tn_, D_));
      Pl.assign((size_t)Tn_ * heads[0].Tp, T(0));
      Tn = Tn_, D = D_, H = H_;
    }
    return heads;
  }
};
template <typename T> Scratch<T>& scratch(bool backward) {
  thread_local Scratch<T> fwd, bwd;
  return backward ? bwd : fwd;
}

template <typename T>
void forward_head(Head<T>& hd, int H, int b, int h, bool held, const T* Vr, long ldv, T* z, T* P, T* stats) {
  constexpr int W = Vec<T>::W;
  const int Tn = hd.Tn, D = hd.D, Dp = hd.Dp, Tp = hd.Tp;
  T* Ph = P ? P + ((long)b * H + h) * Tn * Tn : nullptr;  // P null: the pattern is not kept
  T* St = stats ? stats + ((long)b * H + h) * Tn * 2 : nullptr;
  for (int i0 = 0; i0 < Tn; i0 += MR) {
    const int mr = std::min(MR, Tn - i0), kend = i0 + mr;
    if (held) {
      for (int r = 0; r < mr; ++r) {
        T* s = hd.S.data() + (long)r * Tp;
        std::fill(s, s + kend, T(0));
        s[std::max(i0 + r - 1, 0)] = T(1);
        if (Ph) {
          T* Pi = Ph + (long)(i0 + r) * Tn;
          std::fill(Pi, Pi + Tn, T(0));
          Pi[std::max(i0 + r - 1, 0)] = T(1);
        }
      }
    } else {
      const int ncol = std::min(round_up(kend, W), Tp);
      product<T>(mr, ncol / W, hd.Q.data() + (long)i0 * Dp, Dp, 1, hd.KT.data(), Tp, 0, D, hd.S.data(), Tp);
      for (int r = 0; r < mr; ++r) {  // masked softmax of row i, the mask applied in registers
        const int i = i0 + r;
        T* s = hd.S.data() + (long)r * Tp;
        softmax_row<T>(s, i, ncol, St ? St + 2 * i : nullptr);
        if (Ph) {
          T* Pi = Ph + (long)i * Tn;
          const int n = std::min(ncol, Tn);
          std::memcpy(Pi, s, sizeof(T) * n);
          std::fill(Pi + n, Pi + Tn, T(0));
        }
      }
    }
    // z rows i0 .. i0 + mr = the pattern rows (still in S, zero above the diagonal) . V over keys 0 .. kend
    product<T>(mr, Dp / W, hd.S.data(), Tp, 1, Vr, ldv, 0, kend, hd.Zt.data(), Dp);
    for (int r = 0; r < mr; ++r)
      copy_row(z + ((long)b * Tn + i0 + r) * H * D + (long)h * D, hd.Zt.data() + (long)r * Dp, D);
  }
}

// The backward recomputes the pattern from Q, K and the forward's stats into Pl [Tn][Tp] (shared by the
// heads; each row i written over [0, ncol(i)) only, so the rest stays zero), instead of reading a
// [B, H, T, T] pattern the forward wrote: its rows are the forward's floats (same product, same exp).
template <typename T>
void backward_head(Head<T>& hd, T* Pl, const T* stats, int H, int b, int h, bool held) {
  constexpr int W = Vec<T>::W;
  const int Tn = hd.Tn, D = hd.D, Dp = hd.Dp, Tp = hd.Tp;
  const T* St = stats + ((long)b * H + h) * Tn * 2;
  for (int i0 = 0; i0 < Tn; i0 += MR) {
    const int mr = std::min(MR, Tn - i0), kend = i0 + mr;
    const int ncol = std::min(round_up(kend, W), Tp);
    if (held) {
      for (int r = 0; r < mr; ++r) {
        T* row = Pl + (long)(i0 + r) * Tp;
        std::fill(row, row + ncol, T(0));
        row[std::max(i0 + r - 1, 0)] = T(1);
      }
      continue;
    }
    product<T>(mr, ncol / W, hd.Q.data() + (long)i0 * Dp, Dp, 1, hd.KT.data(), Tp, 0, D, hd.S.data(), Tp);
    for (int r = 0; r < mr; ++r)
      pattern_row<T>(hd.S.data() + (long)r * Tp, i0 + r, ncol, St[2 * (i0 + r)], St[2 * (i0 + r) + 1],
                     Pl + (long)(i0 + r) * Tp);
    product<T>(mr, ncol / W, hd.dZ.data() + (long)i0 * Dp, Dp, 1, hd.VT.data(), Tp, 0, D, hd.S.data(), Tp);
    for (int r = 0; r < mr; ++r) {
      const int i = i0 + r;
      const T* dp = hd.S.data() + (long)r * Tp;
      const T* Pi = Pl + (long)i * Tp;
      T* dsi = hd.dS.data() + (long)i * Tp;
      const T di = hd.delta[i];
      for (int c = 0; c < ncol; c += W)  // dS = A (dA - dz . z), zero above the diagonal as A is
        storeu(dsi + c, loadu(Pi + c) * (loadu(dp + c) - di));
    }
    // dQ rows i0 .. = dS rows . K over keys 0 .. kend
    product<T>(mr, Dp / W, hd.dS.data() + (long)i0 * Tp, Tp, 1, hd.K.data(), Dp, 0, kend, hd.dQ.data() + (long)i0 * Dp, Dp);
  }
  // dV = P^T dZ: key rows j, summed over queries i >= j
  for (int j0 = 0; j0 < Tn; j0 += MR) {
    const int mr = std::min(MR, Tn - j0);
    product<T>(mr, Dp / W, Pl + j0, 1, Tp, hd.dZ.data(), Dp, j0, Tn, hd.dV.data() + (long)j0 * Dp, Dp);
  }
  if (!held) {
    // dK = dS^T Q: key rows j, summed over queries i >= j
    for (int j0 = 0; j0 < Tn; j0 += MR) {
      const int mr = std::min(MR, Tn - j0);
      product<T>(mr, Dp / W, hd.dS.data() + j0, 1, Tp, hd.Q.data(), Dp, j0, Tn, hd.dK.data() + (long)j0 * Dp, Dp);
    }
  }
}

// Row t of this head's gradient: gq, gk, gv its row t in g (q's and k's rotated back).
template <typename T>
void write_grad_row(const Head<T>& hd, int t, const T* cs, const T* sn, bool held, T* gq, T* gk, T* gv) {
  constexpr int W = Vec<T>::W;
  const int D = hd.D, Dp = hd.Dp, half = hd.half;
  const T scale = T(1) / std::sqrt(T(D));
  {
    copy_row(gv, hd.dV.data() + (long)t * Dp, D);
    if (held) {
      std::fill(gq, gq + D, T(0));
      std::fill(gk, gk + D, T(0));
      return;
    }
    const T* dq = hd.dQ.data() + (long)t * Dp;
    const T* dk = hd.dK.data() + (long)t * Dp;
    const T* c = cs + (long)t * D;  // the inverse rotation (the transpose), q's with the scale
    const T* s = sn + (long)t * D;
    if (D % W == 0) {
      for (int d = 0; d < D; d += W) {
        const V<T> cv = loadu(c + d), sv = loadu(s + d), qv = loadu(dq + d), kv = loadu(dk + d);
        storeu(gq + d, (qv * cv - swap_pairs<T>(qv) * sv) * scale);
        storeu(gk + d, kv * cv - swap_pairs<T>(kv) * sv);
      }
    } else {
      for (int j = 0; j < half; ++j) {
        gq[2 * j] = (dq[2 * j] * c[2 * j] - dq[2 * j + 1] * s[2 * j]) * scale;
        gq[2 * j + 1] = (dq[2 * j + 1] * c[2 * j + 1] - dq[2 * j] * s[2 * j + 1]) * scale;
        gk[2 * j] = dk[2 * j] * c[2 * j] - dk[2 * j + 1] * s[2 * j];
        gk[2 * j + 1] = dk[2 * j + 1] * c[2 * j + 1] - dk[2 * j] * s[2 * j + 1];
      }
    }
  }
}

// Both take a sequence at a time: its rows of qkv (and in the backward dz, z and g) are read and
// written in one sequential sweep for all heads, then each head runs (backward 3.9-4.2 -> 3.2 ms at
// the default sizes against a sweep per head). There are no software prefetches of the next sequence's
// rows: with plain stores the hardware's own prefetch does as well. Alone, one block's forward +
// backward took 4.8 CPU-ms with them and 4.5 without on AVX-512 (5.8 and 5.4 in an AVX2 build); a
// default training step the same within noise (30.8 and 31.1 ms, quartiles 29.9-32.1).
template <typename T>
void forward(const T* qkv, const T* cs, const T* sn, int B, int Tn, int H, int D, int hold, T* z, T* P, T* stats) {
  const long HD = (long)H * D;
  std::vector<Head<T>>& heads = scratch<T>(false).get(Tn, D, H);
  constexpr int W = Vec<T>::W;
  // D a whole number of vectors: the product A v reads v's rows in qkv where they are (in cache: this
  // sequence's rows were just read for q and k), not a packed copy
  const bool v_direct = D % W == 0;
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < Tn; ++t) {
      const T* row = qkv + ((long)b * Tn + t) * 3 * HD;
      for (int h = 0; h < H; ++h)
        heads[h].pack_row(t, row + h * D, row + HD + h * D, row + 2 * HD + h * D, cs, sn, !v_direct);
    }
    for (int h = 0; h < H; ++h) {
      heads[h].transpose_kv(true);
      const T* Vr = v_direct ? qkv + (long)b * Tn * 3 * HD + 2 * HD + (long)h * D : heads[h].Vv.data();
      forward_head(heads[h], H, b, h, h == hold, Vr, v_direct ? 3 * HD : heads[h].Dp, z, P, stats);
    }
  }
}

template <typename T>
void backward(const T* qkv, const T* cs, const T* sn, const T* z, const T* stats, const T* dz, int B, int Tn, int H,
              int D, int hold, T* g) {
  constexpr int W = Vec<T>::W;
  Scratch<T>& sc = scratch<T>(true);
  std::vector<Head<T>>& heads = sc.get(Tn, D, H);
  std::vector<T>& Pl = sc.Pl;
  const long HD = (long)H * D;
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < Tn; ++t) {
      const T* row = qkv + ((long)b * Tn + t) * 3 * HD;
      const T* dzt = dz + ((long)b * Tn + t) * HD;
      const T* zt = z + ((long)b * Tn + t) * HD;
      for (int h = 0; h < H; ++h) {
        Head<T>& hd = heads[h];
        hd.pack_row(t, row + h * D, row + HD + h * D, row + 2 * HD + h * D, cs, sn);
        const T* dzh = dzt + h * D;
        const T* zh = zt + h * D;
        copy_row(hd.dZ.data() + (long)t * hd.Dp, dzh, D);
        T s = 0;  // sum_j A_tj dA_tj = dz_t . z_t
        if (D % W == 0) {
          V<T> acc = V<T>{};
          for (int d = 0; d < D; d += W) acc += loadu(dzh + d) * loadu(zh + d);
          s = hsum<T>(acc);
        } else {
          for (int d = 0; d < D; ++d) s += dzh[d] * zh[d];
        }
        hd.delta[t] = s;
      }
    }
    for (int h = 0; h < H; ++h) {
      heads[h].transpose_kv(false);
      backward_head(heads[h], Pl.data(), stats, H, b, h, h == hold);
    }
    for (int t = 0; t < Tn; ++t) {
      T* row = g + ((long)b * Tn + t) * 3 * HD;
      for (int h = 0; h < H; ++h)
        write_grad_row(heads[h], t, cs, sn, h == hold, row + h * D, row + HD + h * D, row + 2 * HD + h * D);
    }
  }
}

}  // namespace

extern "C" {
void attn_forward_f32(const float* qkv, const float* cs, const float* sn, int B, int T, int H, int D, int hold,
                      float* z, float* P, float* stats) { forward(qkv, cs, sn, B, T, H, D, hold, z, P, stats); }
void attn_forward_f64(const double* qkv, const double* cs, const double* sn, int B, int T, int H, int D, int hold,
                      double* z, double* P, double* stats) { forward(qkv, cs, sn, B, T, H, D, hold, z, P, stats); }
void attn_backward_f32(const float* qkv, const float* cs, const float* sn, const float* z, const float* stats,
                       const float* dz, int B, int T, int H, int D, int hold, float* g) {
  backward(qkv, cs, sn, z, stats, dz, B, T, H, D, hold, g);
}
void attn_backward_f64(const double* qkv, const double* cs, const double* sn, const double* z, const double* stats,
                       const double* dz, int B, int T, int H, int D, int hold, double* g) {
  backward(qkv, cs, sn, z, stats, dz, B, T, H, D, hold, g);
}
}
