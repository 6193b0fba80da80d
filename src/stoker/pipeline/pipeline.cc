#include "stoker/pipeline/pipeline.h"

#include "stoker/io/local_file.h"

namespace stoker::pipeline {

struct Pipeline::BatchSlot {
  int64_t index;
  std::vector<SampleOutput> samples;
  std::atomic<int64_t> remaining;
};

Status ValidateOptions(const PipelineOptions& options) {
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
    std::vector<std::shared_ptr<const manifest::Source>> sources, plan::EpochPlan plan,
    int64_t start_batch, const PipelineOptions& options, std::shared_ptr<Metrics> metrics,
    std::shared_ptr<BufferPool> pool) {
  STOKER_RETURN_NOT_OK(ValidateOptions(options));
  if (start_batch < 0 || start_batch > plan.num_batches()) {
    return status::InvalidArgument("start batch ", std::to_string(start_batch),
                                   " is outside the epoch's ",
                                   std::to_string(plan.num_batches()), " batches");
  }
  std::unique_ptr<Pipeline> pipeline(new Pipeline(std::move(sources), std::move(plan),
                                                  start_batch, options, std::move(metrics),
                                                  std::move(pool)));
  // Enough queued tasks to keep every worker busy while the scheduler blocks.
  const size_t task_queue = static_cast<size_t>(options.num_threads) * 4;
  STOKER_ASSIGN_OR_RETURN(pipeline->workers_,
                          ThreadPool::Make(options.num_threads, task_queue));
  Pipeline* self = pipeline.get();
  pipeline->scheduler_ = std::jthread([self] { self->ScheduleLoop(); });
  return pipeline;
}

Pipeline::Pipeline(std::vector<std::shared_ptr<const manifest::Source>> sources,
                   plan::EpochPlan plan, int64_t start_batch, const PipelineOptions& options,
                   std::shared_ptr<Metrics> metrics, std::shared_ptr<BufferPool> pool)
    : sources_(std::move(sources)),
      plan_(std::move(plan)),
      start_batch_(start_batch),
      options_(options),
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
  // The queue numbers batches from 0; batch b of the plan is item b - start_batch_.
  for (int64_t b = start_batch_; b < plan_.num_batches() && !stop_.stop_requested(); ++b) {
    if (!queue_.WaitAdmit(b - start_batch_)) return;
    plan_.RankBatch(b, &scheduled_refs_);
    auto slot = std::make_shared<BatchSlot>();
    slot->index = b;
    slot->samples.resize(scheduled_refs_.size());
    slot->remaining.store(static_cast<int64_t>(scheduled_refs_.size()));
    for (size_t i = 0; i < scheduled_refs_.size(); ++i) {
      slot->samples[i].ref = scheduled_refs_[i];
      Status st = workers_->Submit([this, slot, i](int worker) {
        ProcessSample(slot, i, scratch_[static_cast<size_t>(worker)]);
      });
      if (!st.ok()) return;  // shut down
    }
  }
}

void Pipeline::ProcessSample(const std::shared_ptr<BatchSlot>& slot, size_t position,
                             WorkerScratch& scratch) {
  SampleOutput& out = slot->samples[position];
  // Under kSkip a failed sample is replaced by the plan's substitute for this slot,
  // attempt after attempt, up to the consecutive-failure limit. The substitutes are a
  // pure function of (epoch, batch, slot, attempt), so a resumed run and every rank
  // make the same replacements.
  const int max_attempts = options_.on_error == ErrorPolicy::kSkip
                               ? static_cast<int>(options_.max_consecutive_errors) + 1
                               : 1;
  plan::SampleRef ref = out.ref;
  for (int attempt = 0;; ++attempt) {
    out.ref = ref;
    out.sample_key = sources_[ref.source]->SampleKey(ref.index);
    if (stop_.stop_requested()) {
      out.status = status::Cancelled("pipeline closed");
      break;
    }
    out.status = LoadSample(ref, out, scratch).WithContext(out.sample_key);
    if (out.status.ok()) break;
    out.images.clear();  // return the pixels to the pool early
    if (attempt + 1 >= max_attempts) break;
    out.failures.push_back(SkipRecord{out.sample_key, out.status});
    ref = plan_.Replacement(slot->index, static_cast<int64_t>(position), attempt);
  }
  if (slot->remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    // The last sample of the batch: hand it over. acq_rel on `remaining` orders every
    // worker's writes to the slot before this Put, and the queue's lock orders the Put
    // before the consumer's reads.
    queue_.Put(slot->index - start_batch_, slot);
  }
}

Status Pipeline::LoadSample(const plan::SampleRef& ref, SampleOutput& out,
                            WorkerScratch& scratch) {
  const manifest::Source& source = *sources_[ref.source];
  // Parse and validate the manifest line.
  const manifest::LineRef line = source.Sample(ref.index);
  auto t0 = Clock::now();
  Status parsed = scratch.parser.Parse(line.text, &scratch.refs);
  metrics_->parse.Add(NanosSince(t0), 1, static_cast<int64_t>(line.text.size()));
  STOKER_RETURN_NOT_OK(parsed);
  out.json.assign(line.text);

  codec::DecodeOptions decode_options;
  decode_options.max_pixels = options_.max_image_pixels;
  out.images.reserve(scratch.refs.images.size());
  for (const std::string& image : scratch.refs.images) {
    if (stop_.stop_requested()) return status::Cancelled("pipeline closed");
    const std::string path = io::ResolvePath(source.image_root(), image);
    const std::string context = "image '" + image + "'";
    t0 = Clock::now();
    Status read = io::ReadFile(path, &scratch.file_bytes);
    metrics_->read.Add(NanosSince(t0), 1, static_cast<int64_t>(scratch.file_bytes.size()));
    STOKER_RETURN_NOT_OK(read.WithContext(context));

    t0 = Clock::now();
    auto decoded = codec::DecodeImage(scratch.file_bytes, decode_options, *pool_);
    const int64_t decoded_bytes =
        decoded.ok() ? int64_t{decoded->width} * decoded->height * 3 : 0;
    metrics_->decode.Add(NanosSince(t0), 1, decoded_bytes);
    if (!decoded.ok()) {
      return decoded.status().WithContext(context + " (" + path + ")");
    }
    out.images.push_back(std::move(*decoded));
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
    if (start_batch_ + delivered_ >= plan_.num_batches()) {
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
      // Failures replaced under kSkip come first, in the order they happened.
      for (SkipRecord& record : sample.failures) {
        ++consecutive_failures_;
        metrics_->RecordSkip(record);
        pending_skips_.push_back(std::move(record));
      }
      if (sample.status.ok()) {
        consecutive_failures_ = 0;
        out->samples.push_back(std::move(sample));
        continue;
      }
      if (options_.on_error == ErrorPolicy::kSkip) {
        ++consecutive_failures_;
        metrics_->RecordSkip(SkipRecord{sample.sample_key, sample.status});
        pending_skips_.push_back(SkipRecord{sample.sample_key, sample.status});
        failure = status::LimitExceeded(
            std::to_string(consecutive_failures_),
            " consecutive samples failed (max_consecutive_errors=",
            std::to_string(options_.max_consecutive_errors),
            "), the planned one and its substitutes; the data or its storage is likely "
            "broken. Last failure: ",
            sample.status.ToString());
      } else {
        failure = sample.status;
      }
      out->failed_sample_key = sample.sample_key;
      break;
    }
    if (!failure.ok()) {
      out->skipped = std::move(pending_skips_);
      pending_skips_.clear();
      account();
      return failure;
    }
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
