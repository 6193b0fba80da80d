// Pipeline: one epoch of the loader — plan, parallel sample work, in-order delivery.
// It runs this rank's batches [start_batch, plan.num_batches()) of an EpochPlan.
//
//   scheduler thread          worker threads (ThreadPool)        consumer (next())
//   ----------------          ---------------------------        -----------------
//   1. wait until batch k     2. per sample: parse the line,     4. take batch k in
//      is admitted (prefetch)    read each image file, decode       order, apply the
//   then submit its samples      into pooled memory; the last       error policy,
//                                sample of k hands the batch to     hand it out
//                             3. the InOrderQueue
//
// With model inputs (PipelineOptions::model) step 2 has two phases. Phase 1 per sample:
// parse, read, plan images from their headers, template + tokens + labels + mRoPE.
// The last sample of batch k to finish phase 1 sizes the batch's pixel_values from the
// plans and queues phase 2 at the head of the pool's queue (ThreadPool::SubmitFirst):
// per sample, decode + resize + normalise + patchify straight into its rows. The last
// phase-2 task collates the token tensors and hands the batch on. Pixels are written
// once, into the tensor the trainer receives.
//
// The pipeline owns every thread it starts. Close() (also run by the destructor)
// stops the scheduler, drops queued work, lets running samples finish, and joins
// every thread; it always returns, whether the consumer stopped early, an error was
// raised mid-epoch, or the epoch finished.
//
// Thread-safety: Next() and Close() may be called from one consumer thread at a time;
// Close() may also be called from another thread to abort a waiting Next().
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "stoker/codec/image_decoder.h"
#include "stoker/concurrency/thread_pool.h"
#include "stoker/core/buffer_pool.h"
#include "stoker/core/status.h"
#include "stoker/manifest/source.h"
#include "stoker/pipeline/collate.h"
#include "stoker/pipeline/in_order_queue.h"
#include "stoker/pipeline/metrics.h"
#include "stoker/pipeline/sample_processor.h"
#include "stoker/plan/epoch_plan.h"

namespace stoker::pipeline {

enum class ErrorPolicy { kRaise, kSkip };

struct PipelineOptions {
  int num_threads = 1;
  int prefetch = 2;  // batches prepared ahead of the consumer (0: none)
  ErrorPolicy on_error = ErrorPolicy::kRaise;
  // Under kSkip a failed sample is replaced by the plan's deterministic substitute (so
  // batches keep their size); more failures than this in a row, counting failed
  // substitutes, in delivery order, is treated as a systemic fault and raised.
  int64_t max_consecutive_errors = 16;
  int64_t max_image_pixels = codec::kDefaultMaxImagePixels;
  // Set: batches carry model inputs (token tensors and pixel_values) built by this
  // processor; unset: batches carry the raw manifest lines and decoded images.
  std::shared_ptr<const SampleProcessor> model;
  // Model inputs: the most pixel_values bytes the pipeline holds for batches laid out
  // and not yet delivered (0: no limit beyond `prefetch`). A batch that would cross it
  // waits, sized but not decoded, until the trainer takes earlier ones; the oldest
  // undelivered batch always proceeds, so one batch larger than the budget still
  // passes (alone).
  int64_t max_prefetch_bytes = 0;
  // Set: images are read through this object store (s3://, http(s)://, local paths
  // under its URI policy); unset: from the local file system.
  std::shared_ptr<io::ObjectStore> store;
};

// InvalidArgument naming the first option out of range.
Status ValidateOptions(const PipelineOptions& options);

// One sample's output. `status` is not OK when it failed; the message then starts
// with the sample key and names the image and the cause.
struct SampleOutput {
  plan::SampleRef ref;  // which sample this is (after any replacement)
  Status status;
  std::string sample_key;
  std::string json;  // the raw manifest line
  std::vector<codec::DecodedImage> images;  // raw-image batches
  PreparedSample prepared;                   // model-input batches
  // With an object store: the planned sample's images, read ahead by the scheduler.
  std::shared_ptr<ImageReads> reads;
  int attempts = 0;          // samples tried for this slot (the planned one first)
  int dropped_overlong = 0;  // of those, replaced for being over max_length (kDrop)
  bool truncated = false;    // cut to max_length (kTruncate)
  // Under kSkip: the samples that failed in this slot before `ref` succeeded (the
  // planned one first, then failed substitutes), in order.
  std::vector<SkipRecord> failures;
};

struct Batch {
  int64_t index = -1;                 // this rank's batch number in the epoch plan
  std::vector<SampleOutput> samples;  // in plan order; failures replaced under kSkip
  // Samples that failed and were replaced under kSkip since the previous batch.
  std::vector<SkipRecord> skipped;
  // Set when Next() fails because of one sample: its key.
  std::string failed_sample_key;
  // With PipelineOptions::model: the batch's tensors.
  bool has_model = false;
  ModelBatch model;
};

enum class NextOutcome { kBatch, kTimeout, kEnd };

class Pipeline {
 public:
  static Result<std::unique_ptr<Pipeline>> Make(
      std::vector<std::shared_ptr<const manifest::Source>> sources, plan::EpochPlan plan,
      int64_t start_batch, const PipelineOptions& options, std::shared_ptr<Metrics> metrics,
      std::shared_ptr<BufferPool> pool);
  ~Pipeline();

  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  // Waits up to `timeout` for the next batch in plan order. kTimeout: call again
  // (this lets the caller check for interrupts); kEnd: the epoch is complete.
  // Errors: the first failed sample under kRaise; LimitExceeded when the consecutive
  // failure limit is crossed under kSkip; Cancelled after Close().
  Result<NextOutcome> Next(std::chrono::milliseconds timeout, Batch* out);

  void Close();

  const plan::EpochPlan& plan() const { return plan_; }

 private:
  struct BatchSlot;
  struct WorkerScratch {
    io::Body file_bytes;
    SampleScratch sample;  // its conversation parser serves raw-image batches too
    std::vector<float> repair_pixels;
  };

  Pipeline(std::vector<std::shared_ptr<const manifest::Source>> sources,
           plan::EpochPlan plan, int64_t start_batch, const PipelineOptions& options,
           std::shared_ptr<Metrics> metrics, std::shared_ptr<BufferPool> pool);

  void ScheduleLoop();
  void ProcessSample(const std::shared_ptr<BatchSlot>& slot, size_t position,
                     WorkerScratch& scratch);
  // Tries the slot's planned sample, then its substitutes, from attempt `first_attempt`
  // on. With `pixels` (phase-2 repair under kSkip), a model sample must also decode.
  void RunAttempts(BatchSlot& slot, size_t position, WorkerScratch& scratch,
                   int first_attempt, std::vector<float>* pixels);
  Status LoadSample(const plan::SampleRef& ref, SampleOutput& out, WorkerScratch& scratch);
  Status PrepareSample(const plan::SampleRef& ref, SampleOutput& out, WorkerScratch& scratch);
  // Model inputs: after phase 1 of every sample of the batch.
  void StartPixels(const std::shared_ptr<BatchSlot>& slot, WorkerScratch& scratch);
  void WriteSamplePixels(const std::shared_ptr<BatchSlot>& slot, size_t position,
                         WorkerScratch& scratch);
  // After phase 2: replaces failed samples under kSkip, collates, hands the batch on.
  void FinishModelBatch(const std::shared_ptr<BatchSlot>& slot, WorkerScratch& scratch);
  void Deliver(const std::shared_ptr<BatchSlot>& slot);
  // Starts reading the images of `ref` through the store; null when it names none or
  // its line does not parse (the worker then reports the error).
  std::shared_ptr<ImageReads> StartReads(const plan::SampleRef& ref);
  // Phase 2 of `slot` under the byte budget: starts it now, or defers it until a
  // delivery frees enough (ReleaseBudget).
  void AdmitPixels(const std::shared_ptr<BatchSlot>& slot, WorkerScratch& scratch);
  void ReleaseBudget(int64_t bytes, int64_t delivered_index);
  void SubmitPixels(const std::shared_ptr<BatchSlot>& slot);
  // Takes the batch's pixel_values buffer; false (the error stored) if it failed.
  bool AcquirePixels(BatchSlot& slot);
  // A pooled pixel buffer of `bytes`, or null with the failure on the batch's first
  // sample (which the consumer then raises).
  std::shared_ptr<PooledTensor> NewPixels(BatchSlot& slot, size_t bytes);

  const std::vector<std::shared_ptr<const manifest::Source>> sources_;
  const plan::EpochPlan plan_;
  const int64_t start_batch_;
  const PipelineOptions options_;
  const std::shared_ptr<Metrics> metrics_;
  const std::shared_ptr<BufferPool> pool_;

  std::vector<WorkerScratch> scratch_;  // one per worker; worker i touches only [i]
  std::vector<plan::SampleRef> scheduled_refs_;  // the scheduler thread's scratch
  // The scheduler's parser: it finds the images to read ahead (with a store).
  text::ConversationParser schedule_parser_;
  text::Conversation schedule_conversation_;
  InOrderQueue<std::shared_ptr<BatchSlot>> queue_;
  std::stop_source stop_;  // requested by Close(); workers and scheduler watch it
  std::unique_ptr<ThreadPool> workers_;
  std::jthread scheduler_;  // joined by Close()

  // Consumer-side state, touched only by the thread calling Next().
  int64_t delivered_ = 0;              // batches handed out (from start_batch_)
  int64_t consecutive_failures_ = 0;  // in delivery order
  bool consumer_started_ = false;
  Clock::time_point consumer_mark_;
  // Samples skipped since the last Next() that returned a batch, the end or an error:
  // handed out with that return, kept across kTimeout returns.
  std::vector<SkipRecord> pending_skips_;
  int64_t pending_wait_ns_ = 0;  // wait so far of a next() that timed out and will retry
  std::atomic<bool> closed_{false};

  // The byte budget of max_prefetch_bytes (model inputs), guarded by budget_mutex_.
  std::mutex budget_mutex_;
  int64_t budget_held_ = 0;       // pixel bytes of started, undelivered batches
  int64_t next_undelivered_ = 0;  // plan index of the oldest undelivered batch
  std::vector<std::shared_ptr<BatchSlot>> deferred_;  // sized, waiting; by index
};

}  // namespace stoker::pipeline
