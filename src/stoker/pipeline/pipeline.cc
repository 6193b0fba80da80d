#include "stoker/pipeline/pipeline.h"

#include <algorithm>

#include "stoker/io/local_file.h"
#include "stoker/pipeline/read_ahead.h"

namespace stoker::pipeline {

struct Pipeline::BatchSlot {
  int64_t index;
  std::vector<SampleOutput> samples;
  // Tasks of the current phase still running; the one that brings it to 0 moves the
  // batch on.
  std::atomic<int64_t> remaining;
  // Model inputs: the batch's pixel_values and each sample's first row in it.
  std::shared_ptr<PooledTensor> pixels;
  std::vector<int64_t> first_row;
  int64_t rows = 0;
  int64_t with_images = 0;   // samples with phase-2 work
  int64_t budget_bytes = 0;  // pixel bytes counted against max_prefetch_bytes
  ModelBatch model;
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
  if (options.max_prefetch_bytes < 0) {
    return status::InvalidArgument("max_prefetch_bytes must be >= 0 (0: no limit), got ",
                                   std::to_string(options.max_prefetch_bytes));
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
  // Enough queued tasks to keep every worker busy while the scheduler blocks. The
  // scheduler, blocked on a full queue, resumes when half of it is left, and then
  // submits a run of samples: with a wake-up per sample instead, waking it cost more
  // than the text work of a sample (futex wake-ups were 15 % of a text-only epoch).
  const size_t task_queue = std::max<size_t>(static_cast<size_t>(options.num_threads) * 4, 16);
  STOKER_ASSIGN_OR_RETURN(pipeline->workers_,
                          ThreadPool::Make(options.num_threads, task_queue, task_queue / 2));
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
      queue_(options.prefetch),
      next_undelivered_(start_batch) {}

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
      if (options_.store) slot->samples[i].reads = StartReads(scheduled_refs_[i]);
      Status st = workers_->Submit([this, slot, i](int worker) {
        ProcessSample(slot, i, scratch_[static_cast<size_t>(worker)]);
      });
      if (!st.ok()) return;  // shut down
    }
  }
}

std::shared_ptr<ImageReads> Pipeline::StartReads(const plan::SampleRef& ref) {
  const manifest::Source& source = *sources_[ref.source];
  if (!schedule_parser_.Parse(source.Sample(ref.index).text, &schedule_conversation_).ok() ||
      schedule_conversation_.images.empty()) {
    return nullptr;
  }
  return ImageReads::Start(*options_.store, source.image_root(),
                           schedule_conversation_.images, stop_.get_token());
}

void Pipeline::ProcessSample(const std::shared_ptr<BatchSlot>& slot, size_t position,
                             WorkerScratch& scratch) {
  RunAttempts(*slot, position, scratch, /*first_attempt=*/0, /*pixels=*/nullptr);
  if (slot->remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    // The last sample of the batch. acq_rel on `remaining` orders every worker's writes
    // to the slot before what follows, and the queue's lock orders the Put before the
    // consumer's reads.
    if (options_.model) {
      StartPixels(slot, scratch);
    } else {
      Deliver(slot);
    }
  }
}

void Pipeline::RunAttempts(BatchSlot& slot, size_t position, WorkerScratch& scratch,
                           int first_attempt, std::vector<float>* pixels) {
  SampleOutput& out = slot.samples[position];
  // A failed sample (under kSkip) or an over-long one (under OverlongPolicy::kDrop) is
  // replaced by the plan's substitute for this slot, attempt after attempt, up to the
  // consecutive-failure limit. Substitutes are a pure function of (epoch, batch, slot,
  // attempt), so a resumed run and every rank make the same replacements.
  const int max_attempts = static_cast<int>(options_.max_consecutive_errors) + 1;
  plan::SampleRef ref = first_attempt == 0
                            ? out.ref
                            : plan_.Replacement(slot.index, static_cast<int64_t>(position),
                                                first_attempt - 1);
  for (int attempt = first_attempt;; ++attempt) {
    // Reads ahead were for the planned sample only; a substitute reads its own images.
    if (attempt > 0) out.reads.reset();
    out.ref = ref;
    out.attempts = attempt + 1;
    out.sample_key = sources_[ref.source]->SampleKey(ref.index);
    if (stop_.stop_requested()) {
      out.status = status::Cancelled("pipeline closed");
      break;
    }
    if (options_.model) {
      out.status = PrepareSample(ref, out, scratch);
      if (out.status.ok() && pixels != nullptr && !out.prepared.dropped) {
        // Repair of a phase-2 failure: the substitute must decode too.
        const size_t n =
            static_cast<size_t>(out.prepared.num_patches() * options_.model->row_length());
        pixels->resize(n);
        out.status = options_.model
                         ->WritePixels(out.prepared, *pixels, &scratch.sample, metrics_.get())
                         .WithContext(out.sample_key);
      }
    } else {
      out.status = LoadSample(ref, out, scratch).WithContext(out.sample_key);
    }
    const bool dropped = out.status.ok() && options_.model && out.prepared.dropped;
    if (out.status.ok() && !dropped) {
      out.truncated = options_.model && out.prepared.text.truncated;
      break;
    }
    out.images.clear();  // return the pixels to the pool early
    if (dropped) {
      ++out.dropped_overlong;
      if (attempt + 1 >= max_attempts) {
        out.status = status::LimitExceeded(
            std::to_string(out.dropped_overlong),
            " samples in a row are longer than max_length=",
            std::to_string(options_.model->options().text.max_length),
            " tokens (overlong='drop'); raise max_length or use overlong='truncate'");
        break;
      }
    } else {
      if (options_.on_error != ErrorPolicy::kSkip || attempt + 1 >= max_attempts) break;
      out.failures.push_back(SkipRecord{out.sample_key, out.status});
    }
    ref = plan_.Replacement(slot.index, static_cast<int64_t>(position), attempt);
  }
  if (!out.status.ok()) out.prepared.Clear();
}

void Pipeline::Deliver(const std::shared_ptr<BatchSlot>& slot) {
  queue_.Put(slot->index - start_batch_, slot);
}

void Pipeline::StartPixels(const std::shared_ptr<BatchSlot>& slot, WorkerScratch& scratch) {
  for (const SampleOutput& sample : slot->samples) {
    // Under kRaise the consumer raises this sample's error; under kSkip it is a sample
    // that ran out of substitutes. Either way the batch fails: no pixels needed.
    if (!sample.status.ok()) return Deliver(slot);
  }
  slot->first_row.resize(slot->samples.size());
  int64_t rows = 0;
  int64_t with_images = 0;
  for (size_t i = 0; i < slot->samples.size(); ++i) {
    slot->first_row[i] = rows;
    const int64_t n = slot->samples[i].prepared.num_patches();
    rows += n;
    with_images += n > 0 ? 1 : 0;
  }
  slot->rows = rows;
  slot->with_images = with_images;
  AdmitPixels(slot, scratch);
}

void Pipeline::AdmitPixels(const std::shared_ptr<BatchSlot>& slot, WorkerScratch& scratch) {
  const int64_t bytes = slot->rows * options_.model->row_length() *
                        static_cast<int64_t>(sizeof(float));
  slot->budget_bytes = bytes;
  {
    std::lock_guard lock(budget_mutex_);
    const bool oldest = slot->index == next_undelivered_;
    const bool fits = options_.max_prefetch_bytes <= 0 ||
                      budget_held_ + bytes <= options_.max_prefetch_bytes;
    const bool older_waiting = !deferred_.empty() && deferred_.front()->index < slot->index;
    if (!oldest && (!fits || older_waiting)) {
      // Wait, behind any older deferred batch (the list is kept sorted by index).
      auto at = std::find_if(deferred_.begin(), deferred_.end(),
                             [&](const auto& d) { return d->index > slot->index; });
      deferred_.insert(at, slot);
      return;
    }
    budget_held_ += bytes;
  }
  if (slot->with_images == 0) {
    if (!AcquirePixels(*slot)) return Deliver(slot);
    return FinishModelBatch(slot, scratch);
  }
  SubmitPixels(slot);
}

bool Pipeline::AcquirePixels(BatchSlot& slot) {
  slot.pixels = NewPixels(slot, static_cast<size_t>(slot.budget_bytes));
  return slot.pixels != nullptr;
}

std::shared_ptr<PooledTensor> Pipeline::NewPixels(BatchSlot& slot, size_t bytes) {
  Result<Buffer> buffer = pool_->Acquire(bytes);
  if (!buffer.ok()) {
    slot.samples.front().status = buffer.status().WithContext("pixel_values of the batch");
    return nullptr;
  }
  auto pixels = std::make_shared<PooledTensor>();
  pixels->buffer = std::move(*buffer);
  return pixels;
}

void Pipeline::SubmitPixels(const std::shared_ptr<BatchSlot>& slot) {
  if (!AcquirePixels(*slot)) return Deliver(slot);
  slot->remaining.store(slot->with_images, std::memory_order_relaxed);
  // Once the last task is queued the batch may finish and be consumed at any moment,
  // so the slot must not be read after the final SubmitFirst: pick the samples first.
  std::vector<size_t> with_images;
  with_images.reserve(static_cast<size_t>(slot->with_images));
  for (size_t i = 0; i < slot->samples.size(); ++i) {
    if (slot->samples[i].prepared.num_patches() > 0) with_images.push_back(i);
  }
  // Head of the queue, last sample first, so the batch's samples run in order and
  // before any later batch's phase 1: the oldest batch finishes first.
  for (auto it = with_images.rbegin(); it != with_images.rend(); ++it) {
    const size_t i = *it;
    Status st = workers_->SubmitFirst([this, slot, i](int worker) {
      WriteSamplePixels(slot, i, scratch_[static_cast<size_t>(worker)]);
    });
    if (!st.ok()) return;  // shut down: the batch is abandoned with the epoch
  }
}

void Pipeline::ReleaseBudget(int64_t bytes, int64_t delivered_index) {
  std::vector<std::shared_ptr<BatchSlot>> start;
  {
    std::lock_guard lock(budget_mutex_);
    budget_held_ -= bytes;
    next_undelivered_ = delivered_index + 1;
    while (!deferred_.empty()) {
      const auto& next = deferred_.front();
      const bool oldest = next->index == next_undelivered_;
      const bool fits = options_.max_prefetch_bytes <= 0 ||
                        budget_held_ + next->budget_bytes <= options_.max_prefetch_bytes;
      if (!oldest && !fits) break;
      budget_held_ += next->budget_bytes;
      start.push_back(next);
      deferred_.erase(deferred_.begin());
    }
  }
  // From the consumer's thread; SubmitFirst never blocks. A batch without images
  // would need a worker's scratch to finish: hand it to the pool like phase 2.
  for (const auto& slot : start) {
    if (slot->with_images == 0) {
      Status st = workers_->SubmitFirst([this, slot](int worker) {
        if (!AcquirePixels(*slot)) return Deliver(slot);
        FinishModelBatch(slot, scratch_[static_cast<size_t>(worker)]);
      });
      if (!st.ok()) return;
      continue;
    }
    SubmitPixels(slot);
  }
}

void Pipeline::WriteSamplePixels(const std::shared_ptr<BatchSlot>& slot, size_t position,
                                 WorkerScratch& scratch) {
  SampleOutput& out = slot->samples[position];
  if (stop_.stop_requested()) {
    out.status = status::Cancelled("pipeline closed");
  } else {
    const int64_t row = options_.model->row_length();
    float* base = reinterpret_cast<float*>(slot->pixels->buffer.data());
    std::span<float> rows(base + slot->first_row[position] * row,
                          static_cast<size_t>(out.prepared.num_patches() * row));
    out.status = options_.model->WritePixels(out.prepared, rows, &scratch.sample, metrics_.get())
                     .WithContext(out.sample_key);
  }
  // The encoded bytes are no longer needed.
  std::vector<io::Body>().swap(out.prepared.image_bytes);
  if (slot->remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    FinishModelBatch(slot, scratch);
  }
}

void Pipeline::FinishModelBatch(const std::shared_ptr<BatchSlot>& slot,
                                WorkerScratch& scratch) {
  bool failed = false;
  for (const SampleOutput& sample : slot->samples) failed |= !sample.status.ok();
  if (failed) {
    // Under kRaise (or on shutdown) the consumer sees the failure.
    if (options_.on_error != ErrorPolicy::kSkip || stop_.stop_requested()) {
      return Deliver(slot);
    }
    // Rare path: an image whose header was fine failed to decode. Replace the sample
    // (its substitute decoded into scratch memory), then lay the batch's pixel_values
    // out anew, copying the rows that were already written.
    const int64_t row = options_.model->row_length();
    std::vector<std::vector<float>> replaced(slot->samples.size());
    for (size_t i = 0; i < slot->samples.size(); ++i) {
      SampleOutput& sample = slot->samples[i];
      if (sample.status.ok()) continue;
      sample.failures.push_back(SkipRecord{sample.sample_key, sample.status});
      if (sample.attempts > options_.max_consecutive_errors) {
        sample.status = status::LimitExceeded(
            "no substitute left for a sample that failed to decode: ",
            sample.status.ToString());
        return Deliver(slot);
      }
      RunAttempts(*slot, i, scratch, sample.attempts, &scratch.repair_pixels);
      if (!sample.status.ok()) return Deliver(slot);
      replaced[i] = scratch.repair_pixels;
    }
    int64_t rows = 0;
    for (const SampleOutput& sample : slot->samples) rows += sample.prepared.num_patches();
    std::shared_ptr<PooledTensor> pixels =
        NewPixels(*slot, static_cast<size_t>(rows * row) * sizeof(float));
    if (pixels == nullptr) return Deliver(slot);
    float* dst = reinterpret_cast<float*>(pixels->buffer.data());
    const float* old = reinterpret_cast<const float*>(slot->pixels->buffer.data());
    int64_t at = 0;
    for (size_t i = 0; i < slot->samples.size(); ++i) {
      const int64_t n = slot->samples[i].prepared.num_patches() * row;
      const float* src = replaced[i].empty() ? old + slot->first_row[i] * row
                                             : replaced[i].data();
      std::copy_n(src, n, dst + at);
      slot->first_row[i] = at / row;
      at += n;
    }
    slot->pixels = std::move(pixels);
    slot->rows = rows;
  }
  const auto t0 = Clock::now();
  std::vector<const PreparedSample*> prepared;
  prepared.reserve(slot->samples.size());
  for (const SampleOutput& sample : slot->samples) prepared.push_back(&sample.prepared);
  Status st = CollateText(prepared, options_.model->options().pad_id, *pool_, &slot->model);
  if (!st.ok()) {
    slot->samples.front().status = st.WithContext("collating the batch");
    return Deliver(slot);
  }
  slot->model.pixel_values =
      PixelValuesView(slot->pixels, slot->rows, options_.model->row_length());
  slot->pixels.reset();
  metrics_->collate.Add(NanosSince(t0), 1,
                        slot->model.input_ids.num_bytes() * 4 +
                            slot->model.image_grid_thw.num_bytes());
  Deliver(slot);
}

Status Pipeline::PrepareSample(const plan::SampleRef& ref, SampleOutput& out,
                               WorkerScratch& scratch) {
  const manifest::Source& source = *sources_[ref.source];
  const manifest::LineRef line = source.Sample(ref.index);
  out.json.assign(line.text);
  return options_.model
      ->Prepare(line.text, source.image_root(), options_.store.get(), &out.prepared,
                &scratch.sample, metrics_.get(), out.reads.get())
      .WithContext(out.sample_key);
}

Status Pipeline::LoadSample(const plan::SampleRef& ref, SampleOutput& out,
                            WorkerScratch& scratch) {
  const manifest::Source& source = *sources_[ref.source];
  // Parse and validate the manifest line.
  const manifest::LineRef line = source.Sample(ref.index);
  auto t0 = Clock::now();
  Status parsed = scratch.sample.parser.Parse(line.text, &scratch.sample.conversation);
  metrics_->parse.Add(NanosSince(t0), 1, static_cast<int64_t>(line.text.size()));
  STOKER_RETURN_NOT_OK(parsed);
  out.json.assign(line.text);

  codec::DecodeOptions decode_options;
  decode_options.max_pixels = options_.max_image_pixels;
  const std::vector<std::string>& images = scratch.sample.conversation.images;
  out.images.reserve(images.size());
  for (size_t i = 0; i < images.size(); ++i) {
    const std::string& image = images[i];
    if (stop_.stop_requested()) return status::Cancelled("pipeline closed");
    t0 = Clock::now();
    Status read = ReadImage(source.image_root(), image, options_.store.get(),
                            &scratch.file_bytes, out.reads.get(), i);
    metrics_->read.Add(NanosSince(t0), 1, static_cast<int64_t>(scratch.file_bytes.size()));
    STOKER_RETURN_NOT_OK(read);
    t0 = Clock::now();
    auto decoded = codec::DecodeImage(scratch.file_bytes, decode_options, *pool_);
    const int64_t decoded_bytes =
        decoded.ok() ? int64_t{decoded->width} * decoded->height * 3 : 0;
    metrics_->decode.Add(NanosSince(t0), 1, decoded_bytes);
    if (!decoded.ok()) {
      return decoded.status().WithContext(
          "image '" + image + "' (" + io::ResolvePath(source.image_root(), image) + ")");
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
  out->has_model = false;
  out->model = {};
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
    if (options_.model) ReleaseBudget(slot->budget_bytes, slot->index);
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
    if (options_.model) {
      out->has_model = true;
      out->model = std::move(slot->model);
      int64_t truncated = 0, dropped = 0;
      for (const SampleOutput& sample : out->samples) {
        truncated += sample.truncated ? 1 : 0;
        dropped += sample.dropped_overlong;
      }
      metrics_->samples_truncated.fetch_add(truncated, std::memory_order_relaxed);
      metrics_->samples_dropped_overlong.fetch_add(dropped, std::memory_order_relaxed);
    }
    metrics_->batches_delivered.fetch_add(1, std::memory_order_relaxed);
    metrics_->samples_delivered.fetch_add(static_cast<int64_t>(out->samples.size()),
                                          std::memory_order_relaxed);
    account();
    return NextOutcome::kBatch;
  }
}

}  // namespace stoker::pipeline
