#include "stoker/pipeline/pipeline.h"

#include <gtest/gtest.h>
#include <png.h>

#include <chrono>
#include <set>

#include "stoker/pipeline/loader.h"
#include "test_images.h"

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

  std::unique_ptr<Loader> MakeLoader(int64_t batch_size, int threads, int prefetch,
                                     ErrorPolicy policy = ErrorPolicy::kRaise,
                                     int64_t max_consecutive = 16) const {
    LoaderOptions options;
    options.sources = {SourceOptions{"train", {manifest_path()}, "", 1, 1}};
    options.plan.batch_size = batch_size;
    options.pipeline.num_threads = threads;
    options.pipeline.prefetch = prefetch;
    options.pipeline.on_error = policy;
    options.pipeline.max_consecutive_errors = max_consecutive;
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
  options.sources = {SourceOptions{"train", {data.manifest_path()}, "", 1, 1}};
  options.plan.batch_size = 0;
  EXPECT_EQ(Loader::Make(options).status().code(), StatusCode::kInvalidArgument);
  options.plan.batch_size = 1;
  options.pipeline.num_threads = 0;
  EXPECT_EQ(Loader::Make(options).status().code(), StatusCode::kInvalidArgument);
  options.pipeline.num_threads = 1;
  options.pipeline.prefetch = -1;
  EXPECT_EQ(Loader::Make(options).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace stoker::pipeline
