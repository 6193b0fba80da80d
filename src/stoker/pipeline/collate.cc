#include "stoker/pipeline/collate.h"

#include <algorithm>
#include <cstring>

namespace stoker::pipeline {

namespace {

Result<TensorView> Int64Tensor(BufferPool& pool, std::initializer_list<int64_t> shape) {
  TensorView view;
  view.dtype = DType::kInt64;
  view.ndim = static_cast<int>(shape.size());
  std::copy(shape.begin(), shape.end(), view.shape.begin());
  auto owner = std::make_shared<PooledTensor>();
  STOKER_ASSIGN_OR_RETURN(owner->buffer,
                          pool.Acquire(static_cast<size_t>(view.num_bytes())));
  view.data = owner->buffer.data();
  view.owner = std::move(owner);
  return view;
}

int64_t* Int64Data(const TensorView& view) { return static_cast<int64_t*>(view.data); }

}  // namespace

TensorView PixelValuesView(std::shared_ptr<PooledTensor> pixels, int64_t rows,
                           int64_t cols) {
  TensorView view;
  view.dtype = DType::kFloat32;
  view.ndim = 2;
  view.shape[0] = rows;
  view.shape[1] = cols;
  view.data = pixels->buffer.data();
  view.owner = std::move(pixels);
  return view;
}

Status CollateText(const std::vector<const PreparedSample*>& samples, int64_t pad_id,
                   BufferPool& pool, ModelBatch* out) {
  const int64_t batch = static_cast<int64_t>(samples.size());
  int64_t length = 0;
  int64_t images = 0;
  for (const PreparedSample* s : samples) {
    length = std::max(length, static_cast<int64_t>(s->text.input_ids.size()));
    images += static_cast<int64_t>(s->plans.size());
  }
  STOKER_ASSIGN_OR_RETURN(out->input_ids, Int64Tensor(pool, {batch, length}));
  STOKER_ASSIGN_OR_RETURN(out->labels, Int64Tensor(pool, {batch, length}));
  STOKER_ASSIGN_OR_RETURN(out->attention_mask, Int64Tensor(pool, {batch, length}));
  STOKER_ASSIGN_OR_RETURN(out->position_ids, Int64Tensor(pool, {3, batch, length}));
  STOKER_ASSIGN_OR_RETURN(out->image_grid_thw, Int64Tensor(pool, {images, 3}));
  int64_t* ids = Int64Data(out->input_ids);
  int64_t* labels = Int64Data(out->labels);
  int64_t* mask = Int64Data(out->attention_mask);
  int64_t* positions = Int64Data(out->position_ids);
  int64_t* grids = Int64Data(out->image_grid_thw);
  for (int64_t b = 0; b < batch; ++b) {
    const text::EncodedSample& t = samples[static_cast<size_t>(b)]->text;
    const int64_t n = static_cast<int64_t>(t.input_ids.size());
    int64_t* row_ids = ids + b * length;
    int64_t* row_labels = labels + b * length;
    int64_t* row_mask = mask + b * length;
    std::copy_n(t.input_ids.data(), n, row_ids);
    std::fill(row_ids + n, row_ids + length, pad_id);
    std::copy_n(t.labels.data(), n, row_labels);
    std::fill(row_labels + n, row_labels + length, text::kIgnoreIndex);
    std::fill(row_mask, row_mask + n, 1);
    std::fill(row_mask + n, row_mask + length, 0);
    for (int64_t axis = 0; axis < 3; ++axis) {
      int64_t* row = positions + (axis * batch + b) * length;
      std::copy_n(t.position_ids.data() + axis * n, n, row);
      std::fill(row + n, row + length, kPaddingPositionId);
    }
  }
  for (const PreparedSample* s : samples) {
    for (const vision::ImagePlan& plan : s->plans) {
      *grids++ = plan.grid_t;
      *grids++ = plan.grid_h;
      *grids++ = plan.grid_w;
    }
  }
  return Status::OK();
}

}  // namespace stoker::pipeline
