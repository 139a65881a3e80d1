// GPT-2 layers, forward and backward side by side. See layers.h for shapes and contracts.
#include "training/layers.h"

#include <cblas.h>

#include <cmath>
#include <numbers>
#include <string>

namespace weft::training {

Status validate_tokens(const int* tokens, size_t n, int vocab_size) {
  for (size_t i = 0; i < n; i++) {
    if (tokens[i] < 0 || tokens[i] >= vocab_size) {
      return invalid_argument("token id " + std::to_string(tokens[i]) + " at position " +
                              std::to_string(i) + " is outside the vocabulary [0, " +
                              std::to_string(vocab_size) + ")");
    }
  }
  return Status();
}

// ---------------------------------------------------------------------------------------------
// encoder

void encoder_forward(float* out, const int* inp, const float* wte, const float* wpe, int B, int T,
                     int C) {
  for (int b = 0; b < B; b++) {
    for (int t = 0; t < T; t++) {
      float* out_bt = out + (static_cast<size_t>(b) * T + t) * C;  // (C)
      const float* wte_ix = wte + static_cast<size_t>(inp[b * T + t]) * C;
      const float* wpe_t = wpe + static_cast<size_t>(t) * C;
      for (int i = 0; i < C; i++) out_bt[i] = wte_ix[i] + wpe_t[i];
    }
  }
}

void encoder_backward(float* dwte, float* dwpe, const float* dout, const int* inp, int B, int T,
                      int C) {
  for (int b = 0; b < B; b++) {
    for (int t = 0; t < T; t++) {
      const float* dout_bt = dout + (static_cast<size_t>(b) * T + t) * C;
      float* dwte_ix = dwte + static_cast<size_t>(inp[b * T + t]) * C;
      float* dwpe_t = dwpe + static_cast<size_t>(t) * C;
      for (int i = 0; i < C; i++) {
        dwte_ix[i] += dout_bt[i];
        dwpe_t[i] += dout_bt[i];
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// layernorm

namespace {
constexpr float kLayernormEps = 1e-5f;
}

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int B, int T, int C) {
  for (size_t bt = 0; bt < static_cast<size_t>(B) * T; bt++) {
    const float* x = inp + bt * C;  // (C)
    float m = 0.0f;
    for (int i = 0; i < C; i++) m += x[i];
    m /= static_cast<float>(C);
    float v = 0.0f;  // biased variance, as in PyTorch's LayerNorm
    for (int i = 0; i < C; i++) {
      const float d = x[i] - m;
      v += d * d;
    }
    v /= static_cast<float>(C);
    const float s = 1.0f / std::sqrt(v + kLayernormEps);
    float* y = out + bt * C;
    for (int i = 0; i < C; i++) y[i] = (s * (x[i] - m)) * weight[i] + bias[i];
    mean[bt] = m;
    rstd[bt] = s;
  }
}

void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean, const float* rstd,
                        int B, int T, int C) {
  for (size_t bt = 0; bt < static_cast<size_t>(B) * T; bt++) {
    const float* dy = dout + bt * C;
    const float* x = inp + bt * C;
    float* dx = dinp + bt * C;
    const float m = mean[bt];
    const float s = rstd[bt];
    // Two reductions first: mean(dnorm) and mean(dnorm * norm), with dnorm = weight * dy.
    float dnorm_mean = 0.0f;
    float dnorm_norm_mean = 0.0f;
    for (int i = 0; i < C; i++) {
      const float norm = (x[i] - m) * s;
      const float dnorm = weight[i] * dy[i];
      dnorm_mean += dnorm;
      dnorm_norm_mean += dnorm * norm;
    }
    dnorm_mean /= static_cast<float>(C);
    dnorm_norm_mean /= static_cast<float>(C);
    // Then accumulate: dx = s * (dnorm - mean(dnorm) - norm * mean(dnorm * norm)).
    for (int i = 0; i < C; i++) {
      const float norm = (x[i] - m) * s;
      const float dnorm = weight[i] * dy[i];
      dbias[i] += dy[i];
      dweight[i] += norm * dy[i];
      dx[i] += s * (dnorm - dnorm_mean - norm * dnorm_norm_mean);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// matmul

void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int BT,
                    int C, int OC) {
  // out (BT,OC) = inp (BT,C) @ weight^T (C,OC), then + bias broadcast over rows.
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, BT, OC, C, 1.0f, inp, C, weight, C, 0.0f,
              out, OC);
  if (bias != nullptr) {
    for (size_t r = 0; r < static_cast<size_t>(BT); r++) {
      float* out_r = out + r * OC;
      for (int o = 0; o < OC; o++) out_r[o] += bias[o];
    }
  }
}

void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int BT, int C, int OC) {
  // dinp (BT,C) += dout (BT,OC) @ weight (OC,C).
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, BT, C, OC, 1.0f, dout, OC, weight, C,
              1.0f, dinp, C);
  // dweight (OC,C) += dout^T (OC,BT) @ inp (BT,C).
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, C, BT, 1.0f, dout, OC, inp, C, 1.0f,
              dweight, C);
  // dbias (OC) += column sums of dout.
  if (dbias != nullptr) {
    for (size_t r = 0; r < static_cast<size_t>(BT); r++) {
      const float* dout_r = dout + r * OC;
      for (int o = 0; o < OC; o++) dbias[o] += dout_r[o];
    }
  }
}

// ---------------------------------------------------------------------------------------------
// attention

void attention_forward(float* out, float* preatt, float* att, const float* inp, int B, int T, int C,
                       int NH) {
  const size_t C3 = static_cast<size_t>(C) * 3;
  const int hs = C / NH;  // head size
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  for (int b = 0; b < B; b++) {
    for (int t = 0; t < T; t++) {
      for (int h = 0; h < NH; h++) {
        const float* query_t = inp + (static_cast<size_t>(b) * T + t) * C3 + h * hs;
        const size_t row = ((static_cast<size_t>(b) * NH + h) * T + t) * T;
        float* preatt_bth = preatt + row;  // (T)
        float* att_bth = att + row;        // (T)

        // pass 1: scores q.k * scale for t2 <= t, and their max.
        float maxval = -INFINITY;
        for (int t2 = 0; t2 <= t; t2++) {
          const float* key_t2 = inp + (static_cast<size_t>(b) * T + t2) * C3 + h * hs + C;
          float val = 0.0f;
          for (int i = 0; i < hs; i++) val += query_t[i] * key_t2[i];
          val *= scale;
          if (val > maxval) maxval = val;
          preatt_bth[t2] = val;
        }
        // pass 2: exponentiate and sum; pass 3: normalise. The future t2 > t is masked to 0.
        float expsum = 0.0f;
        for (int t2 = 0; t2 <= t; t2++) {
          const float e = std::exp(preatt_bth[t2] - maxval);
          expsum += e;
          att_bth[t2] = e;
        }
        const float expsum_inv = 1.0f / expsum;
        for (int t2 = 0; t2 < T; t2++) {
          if (t2 <= t) {
            att_bth[t2] *= expsum_inv;
          } else {
            att_bth[t2] = 0.0f;
            preatt_bth[t2] = 0.0f;
          }
        }
        // pass 4: out = att @ v for this head.
        float* out_bth = out + (static_cast<size_t>(b) * T + t) * C + h * hs;  // (hs)
        for (int i = 0; i < hs; i++) out_bth[i] = 0.0f;
        for (int t2 = 0; t2 <= t; t2++) {
          const float* value_t2 = inp + (static_cast<size_t>(b) * T + t2) * C3 + h * hs + 2 * C;
          const float a = att_bth[t2];
          for (int i = 0; i < hs; i++) out_bth[i] += a * value_t2[i];
        }
      }
    }
  }
}

void attention_backward(float* dinp, float* dpreatt, float* datt, const float* dout,
                        const float* inp, const float* att, int B, int T, int C, int NH) {
  const size_t C3 = static_cast<size_t>(C) * 3;
  const int hs = C / NH;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  for (int b = 0; b < B; b++) {
    for (int t = 0; t < T; t++) {
      for (int h = 0; h < NH; h++) {
        const size_t row = ((static_cast<size_t>(b) * NH + h) * T + t) * T;
        const float* att_bth = att + row;
        float* datt_bth = datt + row;
        float* dpreatt_bth = dpreatt + row;
        for (int t2 = 0; t2 < T; t2++) {
          datt_bth[t2] = 0.0f;
          dpreatt_bth[t2] = 0.0f;
        }
        const size_t bt = static_cast<size_t>(b) * T + t;
        const float* query_t = inp + bt * C3 + h * hs;
        float* dquery_t = dinp + bt * C3 + h * hs;
        const float* dout_bth = dout + bt * C + h * hs;

        // backward of pass 4: out = sum_t2 att[t2] v[t2].
        for (int t2 = 0; t2 <= t; t2++) {
          const size_t bt2 = static_cast<size_t>(b) * T + t2;
          const float* value_t2 = inp + bt2 * C3 + h * hs + 2 * C;
          float* dvalue_t2 = dinp + bt2 * C3 + h * hs + 2 * C;
          for (int i = 0; i < hs; i++) {
            datt_bth[t2] += value_t2[i] * dout_bth[i];
            dvalue_t2[i] += att_bth[t2] * dout_bth[i];
          }
        }
        // backward of the softmax: dpreatt[t3] = sum_t2 att[t2] (1[t2==t3] - att[t3]) datt[t2].
        for (int t2 = 0; t2 <= t; t2++) {
          for (int t3 = 0; t3 <= t; t3++) {
            const float indicator = t2 == t3 ? 1.0f : 0.0f;
            dpreatt_bth[t3] += att_bth[t2] * (indicator - att_bth[t3]) * datt_bth[t2];
          }
        }
        // backward of pass 1: preatt[t2] = scale * q . k[t2].
        for (int t2 = 0; t2 <= t; t2++) {
          const size_t bt2 = static_cast<size_t>(b) * T + t2;
          const float* key_t2 = inp + bt2 * C3 + h * hs + C;
          float* dkey_t2 = dinp + bt2 * C3 + h * hs + C;
          const float d = dpreatt_bth[t2] * scale;
          for (int i = 0; i < hs; i++) {
            dquery_t[i] += key_t2[i] * d;
            dkey_t2[i] += query_t[i] * d;
          }
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// GELU

namespace {
const float kGeluScale = std::sqrt(2.0f / std::numbers::pi_v<float>);
}

void gelu_forward(float* out, const float* inp, size_t N) {
  for (size_t i = 0; i < N; i++) {
    const float x = inp[i];
    const float cube = 0.044715f * x * x * x;
    out[i] = 0.5f * x * (1.0f + std::tanh(kGeluScale * (x + cube)));
  }
}

void gelu_backward(float* dinp, const float* inp, const float* dout, size_t N) {
  for (size_t i = 0; i < N; i++) {
    const float x = inp[i];
    const float cube = 0.044715f * x * x * x;
    const float tanh_arg = kGeluScale * (x + cube);
    const float tanh_out = std::tanh(tanh_arg);
    const float sech2 = 1.0f - tanh_out * tanh_out;  // sech^2 = 1 - tanh^2
    const float local_grad = 0.5f * (1.0f + tanh_out) +
                             x * 0.5f * sech2 * kGeluScale * (1.0f + 3.0f * 0.044715f * x * x);
    dinp[i] += local_grad * dout[i];
  }
}

// ---------------------------------------------------------------------------------------------
// residual

void residual_forward(float* out, const float* inp1, const float* inp2, size_t N) {
  for (size_t i = 0; i < N; i++) out[i] = inp1[i] + inp2[i];
}

void residual_backward(float* dinp1, float* dinp2, const float* dout, size_t N) {
  for (size_t i = 0; i < N; i++) {
    dinp1[i] += dout[i];
    dinp2[i] += dout[i];
  }
}

// ---------------------------------------------------------------------------------------------
// softmax + cross-entropy

void crossentropy_softmax_forward(float* losses, float* probs, const float* logits,
                                  const int* targets, int B, int T, int V) {
  for (size_t bt = 0; bt < static_cast<size_t>(B) * T; bt++) {
    const float* logits_bt = logits + bt * V;  // (V)
    float* probs_bt = probs + bt * V;          // (V)
    float maxval = -INFINITY;
    for (int i = 0; i < V; i++) {
      if (logits_bt[i] > maxval) maxval = logits_bt[i];
    }
    float sum = 0.0f;
    for (int i = 0; i < V; i++) {
      probs_bt[i] = std::exp(logits_bt[i] - maxval);
      sum += probs_bt[i];
    }
    const float sum_inv = 1.0f / sum;
    for (int i = 0; i < V; i++) probs_bt[i] *= sum_inv;
    // -log p[target] from the logits directly (log-sum-exp), so a tiny probability does not
    // underflow to -log(0).
    losses[bt] = std::log(sum) + maxval - logits_bt[targets[bt]];
  }
}

void crossentropy_softmax_backward(float* dlogits, const float* dlosses, const float* probs,
                                   const int* targets, int B, int T, int V) {
  for (size_t bt = 0; bt < static_cast<size_t>(B) * T; bt++) {
    float* dlogits_bt = dlogits + bt * V;
    const float* probs_bt = probs + bt * V;
    const float dloss = dlosses[bt];
    const int ix = targets[bt];
    for (int i = 0; i < V; i++) {
      const float indicator = i == ix ? 1.0f : 0.0f;
      dlogits_bt[i] += (probs_bt[i] - indicator) * dloss;
    }
  }
}

}  // namespace weft::training
