// Loader: the engine behind stoker.Loader. Opens (and indexes) the sources once and
// starts one Pipeline per epoch, at any batch of it; metrics and the buffer pool
// outlive epochs, so stats() covers the loader's whole life and pixel memory is reused
// from one epoch to the next.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "stoker/core/buffer_pool.h"
#include "stoker/manifest/source.h"
#include "stoker/pipeline/metrics.h"
#include "stoker/pipeline/pipeline.h"
#include "stoker/plan/epoch_plan.h"

namespace stoker::pipeline {

struct SourceOptions {
  std::string name;
  std::vector<std::string> paths;  // JSONL files, read in this order
  // Relative image paths resolve against this; empty: the first file's directory.
  std::string image_root;
  uint64_t weight = 1;  // integer, relative to the other sources
  int64_t repeat = 1;   // EpochPolicy::kRepeat only
  // Empty, or one per path: how sample keys name each file (the object-store URI of a
  // manifest read from a staged local copy).
  std::vector<std::string> display_paths;
};

struct LoaderOptions {
  std::vector<SourceOptions> sources;
  // Everything about the order except the sources' sizes (filled in by Make).
  plan::PlanConfig plan;
  PipelineOptions pipeline;
  manifest::OpenOptions open;
  // Idle pixel memory the buffer pool may keep for reuse.
  size_t buffer_pool_bytes = size_t{512} << 20;
};

class Loader {
 public:
  // Errors: a manifest cannot be opened, or an option is out of range.
  static Result<std::unique_ptr<Loader>> Make(const LoaderOptions& options);

  // Starts `epoch` at this rank's batch `start_batch` (0 <= start_batch <= batches of
  // the epoch; equal means nothing is left). Epochs may overlap (an abandoned iterator
  // not yet collected); they share the metrics and the buffer pool, both thread-safe.
  Result<std::unique_ptr<Pipeline>> StartEpoch(int64_t epoch, int64_t start_batch);

  // The plan of an epoch, without starting it (cheap: O(sources)).
  Result<plan::EpochPlan> Plan(int64_t epoch) const;

  const std::vector<std::shared_ptr<const manifest::Source>>& sources() const {
    return sources_;
  }
  const LoaderOptions& options() const { return options_; }
  MetricsSnapshot Snapshot() const { return metrics_->Snapshot(); }
  BufferPoolStats pool_stats() const { return pool_->stats(); }

 private:
  Loader(LoaderOptions options, std::vector<std::shared_ptr<const manifest::Source>> sources)
      : options_(std::move(options)),
        sources_(std::move(sources)),
        metrics_(std::make_shared<Metrics>()),
        pool_(BufferPool::Make(options_.buffer_pool_bytes)) {}

  LoaderOptions options_;
  std::vector<std::shared_ptr<const manifest::Source>> sources_;
  std::shared_ptr<Metrics> metrics_;
  std::shared_ptr<BufferPool> pool_;
};

}  // namespace stoker::pipeline
