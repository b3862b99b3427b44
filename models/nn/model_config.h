// ModelConfig: every size a model takes, with defaults that fit the datasets the
// project trains on (Fashion-MNIST 1x28x28, 10 classes; bytes, vocab 256).
//
// The two GPTs share the transformer fields: `gpt` (byte-level, vocab 256, positions
// = seq_len) and `gpt2` (Hugging Face's GPT2LMHeadModel; models/zoo/gpt2.h sets its sizes by
// name, vocab 50257, 1024 positions, dropout 0.1 unless told otherwise).
#pragma once

#include <cstdint>
#include <string>

namespace dpt {

struct ModelConfig {
  uint64_t seed = 1234;
  // Image / feature models.
  int64_t in_channels = 1;
  int64_t image_h = 28;
  int64_t image_w = 28;
  int64_t num_classes = 10;
  // CNN widths (conv1 and conv2 output channels, hidden linear units).
  int64_t cnn_c1 = 16;
  int64_t cnn_c2 = 32;
  int64_t cnn_hidden = 128;
  // ResNet-18: "imagenet" (torchvision's 7x7/2 convolution + 3x3/2 max-pool) or
  // "cifar" (3x3/1 convolution, no max-pool). in_channels adapts conv1 to the data.
  std::string resnet_stem = "imagenet";
  // GPT.
  int64_t vocab = 256;
  int64_t seq_len = 64;      // tokens per training sample
  int64_t d_model = 128;
  int64_t n_layer = 4;
  int64_t n_head = 4;
  int64_t n_positions = 0;   // rows of the position table; 0: seq_len
  float dropout = 0.0f;      // embedding, attention-probability and residual dropout
  float layer_norm_eps = 1e-5f;
  // gpt2: a safetensors file (Hugging Face names) the parameters are loaded from
  // instead of the random initialisation (models/io/gpt2_weights.h).
  std::string init_from;
  // ZeRO-3's sharded build (models/nn/param_store.h): the model keeps only rank
  // resident_rank's shard of resident_world ranks resident; 0 builds it whole.
  int resident_rank = 0;
  int resident_world = 0;
};

}  // namespace dpt
