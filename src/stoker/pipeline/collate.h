// Collation of model inputs: a batch's prepared samples -> the padded tensors a
// Qwen-VL model's forward() takes, laid out as Hugging Face's processor + collator
// produce them:
//
//   input_ids       int64 [B, L]     right-padded with the tokenizer's pad id
//   labels          int64 [B, L]     -100 on padding (and on every untrained token)
//   attention_mask  int64 [B, L]     1 on tokens, 0 on padding
//   position_ids    int64 [3, B, L]  mRoPE ids; 1 on padding (as get_rope_index fills)
//   image_grid_thw  int64 [N, 3]     every kept image of the batch, in sample order
//   pixel_values    float32 [P, D]   written in place by the samples' second phase
//
// L is the longest sample of the batch. Every tensor lives in pooled memory and leaves
// the engine without a copy.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "stoker/core/buffer_pool.h"
#include "stoker/core/status.h"
#include "stoker/core/tensor.h"
#include "stoker/pipeline/sample_processor.h"

namespace stoker::pipeline {

struct ModelBatch {
  TensorView input_ids;
  TensorView labels;
  TensorView attention_mask;
  TensorView position_ids;
  TensorView image_grid_thw;
  TensorView pixel_values;
};

// The value position_ids hold on padding.
inline constexpr int64_t kPaddingPositionId = 1;

// A pooled buffer as an owner for TensorViews.
struct PooledTensor {
  Buffer buffer;
};

// A [rows, cols] float32 view of `pixels` (which must hold rows * cols floats).
TensorView PixelValuesView(std::shared_ptr<PooledTensor> pixels, int64_t rows, int64_t cols);

// Builds every tensor but pixel_values from `samples` (the batch, in order).
// Errors: LimitExceeded if the pool cannot allocate.
Status CollateText(const std::vector<const PreparedSample*>& samples, int64_t pad_id,
                   BufferPool& pool, ModelBatch* out);

}  // namespace stoker::pipeline
