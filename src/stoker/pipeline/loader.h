// Loader: the engine behind stoker.Loader. Opens the manifest once and starts one
// Pipeline per epoch; metrics and the buffer pool outlive epochs, so stats() covers
// the loader's whole life and pixel memory is reused from one epoch to the next.
#pragma once

#include <memory>
#include <string>

#include "stoker/core/buffer_pool.h"
#include "stoker/manifest/jsonl_file.h"
#include "stoker/pipeline/metrics.h"
#include "stoker/pipeline/pipeline.h"

namespace stoker::pipeline {

struct LoaderOptions {
  std::string manifest_path;
  // Relative image paths resolve against this; empty means the manifest's directory.
  std::string image_root;
  PipelineOptions pipeline;
  // Idle pixel memory the buffer pool may keep for reuse.
  size_t buffer_pool_bytes = size_t{512} << 20;
};

class Loader {
 public:
  // Errors: the manifest cannot be opened, or an option is out of range.
  static Result<std::unique_ptr<Loader>> Make(const LoaderOptions& options);

  // Starts an epoch with its own threads. Epochs may overlap (an abandoned iterator
  // not yet collected); they share the metrics and the buffer pool, both thread-safe.
  Result<std::unique_ptr<Pipeline>> StartEpoch();

  int64_t num_samples() const { return manifest_->num_samples(); }
  int64_t num_batches() const;
  const LoaderOptions& options() const { return options_; }
  MetricsSnapshot Snapshot() const { return metrics_->Snapshot(); }
  BufferPoolStats pool_stats() const { return pool_->stats(); }

 private:
  Loader(LoaderOptions options, std::shared_ptr<const manifest::JsonlFile> manifest)
      : options_(std::move(options)),
        manifest_(std::move(manifest)),
        metrics_(std::make_shared<Metrics>()),
        pool_(BufferPool::Make(options_.buffer_pool_bytes)) {}

  LoaderOptions options_;
  std::shared_ptr<const manifest::JsonlFile> manifest_;
  std::shared_ptr<Metrics> metrics_;
  std::shared_ptr<BufferPool> pool_;
};

}  // namespace stoker::pipeline
