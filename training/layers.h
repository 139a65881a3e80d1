// The layers of GPT-2, forward and backward side by side, CPU, fp32. Model: llm.c train_gpt2.c.
//
// Every function works on raw, caller-owned, contiguous row-major buffers; shapes are given in
// the comments as (B, T, C) etc. with B = batch, T = sequence length, C = channels, NH = heads,
// V = vocabulary size, OC = output channels. Forward functions WRITE their outputs (and the
// activations they keep for backward). Backward functions ACCUMULATE (+=) into the gradients of
// inputs and parameters, so gradients that flow into one tensor from several places add up and the
// caller zeroes gradients once per step; the few scratch buffers that are written instead are
// marked so. No function allocates, fails or keeps state; none checks its arguments except
// validate_tokens, which callers run on untrusted token ids before encoder_* and crossentropy_*.
// Thread-safety: pure functions of their arguments; concurrent calls on disjoint outputs are safe.
#pragma once

#include <cstddef>

#include "weft/status.h"

namespace weft::training {

// OK when every id in tokens[0, n) lies in [0, vocab_size); otherwise InvalidArgument naming the
// first bad position.
Status validate_tokens(const int* tokens, size_t n, int vocab_size);

// ---- encoder: out[b,t,:] = wte[inp[b,t],:] + wpe[t,:] ----
// out (B,T,C) written; inp (B,T) token ids in [0,V); wte (V,C); wpe (maxT,C) with T <= maxT.
void encoder_forward(float* out, const int* inp, const float* wte, const float* wpe, int B, int T,
                     int C);
// dwte (V,C) +=, dwpe (maxT,C) +=; dout (B,T,C); inp (B,T).
void encoder_backward(float* dwte, float* dwpe, const float* dout, const int* inp, int B, int T,
                      int C);

// ---- layernorm over the last axis, eps = 1e-5 ----
// out (B,T,C) written; mean (B,T) and rstd (B,T) written (kept for backward); inp (B,T,C);
// weight (C); bias (C).
void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int B, int T, int C);
// dinp (B,T,C) +=, dweight (C) +=, dbias (C) +=; dout (B,T,C); inp (B,T,C); weight (C);
// mean, rstd (B,T) from the forward.
void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean, const float* rstd,
                        int B, int T, int C);

// ---- matmul: out = inp @ weight^T + bias (cblas_sgemm) ----
// out (B*T, OC) written; inp (B*T, C); weight (OC, C) (PyTorch's nn.Linear layout); bias (OC) or
// nullptr for none.
void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int BT,
                    int C, int OC);
// dinp (B*T, C) +=, dweight (OC, C) +=, dbias (OC) += (nullptr when the layer has no bias);
// dout (B*T, OC); inp (B*T, C); weight (OC, C).
void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int BT, int C, int OC);

// ---- causal multi-head self-attention ----
// inp (B,T,3C) holds q, k, v side by side along the last axis, each split into NH heads of
// hs = C/NH channels. out (B,T,C) written. preatt (B,NH,T,T) written: scaled scores q.k/sqrt(hs);
// att (B,NH,T,T) written: their causal softmax, kept for backward (entries t2 > t are 0).
// REQUIRES: C % NH == 0.
void attention_forward(float* out, float* preatt, float* att, const float* inp, int B, int T, int C,
                       int NH);
// dinp (B,T,3C) +=. dpreatt, datt (B,NH,T,T): scratch, WRITTEN (no need to zero them first).
// dout (B,T,C); inp (B,T,3C); att (B,NH,T,T) from the forward.
void attention_backward(float* dinp, float* dpreatt, float* datt, const float* dout,
                        const float* inp, const float* att, int B, int T, int C, int NH);

// ---- GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) ----
// out (N) written; inp (N).
void gelu_forward(float* out, const float* inp, size_t N);
// dinp (N) +=; inp (N); dout (N).
void gelu_backward(float* dinp, const float* inp, const float* dout, size_t N);

// ---- residual: out = inp1 + inp2 ----
// out (N) written; inp1, inp2 (N).
void residual_forward(float* out, const float* inp1, const float* inp2, size_t N);
// dinp1 (N) +=, dinp2 (N) +=; dout (N).
void residual_backward(float* dinp1, float* dinp2, const float* dout, size_t N);

// ---- fused softmax + cross-entropy over the vocabulary ----
// losses (B,T) written: -log softmax(logits[b,t,:])[targets[b,t]]; probs (B,T,V) written: the
// softmax, kept for backward; logits (B,T,V); targets (B,T) in [0,V).
void crossentropy_softmax_forward(float* losses, float* probs, const float* logits,
                                  const int* targets, int B, int T, int V);
// dlogits (B,T,V) += dlosses[b,t] * (probs - onehot(targets)); dlosses (B,T) is the gradient of
// the final scalar w.r.t. each position's loss (1/(B*T) for a mean); probs (B,T,V); targets (B,T).
void crossentropy_softmax_backward(float* dlogits, const float* dlosses, const float* probs,
                                   const int* targets, int B, int T, int V);

}  // namespace weft::training
