#include "stoker/pipeline/pipeline.h"

#include "stoker/io/local_file.h"

namespace stoker::pipeline {

struct Pipeline::BatchSlot {
  int64_t index;
  std::vector<SampleOutput> samples;
  std::atomic<int64_t> remaining;
};

Status ValidateOptions(const PipelineOptions& options) {
  if (options.batch_size < 1) {
    return status::InvalidArgument("batch_size must be >= 1, got ",
                                   std::to_string(options.batch_size));
  }
  if (options.num_threads < 1) {
    return status::InvalidArgument("num_threads must be >= 1, got ",
                                   std::to_string(options.num_threads));
  }
  if (options.prefetch < 0) {
    return status::InvalidArgument("prefetch must be >= 0, got ",
                                   std::to_string(options.prefetch));
  }
  if (options.max_consecutive_errors < 0) {
    return status::InvalidArgument("max_consecutive_errors must be >= 0");
  }
  return Status::OK();
}

Result<std::unique_ptr<Pipeline>> Pipeline::Make(
    std::shared_ptr<const manifest::JsonlFile> manifest, const PipelineOptions& options,
    std::shared_ptr<Metrics> metrics, std::shared_ptr<BufferPool> pool) {
  STOKER_RETURN_NOT_OK(ValidateOptions(options));
  STOKER_ASSIGN_OR_RETURN(
      plan::BatchPlan plan,
      plan::BatchPlan::Make(manifest->num_samples(), options.batch_size, options.drop_last));
  std::unique_ptr<Pipeline> pipeline(new Pipeline(std::move(manifest), options, plan,
                                                  std::move(metrics), std::move(pool)));
  // Enough queued tasks to keep every worker busy while the scheduler blocks.
  const size_t task_queue = static_cast<size_t>(options.num_threads) * 4;
  STOKER_ASSIGN_OR_RETURN(pipeline->workers_,
                          ThreadPool::Make(options.num_threads, task_queue));
  Pipeline* self = pipeline.get();
  pipeline->scheduler_ = std::jthread([self] { self->ScheduleLoop(); });
  return pipeline;
}

Pipeline::Pipeline(std::shared_ptr<const manifest::JsonlFile> manifest,
                   const PipelineOptions& options, plan::BatchPlan plan,
                   std::shared_ptr<Metrics> metrics, std::shared_ptr<BufferPool> pool)
    : manifest_(std::move(manifest)),
      options_(options),
      plan_(plan),
      metrics_(std::move(metrics)),
      pool_(std::move(pool)),
      scratch_(static_cast<size_t>(options.num_threads)),
      queue_(options.prefetch) {}

Pipeline::~Pipeline() { Close(); }

void Pipeline::Close() {
  if (closed_.exchange(true)) return;
  // 1. Tell running samples to stop at their next image.
  stop_.request_stop();
  // 2. Wake the scheduler (waiting for admission) and a consumer waiting in Next().
  queue_.Close();
  // 3. Drop queued samples, finish running ones, join the workers; this also fails a
  //    Submit the scheduler may be blocked in.
  if (workers_) workers_->Shutdown();
  // 4. Join the scheduler.
  if (scheduler_.joinable()) scheduler_.join();
}

void Pipeline::ScheduleLoop() {
  for (int64_t b = 0; b < plan_.num_batches() && !stop_.stop_requested(); ++b) {
    if (!queue_.WaitAdmit(b)) return;
    const plan::SampleRange range = plan_.Batch(b);
    auto slot = std::make_shared<BatchSlot>();
    slot->index = b;
    slot->samples.resize(static_cast<size_t>(range.size()));
    slot->remaining.store(range.size());
    for (int64_t i = 0; i < range.size(); ++i) {
      SampleOutput& sample = slot->samples[static_cast<size_t>(i)];
      sample.index = range.begin + i;
      Status st = workers_->Submit([this, slot, i](int worker) {
        ProcessSample(slot, static_cast<size_t>(i), scratch_[static_cast<size_t>(worker)]);
      });
      if (!st.ok()) return;  // shut down
    }
  }
}

void Pipeline::ProcessSample(const std::shared_ptr<BatchSlot>& slot, size_t position,
                             WorkerScratch& scratch) {
  SampleOutput& out = slot->samples[position];
  out.sample_key = manifest_->SampleKey(out.index);
  if (stop_.stop_requested()) {
    out.status = status::Cancelled("pipeline closed");
  } else {
    out.status = ProcessSampleImpl(out, scratch).WithContext(out.sample_key);
  }
  if (!out.status.ok()) out.images.clear();  // return the pixels to the pool early
  if (slot->remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    // The last sample of the batch: hand it over. acq_rel on `remaining` orders every
    // worker's writes to the slot before this Put, and the queue's lock orders the Put
    // before the consumer's reads.
    queue_.Put(slot->index, slot);
  }
}

Status Pipeline::ProcessSampleImpl(SampleOutput& out, WorkerScratch& scratch) {
  // Parse and validate the manifest line.
  const manifest::LineRef line = manifest_->Sample(out.index);
  auto t0 = Clock::now();
  Status parsed = scratch.parser.Parse(line.text, &scratch.refs);
  metrics_->parse.Add(NanosSince(t0), 1, static_cast<int64_t>(line.text.size()));
  STOKER_RETURN_NOT_OK(parsed);
  out.json.assign(line.text);

  codec::DecodeOptions decode_options;
  decode_options.max_pixels = options_.max_image_pixels;
  out.images.reserve(scratch.refs.images.size());
  for (const std::string& ref : scratch.refs.images) {
    if (stop_.stop_requested()) return status::Cancelled("pipeline closed");
    const std::string path = io::ResolvePath(options_.image_root, ref);
    const std::string context = "image '" + ref + "'";
    t0 = Clock::now();
    Status read = io::ReadFile(path, &scratch.file_bytes);
    metrics_->read.Add(NanosSince(t0), 1, static_cast<int64_t>(scratch.file_bytes.size()));
    STOKER_RETURN_NOT_OK(read.WithContext(context));

    t0 = Clock::now();
    auto image = codec::DecodeImage(scratch.file_bytes, decode_options, *pool_);
    const int64_t decoded_bytes = image.ok() ? int64_t{image->width} * image->height * 3 : 0;
    metrics_->decode.Add(NanosSince(t0), 1, decoded_bytes);
    if (!image.ok()) {
      return image.status().WithContext(context + " (" + path + ")");
    }
    out.images.push_back(std::move(*image));
  }
  return Status::OK();
}

Result<NextOutcome> Pipeline::Next(std::chrono::milliseconds timeout, Batch* out) {
  const auto call_start = Clock::now();
  if (!consumer_started_) {
    consumer_started_ = true;
    consumer_mark_ = call_start;
  }
  // `final_return`: false when Next() returns kTimeout and the caller will come back
  // for the same batch; the wait of one logical next() spans those calls.
  auto account = [&](bool final_return = true) {
    const auto now = Clock::now();
    const int64_t waited =
        std::chrono::duration_cast<std::chrono::nanoseconds>(now - call_start).count();
    metrics_->consumer_wait_ns.fetch_add(waited, std::memory_order_relaxed);
    pending_wait_ns_ += waited;
    if (final_return) {
      metrics_->RecordNextWait(pending_wait_ns_);
      pending_wait_ns_ = 0;
    }
    metrics_->consumer_wall_ns.fetch_add(
        std::chrono::duration_cast<std::chrono::nanoseconds>(now - consumer_mark_).count(),
        std::memory_order_relaxed);
    consumer_mark_ = now;
  };

  out->samples.clear();
  out->skipped.clear();
  out->failed_sample_key.clear();
  while (true) {
    if (closed_.load()) {
      account();
      return status::Cancelled("the loader's epoch was closed");
    }
    if (delivered_ >= plan_.num_batches()) {
      // Samples skipped after the last delivered batch still reach the caller.
      out->skipped = std::move(pending_skips_);
      pending_skips_.clear();
      account();
      return NextOutcome::kEnd;
    }
    std::shared_ptr<BatchSlot> slot;
    const auto remaining = timeout - std::chrono::duration_cast<std::chrono::milliseconds>(
                                         Clock::now() - call_start);
    switch (queue_.Next(std::max(remaining, std::chrono::milliseconds(0)), &slot)) {
      case InOrderQueue<std::shared_ptr<BatchSlot>>::NextResult::kTimeout:
        account(/*final_return=*/false);
        return NextOutcome::kTimeout;
      case InOrderQueue<std::shared_ptr<BatchSlot>>::NextResult::kClosed:
        account();
        return status::Cancelled("the loader's epoch was closed");
      case InOrderQueue<std::shared_ptr<BatchSlot>>::NextResult::kItem:
        break;
    }
    ++delivered_;
    // Every task of this batch has finished writing; the samples can move out.
    out->index = slot->index;
    Status failure;
    for (SampleOutput& sample : slot->samples) {
      if (sample.status.ok()) {
        consecutive_failures_ = 0;
        out->samples.push_back(std::move(sample));
        continue;
      }
      if (options_.on_error == ErrorPolicy::kRaise) {
        failure = sample.status;
        out->failed_sample_key = sample.sample_key;
        break;
      }
      ++consecutive_failures_;
      SkipRecord record{sample.sample_key, sample.status};
      metrics_->RecordSkip(record);
      pending_skips_.push_back(std::move(record));
      if (consecutive_failures_ > options_.max_consecutive_errors) {
        failure = status::LimitExceeded(
            std::to_string(consecutive_failures_),
            " consecutive samples failed (max_consecutive_errors=",
            std::to_string(options_.max_consecutive_errors),
            "); the data or its storage is likely broken. Last failure: ",
            sample.status.ToString());
        out->failed_sample_key = sample.sample_key;
        break;
      }
    }
    if (!failure.ok()) {
      out->skipped = std::move(pending_skips_);
      pending_skips_.clear();
      account();
      return failure;
    }
    // Every sample was skipped: next batch. The records wait in pending_skips_, which
    // (unlike `out`) survives a kTimeout return while that batch is being prepared.
    if (out->samples.empty()) continue;
    out->skipped = std::move(pending_skips_);
    pending_skips_.clear();
    metrics_->batches_delivered.fetch_add(1, std::memory_order_relaxed);
    metrics_->samples_delivered.fetch_add(static_cast<int64_t>(out->samples.size()),
                                          std::memory_order_relaxed);
    account();
    return NextOutcome::kBatch;
  }
}

}  // namespace stoker::pipeline
