#include "stoker/pipeline/pipeline.h"

#include <gtest/gtest.h>
#include <png.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <optional>
#include <set>

#include "stoker/io/object_store.h"
#include "stoker/pipeline/loader.h"
#include "test_images.h"
#include "test_tokenizer.h"

namespace stoker::pipeline {
namespace {

using namespace std::chrono_literals;
using namespace stoker::testing;

// A dataset where sample i has (i % 3) images; image j of sample i is a 4x3 PNG
// whose every byte is (i * 3 + j) % 256, so a test can tell which image it got.
class Dataset {
 public:
  explicit Dataset(int num_samples, std::set<int> missing = {}, std::set<int> corrupt = {},
                   std::set<int> bad_json = {}) {
    std::string manifest;
    for (int i = 0; i < num_samples; ++i) {
      if (bad_json.count(i)) {
        manifest += "{\"messages\": [oops\n";
        continue;
      }
      std::string content = "[";
      for (int j = 0; j < i % 3; ++j) {
        const std::string name = "img/" + std::to_string(i) + "_" + std::to_string(j) + ".png";
        if (!missing.count(i)) {
          std::vector<uint8_t> pixels(4 * 3 * 3, static_cast<uint8_t>((i * 3 + j) % 256));
          Bytes png = EncodePng(pixels, 4, 3, PNG_COLOR_TYPE_RGB, 8);
          if (corrupt.count(i)) png.resize(png.size() / 2);
          WriteFile(dir_.path() / name, png);
        }
        content += "{\"type\": \"image\", \"image\": \"" + name + "\"}, ";
      }
      content += "{\"type\": \"text\", \"text\": \"sample " + std::to_string(i) + "\"}]";
      manifest += "{\"messages\": [{\"role\": \"user\", \"content\": " + content +
                  "}, {\"role\": \"assistant\", \"content\": \"ok\"}]}\n";
    }
    WriteFile(manifest_path(), manifest);
  }

  std::string manifest_path() const { return (dir_.path() / "train.jsonl").string(); }
  std::string root() const { return dir_.path().string() + "/"; }

  std::unique_ptr<Loader> MakeLoader(int64_t batch_size, int threads, int prefetch,
                                     ErrorPolicy policy = ErrorPolicy::kRaise,
                                     int64_t max_consecutive = 16,
                                     std::shared_ptr<const SampleProcessor> model = {},
                                     int64_t max_prefetch_bytes = 0,
                                     std::shared_ptr<io::ObjectStore> store = {}) const {
    LoaderOptions options;
    options.sources = {SourceOptions{"train", {manifest_path()}, "", 1, 1, {}}};
    options.plan.batch_size = batch_size;
    options.pipeline.num_threads = threads;
    options.pipeline.prefetch = prefetch;
    options.pipeline.on_error = policy;
    options.pipeline.max_consecutive_errors = max_consecutive;
    options.pipeline.model = std::move(model);
    options.pipeline.max_prefetch_bytes = max_prefetch_bytes;
    options.pipeline.store = std::move(store);
    auto loader = Loader::Make(options);
    EXPECT_TRUE(loader.ok()) << loader.status().ToString();
    return std::move(*loader);
  }

 private:
  TempDir dir_;
};

// Drains one epoch; returns the sample indices in delivery order.
std::vector<int64_t> Drain(Pipeline& pipeline, std::vector<Batch>* batches = nullptr) {
  std::vector<int64_t> seen;
  Batch batch;
  int64_t expected_batch = 0;
  while (true) {
    Result<NextOutcome> outcome = pipeline.Next(5s, &batch);
    EXPECT_TRUE(outcome.ok()) << outcome.status().ToString();
    if (!outcome.ok() || *outcome == NextOutcome::kEnd) break;
    EXPECT_EQ(*outcome, NextOutcome::kBatch);
    EXPECT_GE(batch.index, expected_batch);
    expected_batch = batch.index + 1;
    for (const SampleOutput& s : batch.samples) seen.push_back(s.ref.index);
    if (batches) batches->push_back(std::move(batch));
  }
  return seen;
}

TEST(PipelineTest, EverySampleOnceInOrderForAnyThreadsAndPrefetch) {
  Dataset data(37);
  for (int threads : {1, 2, 4}) {
    for (int prefetch : {0, 1, 8}) {
      auto loader = data.MakeLoader(5, threads, prefetch);
      auto epoch = *loader->StartEpoch(0, 0);
      std::vector<Batch> batches;
      std::vector<int64_t> seen = Drain(*epoch, &batches);
      ASSERT_EQ(seen.size(), 37u) << threads << "/" << prefetch;
      for (int64_t i = 0; i < 37; ++i) EXPECT_EQ(seen[i], i);
      ASSERT_EQ(batches.size(), 8u);
      for (const Batch& batch : batches) {
        for (const SampleOutput& s : batch.samples) {
          EXPECT_EQ(s.sample_key, data.manifest_path() + ":" + std::to_string(s.ref.index + 1));
          ASSERT_EQ(s.images.size(), static_cast<size_t>(s.ref.index % 3));
          for (size_t j = 0; j < s.images.size(); ++j) {
            EXPECT_EQ(s.images[j].width, 4);
            EXPECT_EQ(s.images[j].height, 3);
            EXPECT_EQ(s.images[j].pixels.data()[0], (s.ref.index * 3 + j) % 256);
          }
          EXPECT_NE(s.json.find("sample " + std::to_string(s.ref.index)), std::string::npos);
        }
      }
    }
  }
}

TEST(PipelineTest, EpochsRepeatAndMetricsAccumulate) {
  Dataset data(12);
  auto loader = data.MakeLoader(4, 2, 2);
  for (int epoch = 0; epoch < 2; ++epoch) {
    auto pipeline = *loader->StartEpoch(0, 0);
    EXPECT_EQ(Drain(*pipeline).size(), 12u);
  }
  MetricsSnapshot m = loader->Snapshot();
  EXPECT_EQ(m.samples_delivered, 24);
  EXPECT_EQ(m.batches_delivered, 6);
  EXPECT_EQ(m.stages[0].name, "parse");
  EXPECT_EQ(m.stages[0].items, 24);
  EXPECT_EQ(m.stages[2].name, "decode");
  EXPECT_EQ(m.stages[2].items, 2 * (0 + 1 + 2) * 4);  // 12 samples: 0,1,2 images repeating
  EXPECT_EQ(m.stages[2].bytes, m.stages[2].items * 4 * 3 * 3);
  EXPECT_GT(m.consumer_wall_s, 0);
  EXPECT_LE(m.consumer_wait_s, m.consumer_wall_s + 1e-9);
  EXPECT_GE(m.consumer_max_wait_s, m.consumer_last_wait_s);
  EXPECT_LE(m.consumer_max_wait_s, m.consumer_wait_s + 1e-9);
}

TEST(PipelineTest, RaisePolicyReportsTheFirstFailedSample) {
  Dataset data(20, /*missing=*/{7}, /*corrupt=*/{11});
  auto loader = data.MakeLoader(4, 3, 4);
  auto epoch = *loader->StartEpoch(0, 0);
  Batch batch;
  ASSERT_EQ(*epoch->Next(5s, &batch), NextOutcome::kBatch);  // samples 0-3
  Result<NextOutcome> r = epoch->Next(5s, &batch);            // 4-7: 7 is missing
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  const std::string& msg = r.status().message();
  EXPECT_NE(msg.find("train.jsonl:8"), std::string::npos) << msg;
  EXPECT_NE(msg.find("img/7_0.png"), std::string::npos) << msg;
  EXPECT_NE(msg.find("No such file"), std::string::npos) << msg;
  EXPECT_EQ(batch.failed_sample_key, data.manifest_path() + ":8");
}

TEST(PipelineTest, SkipPolicyReplacesFailuresDeterministically) {
  Dataset data(20, /*missing=*/{1}, /*corrupt=*/{11}, /*bad_json=*/{15});
  std::vector<std::vector<int64_t>> runs;
  for (int threads : {1, 3}) {
    auto loader = data.MakeLoader(4, threads, 2, ErrorPolicy::kSkip);
    auto epoch = *loader->StartEpoch(0, 0);
    std::vector<Batch> batches;
    std::vector<int64_t> seen = Drain(*epoch, &batches);
    ASSERT_EQ(batches.size(), 5u);
    for (const Batch& b : batches) EXPECT_EQ(b.samples.size(), 4u) << "shape is kept";
    for (int64_t bad : {1, 11, 15}) {
      EXPECT_EQ(std::count(seen.begin(), seen.end(), bad), 0) << bad;
    }
    MetricsSnapshot m = loader->Snapshot();
    EXPECT_GE(m.samples_skipped, 3);
    bool saw_missing = false, saw_corrupt = false, saw_json = false;
    for (const SkipRecord& r : m.recent_skips) {
      saw_missing |= r.status.code() == StatusCode::kNotFound;
      saw_corrupt |= r.status.code() == StatusCode::kCorruptImage;
      saw_json |= r.status.code() == StatusCode::kManifestError &&
                  r.sample_key == data.manifest_path() + ":16";
    }
    EXPECT_TRUE(saw_missing && saw_corrupt && saw_json);
    EXPECT_GE(batches[0].skipped.size(), 1u);
    runs.push_back(seen);
  }
  EXPECT_EQ(runs[0], runs[1]) << "replacements do not depend on thread timing";
}

TEST(PipelineTest, ConsecutiveFailuresTurnIntoAnError) {
  std::set<int> all;
  for (int i = 0; i < 12; ++i) all.insert(i);
  Dataset data(12, {}, {}, /*bad_json=*/all);  // storage-wide breakage
  auto loader = data.MakeLoader(3, 2, 2, ErrorPolicy::kSkip, /*max_consecutive=*/2);
  auto epoch = *loader->StartEpoch(0, 0);
  Batch batch;
  Result<NextOutcome> r = epoch->Next(5s, &batch);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kLimitExceeded);
  EXPECT_NE(r.status().message().find("3 consecutive samples failed"), std::string::npos)
      << r.status().message();
}

TEST(PipelineTest, StartsAtAnyBatch) {
  Dataset data(23);
  auto loader = data.MakeLoader(5, 2, 2);
  auto full = *loader->StartEpoch(0, 0);
  std::vector<int64_t> all = Drain(*full);
  for (int64_t start : {0, 1, 3, 4, 5}) {
    auto epoch = *loader->StartEpoch(0, start);
    std::vector<int64_t> rest = Drain(*epoch);
    EXPECT_EQ(rest, std::vector<int64_t>(all.begin() + std::min<int64_t>(start * 5, 23),
                                         all.end()));
  }
  EXPECT_FALSE(loader->StartEpoch(0, 6).ok());
}

TEST(PipelineTest, CloseMidEpochReturnsPromptly) {
  Dataset data(60);
  for (int prefetch : {0, 4}) {
    auto loader = data.MakeLoader(2, 4, prefetch);
    auto epoch = *loader->StartEpoch(0, 0);
    Batch batch;
    ASSERT_EQ(*epoch->Next(5s, &batch), NextOutcome::kBatch);
    const auto start = std::chrono::steady_clock::now();
    epoch->Close();
    EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
    Result<NextOutcome> r = epoch->Next(10ms, &batch);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kCancelled);
  }
}

TEST(PipelineTest, DestroyWithoutConsumingJoinsThreads) {
  Dataset data(30);
  auto loader = data.MakeLoader(3, 4, 8);
  for (int i = 0; i < 5; ++i) {
    auto epoch = *loader->StartEpoch(0, 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(i * 3));
  }  // each destructor closes and joins; a leak would show under the sanitizers
  EXPECT_EQ(loader->pool_stats().outstanding_bytes, 0);
}

TEST(PipelineTest, BadOptionsAreRefused) {
  Dataset data(3);
  LoaderOptions options;
  options.sources = {SourceOptions{"train", {data.manifest_path()}, "", 1, 1, {}}};
  options.plan.batch_size = 0;
  EXPECT_EQ(Loader::Make(options).status().code(), StatusCode::kInvalidArgument);
  options.plan.batch_size = 1;
  options.pipeline.num_threads = 0;
  EXPECT_EQ(Loader::Make(options).status().code(), StatusCode::kInvalidArgument);
  options.pipeline.num_threads = 1;
  options.pipeline.prefetch = -1;
  EXPECT_EQ(Loader::Make(options).status().code(), StatusCode::kInvalidArgument);
}

// ---- Model inputs: two phases, pixels written into the batch tensor -------------------

std::shared_ptr<const SampleProcessor> MakeProcessor(
    int64_t max_length = 0, OverlongPolicy overlong = OverlongPolicy::kTruncate) {
  ModelInputOptions options;
  options.tokenizer = testing::ByteChatTokenizer();
  options.vision = vision::DefaultProcessorConfig(vision::ModelFamily::kQwen2Vl);
  options.text.max_length = max_length;
  options.overlong = overlong;
  options.pad_id = 151643;
  auto processor = SampleProcessor::Make(options);
  EXPECT_TRUE(processor.ok()) << processor.status().ToString();
  return *processor;
}

// The inputs of sample `index` computed alone, outside the pipeline.
struct Alone {
  PreparedSample prepared;
  std::vector<float> pixels;
};

Alone ProcessAlone(const SampleProcessor& p, const Dataset& data, int64_t index) {
  std::ifstream in(data.manifest_path());
  std::string line;
  for (int64_t i = 0; i <= index; ++i) std::getline(in, line);
  Alone out;
  SampleScratch scratch;
  EXPECT_TRUE(p.Prepare(line, data.root(), nullptr, &out.prepared, &scratch, nullptr).ok());
  out.pixels.resize(static_cast<size_t>(out.prepared.num_patches() * p.row_length()));
  EXPECT_TRUE(p.WritePixels(out.prepared, out.pixels, &scratch, nullptr).ok());
  return out;
}

void ExpectBatchMatches(const SampleProcessor& p, const Dataset& data, const Batch& batch) {
  ASSERT_TRUE(batch.has_model);
  const ModelBatch& m = batch.model;
  const int64_t b = static_cast<int64_t>(batch.samples.size());
  ASSERT_EQ(m.input_ids.shape[0], b);
  const int64_t length = m.input_ids.shape[1];
  const auto* ids = static_cast<const int64_t*>(m.input_ids.data);
  const auto* labels = static_cast<const int64_t*>(m.labels.data);
  const auto* mask = static_cast<const int64_t*>(m.attention_mask.data);
  const auto* positions = static_cast<const int64_t*>(m.position_ids.data);
  const auto* grids = static_cast<const int64_t*>(m.image_grid_thw.data);
  const auto* pixels = static_cast<const float*>(m.pixel_values.data);
  int64_t image = 0, row = 0;
  for (int64_t i = 0; i < b; ++i) {
    Alone alone = ProcessAlone(p, data, batch.samples[i].ref.index);
    const auto& t = alone.prepared.text;
    const int64_t n = static_cast<int64_t>(t.input_ids.size());
    ASSERT_LE(n, length);
    for (int64_t k = 0; k < length; ++k) {
      const bool real = k < n;
      EXPECT_EQ(ids[i * length + k], real ? t.input_ids[k] : 151643);
      EXPECT_EQ(labels[i * length + k], real ? t.labels[k] : text::kIgnoreIndex);
      EXPECT_EQ(mask[i * length + k], real ? 1 : 0);
      for (int64_t axis = 0; axis < 3; ++axis) {
        EXPECT_EQ(positions[(axis * b + i) * length + k],
                  real ? t.position_ids[axis * n + k] : kPaddingPositionId);
      }
    }
    for (const vision::ImagePlan& plan : alone.prepared.plans) {
      EXPECT_EQ(grids[image * 3 + 0], plan.grid_t);
      EXPECT_EQ(grids[image * 3 + 1], plan.grid_h);
      EXPECT_EQ(grids[image * 3 + 2], plan.grid_w);
      ++image;
    }
    if (!alone.pixels.empty()) {
      ASSERT_EQ(0, std::memcmp(pixels + row * p.row_length(), alone.pixels.data(),
                               alone.pixels.size() * sizeof(float)));
    }
    row += alone.prepared.num_patches();
  }
  EXPECT_EQ(m.image_grid_thw.shape[0], image);
  EXPECT_EQ(m.pixel_values.shape[0], row);
  EXPECT_EQ(m.pixel_values.shape[1], p.row_length());
}

TEST(PipelineModelTest, BatchesEqualSamplesProcessedAloneForAnyThreadsAndPrefetch) {
  Dataset data(23);
  auto processor = MakeProcessor();
  for (int threads : {1, 2, 4}) {
    for (int prefetch : {0, 3}) {
      auto loader = data.MakeLoader(4, threads, prefetch, ErrorPolicy::kRaise, 16, processor);
      auto epoch = *loader->StartEpoch(0, 0);
      std::vector<Batch> batches;
      std::vector<int64_t> seen = Drain(*epoch, &batches);
      ASSERT_EQ(seen.size(), 23u);
      for (int64_t i = 0; i < 23; ++i) EXPECT_EQ(seen[i], i);
      for (const Batch& batch : batches) ExpectBatchMatches(*processor, data, batch);
      MetricsSnapshot m = loader->Snapshot();
      EXPECT_EQ(m.stages[5].name, "vision");
      EXPECT_EQ(m.stages[5].items, 22);  // (0 + 1 + 2) images per 3 samples, 23 samples
    }
  }
}

// Through an object store the scheduler reads each planned sample's images ahead of
// its worker (read_ahead.h): the same batches, every image read exactly once.
TEST(PipelineModelTest, ImagesReadAheadThroughAStoreGiveTheSameBatches) {
  Dataset data(23);
  auto processor = MakeProcessor();
  for (int threads : {1, 3}) {
    io::ObjectStoreOptions store_options;
    store_options.policy.local_root = data.root();
    auto store = io::ObjectStore::Make(
        store_options, [](const std::string&) -> std::optional<std::string> { return {}; });
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    auto loader = data.MakeLoader(4, threads, 3, ErrorPolicy::kRaise, 16, processor, 0, *store);
    auto epoch = *loader->StartEpoch(0, 0);
    std::vector<Batch> batches;
    std::vector<int64_t> seen = Drain(*epoch, &batches);
    ASSERT_EQ(seen.size(), 23u);
    for (const Batch& batch : batches) ExpectBatchMatches(*processor, data, batch);
    const io::IoMetrics io = (*store)->Metrics();
    EXPECT_EQ(io.reads_ok, 22u);  // (0 + 1 + 2) images per 3 samples, once each
    EXPECT_EQ(io.reads_failed, 0u);
  }
}

TEST(PipelineModelTest, DecodeFailureAfterPlanningRaisesOrIsReplaced) {
  // Sample 6's PNG keeps its header but loses half its body: it plans fine (phase 1)
  // and fails to decode (phase 2), after the batch's pixel_values was laid out.
  Dataset data(14, {}, /*corrupt=*/{5});
  auto processor = MakeProcessor();
  {
    auto loader = data.MakeLoader(3, 2, 2, ErrorPolicy::kRaise, 16, processor);
    auto epoch = *loader->StartEpoch(0, 0);
    Batch batch;
    ASSERT_EQ(*epoch->Next(5s, &batch), NextOutcome::kBatch);
    Result<NextOutcome> r = epoch->Next(5s, &batch);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kCorruptImage) << r.status().ToString();
    EXPECT_NE(r.status().message().find("img/5_0.png"), std::string::npos);
    EXPECT_EQ(batch.failed_sample_key, data.manifest_path() + ":6");
  }
  std::vector<int64_t> first;
  for (int threads : {1, 3}) {
    auto loader = data.MakeLoader(3, threads, 2, ErrorPolicy::kSkip, 16, processor);
    auto epoch = *loader->StartEpoch(0, 0);
    std::vector<Batch> batches;
    std::vector<int64_t> seen = Drain(*epoch, &batches);
    ASSERT_EQ(seen.size(), 14u);
    EXPECT_EQ(std::count(seen.begin(), seen.end(), 5), 0);
    for (const Batch& batch : batches) ExpectBatchMatches(*processor, data, batch);
    EXPECT_EQ(loader->Snapshot().samples_skipped, 1);
    if (first.empty()) first = seen;
    EXPECT_EQ(seen, first) << "the substitute does not depend on thread timing";
  }
}

TEST(PipelineModelTest, OverlongSamplesAreTruncatedOrDropped) {
  Dataset data(12);
  // Every sample renders "<|im_start|>user\n" + images + "sample N" ... ; 40 tokens cut
  // the text of all and the images of those whose runs cross the limit.
  auto truncate = MakeProcessor(40, OverlongPolicy::kTruncate);
  auto loader = data.MakeLoader(4, 2, 2, ErrorPolicy::kRaise, 16, truncate);
  auto epoch = *loader->StartEpoch(0, 0);
  std::vector<Batch> batches;
  ASSERT_EQ(Drain(*epoch, &batches).size(), 12u);
  for (const Batch& batch : batches) {
    EXPECT_LE(batch.model.input_ids.shape[1], 40);
    ExpectBatchMatches(*truncate, data, batch);
  }
  EXPECT_EQ(loader->Snapshot().samples_truncated, 12);

  // Samples with two images (i % 3 == 2) are the long ones: dropping replaces them.
  Alone one = ProcessAlone(*MakeProcessor(), data, 1);
  Alone two = ProcessAlone(*MakeProcessor(), data, 2);
  const int64_t limit = static_cast<int64_t>(one.prepared.text.input_ids.size()) + 2;
  ASSERT_GT(static_cast<int64_t>(two.prepared.text.input_ids.size()), limit);
  auto drop = MakeProcessor(limit, OverlongPolicy::kDrop);
  loader = data.MakeLoader(4, 2, 2, ErrorPolicy::kRaise, 16, drop);
  epoch = *loader->StartEpoch(0, 0);
  batches.clear();
  std::vector<int64_t> seen = Drain(*epoch, &batches);
  ASSERT_EQ(seen.size(), 12u);
  for (int64_t index : seen) EXPECT_NE(index % 3, 2) << index;
  for (const Batch& batch : batches) ExpectBatchMatches(*drop, data, batch);
  EXPECT_GE(loader->Snapshot().samples_dropped_overlong, 4);
  EXPECT_EQ(loader->Snapshot().samples_skipped, 0) << "a drop is not a failure";
}

TEST(PipelineModelTest, PrefetchByteBudgetBoundsTheHeldPixels) {
  Dataset data(48);
  auto processor = MakeProcessor();
  // A slow trainer: the engine runs ahead as far as prefetch (8 batches) and the byte
  // budget let it. Returns (peak pool bytes out while the trainer holds no batch,
  // largest batch's pixel bytes).
  auto run = [&](int64_t budget) {
    auto loader = data.MakeLoader(4, 2, 8, ErrorPolicy::kRaise, 16, processor, budget);
    auto epoch = *loader->StartEpoch(0, 0);
    int64_t peak = 0, largest = 0, delivered = 0;
    while (true) {
      Batch batch;
      Result<NextOutcome> r = epoch->Next(5s, &batch);
      EXPECT_TRUE(r.ok()) << r.status().ToString();
      if (!r.ok() || *r == NextOutcome::kEnd) break;
      ExpectBatchMatches(*processor, data, batch);
      largest = std::max(largest, batch.model.pixel_values.num_bytes());
      delivered += static_cast<int64_t>(batch.samples.size());
      batch = Batch{};  // the trainer lets go of it
      std::this_thread::sleep_for(15ms);
      peak = std::max(peak, loader->pool_stats().outstanding_bytes);
    }
    EXPECT_EQ(delivered, 48);
    return std::pair{peak, largest};
  };
  const auto [free_peak, largest] = run(0);
  const int64_t budget = largest + largest / 2;
  const auto [bounded_peak, unused] = run(budget);
  // Held: at most the budget, plus the next batch due (always allowed), plus pool
  // rounding (size classes waste under 25%) and the small token tensors.
  EXPECT_LE(bounded_peak, (budget + largest) * 5 / 4 + (64 << 10));
  EXPECT_GT(free_peak, bounded_peak) << "the budget held the engine back";
  // A budget below one batch still lets every batch through, one at a time.
  EXPECT_GT(run(1).second, 0);
}

TEST(PipelineModelTest, CloseMidEpochJoinsAndReturnsMemory) {
  Dataset data(40);
  auto processor = MakeProcessor();
  auto loader = data.MakeLoader(2, 4, 4, ErrorPolicy::kRaise, 16, processor);
  for (int i = 0; i < 4; ++i) {
    auto epoch = *loader->StartEpoch(0, 0);
    if (i % 2) {
      Batch batch;
      ASSERT_EQ(*epoch->Next(5s, &batch), NextOutcome::kBatch);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(i * 2));
  }
  EXPECT_EQ(loader->pool_stats().outstanding_bytes, 0);
}

}  // namespace
}  // namespace stoker::pipeline
