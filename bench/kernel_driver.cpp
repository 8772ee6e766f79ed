// Built by bench/kernel_kinds.py with -include core/model/causal_attention.cpp: the kernel on fixed inputs.
#include <cstdio>
#include <cmath>
#include <vector>
int main() {
  const int B = 3, T = 37, H = 2, D = 32;
  std::vector<float> qkv(B * T * 3 * H * D), cs(T * D), sn(T * D), z(B * T * H * D), st(B * H * T * 2), dz(B * T * H * D), g(qkv.size()), P(B * H * T * T);
  unsigned s = 12345;
  auto rnd = [&]() { s = s * 1103515245u + 12345u; return ((s >> 8) & 0xffff) / 32768.0f - 1.0f; };
  for (auto& x : qkv) x = 2 * rnd();
  for (auto& x : dz) x = rnd();
  for (int t = 0; t < T; ++t) for (int j = 0; j < D / 2; ++j) {
    float th = t * std::pow(10000.0f, -2.0f * j / D);
    cs[t * D + 2 * j] = cs[t * D + 2 * j + 1] = std::cos(th);
    sn[t * D + 2 * j] = -std::sin(th); sn[t * D + 2 * j + 1] = std::sin(th);
  }
  attn_forward_f32(qkv.data(), cs.data(), sn.data(), B, T, H, D, 1, z.data(), P.data(), st.data());
  attn_backward_f32(qkv.data(), cs.data(), sn.data(), z.data(), st.data(), dz.data(), B, T, H, D, 1, g.data());
  double sz = 0, sg = 0, sp = 0;
  for (float x : z) sz += std::fabs(x);
  for (float x : g) sg += std::fabs(x);
  for (float x : P) sp += x;
  std::printf("vec %d bytes | sum|z| %.6f sum|g| %.6f sum P %.4f z[5] %.6f g[77] %.6f\n", kVecBytes, sz, sg, sp, z[5], g[77]);
}
