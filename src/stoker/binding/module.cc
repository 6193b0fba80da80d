// The Python binding (this folder is the only code that includes nanobind): the
// module definition, the loader and the codec. Later components bind their functions
// in their own file here and are registered from NB_MODULE below.
//
// Every call that does work releases the GIL. Arrays leave as DLPack tensors (NumPy
// or torch) that view engine memory; the capsule owner keeps that memory alive and
// returns it to the buffer pool when Python drops the array. Status errors become
// Python exceptions in one place (TranslateStatus), through stoker.errors.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "stoker/codec/image_decoder.h"
#include "stoker/core/buffer_pool.h"
#include "stoker/core/status.h"
#include "stoker/core/tensor.h"
#include "stoker/binding/binding_util.h"
#include "stoker/io/object_store.h"
#include "stoker/pipeline/loader.h"
#include "stoker/plan/epoch_plan.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace stoker::binding {

void RegisterVision(nb::module_& m);  // vision_binding.cc
void RegisterText(nb::module_& m);  // text_binding.cc
void RegisterModelInputs(nb::module_& m);  // model_inputs_binding.cc
void RegisterIO(nb::module_& m);  // io_binding.cc

namespace {

TensorView ImageView(codec::DecodedImage&& image) {
  auto buffer = std::make_shared<Buffer>(std::move(image.pixels));
  TensorView view;
  view.data = buffer->data();
  view.dtype = DType::kUInt8;
  view.ndim = 3;
  view.shape = {image.height, image.width, 3, 0};
  view.owner = std::move(buffer);
  return view;
}

// Pixels of images decoded by stoker.codec.decode come from here.
std::shared_ptr<BufferPool>& DecodePool() {
  static auto pool = BufferPool::Make(size_t{64} << 20);
  return pool;
}

nb::object Decode(nb::bytes data, int64_t max_pixels) {
  codec::DecodeOptions options;
  options.max_pixels = max_pixels;
  Result<codec::DecodedImage> image = status::Internal("unreachable");
  {
    nb::gil_scoped_release release;  // `data` stays referenced by the caller's frame
    image = codec::DecodeImage(BytesSpan(data), options, *DecodePool());
  }
  return ExportTensor(ImageView(Unwrap(std::move(image))), Framework::kNumpy);
}

nb::tuple Probe(nb::bytes data) {
  codec::ImageInfo info = Unwrap(codec::ProbeImage(BytesSpan(data)));
  return nb::make_tuple(std::string(codec::ImageFormatName(info.format)), info.width,
                        info.height);
}

// One epoch. next() waits in slices so Ctrl-C reaches Python within ~0.1 s.
class Epoch {
 public:
  Epoch(std::unique_ptr<pipeline::Pipeline> pipeline, Framework framework)
      : pipeline_(std::move(pipeline)), framework_(framework) {}

  // (batch dict, skipped list); None at the end of the epoch. (None, skipped list)
  // reports samples skipped with no batch to carry them (after the last batch, or
  // before an error): the caller logs them and calls again, which gives the end or
  // raises the error.
  nb::object Next() {
    if (!pipeline_) Throw(status::Cancelled("this epoch is closed"));
    if (pending_error_) {
      auto [status, key] = std::move(*pending_error_);
      pending_error_.reset();
      Throw(status, std::move(key));
    }
    constexpr std::chrono::milliseconds kInterruptCheck(100);
    pipeline::Batch batch;
    while (true) {
      Result<pipeline::NextOutcome> outcome = status::Internal("unreachable");
      {
        nb::gil_scoped_release release;
        outcome = pipeline_->Next(kInterruptCheck, &batch);
      }
      if (!outcome.ok()) {
        if (batch.skipped.empty()) Throw(outcome.status(), batch.failed_sample_key);
        pending_error_.emplace(outcome.status(), std::move(batch.failed_sample_key));
        return nb::make_tuple(nb::none(), SkippedToPython(batch.skipped));
      }
      if (*outcome == pipeline::NextOutcome::kEnd) {
        if (batch.skipped.empty()) return nb::none();
        return nb::make_tuple(nb::none(), SkippedToPython(batch.skipped));
      }
      if (*outcome == pipeline::NextOutcome::kBatch) break;
      if (PyErr_CheckSignals() != 0) throw nb::python_error();
    }
    return ToPython(std::move(batch));
  }

  void Close() {
    if (pipeline_) {
      nb::gil_scoped_release release;
      pipeline_->Close();
    }
    // Destroy outside the GIL-free block: nothing in it touches Python.
    pipeline_.reset();
  }

  bool closed() const { return pipeline_ == nullptr; }

 private:
  nb::object ToPython(pipeline::Batch&& batch) {
    if (batch.has_model) return ModelBatchToPython(std::move(batch));
    nb::list keys, samples, images;
    for (pipeline::SampleOutput& sample : batch.samples) {
      keys.append(sample.sample_key);
      samples.append(sample.json);
      nb::list sample_images;
      for (codec::DecodedImage& image : sample.images) {
        sample_images.append(ExportTensor(ImageView(std::move(image)), framework_));
      }
      images.append(sample_images);
    }
    nb::dict out;
    out["batch_index"] = batch.index;
    out["sample_keys"] = keys;
    out["samples"] = samples;
    out["images"] = images;
    return nb::make_tuple(out, SkippedToPython(batch.skipped));
  }

  nb::object ModelBatchToPython(pipeline::Batch&& batch) {
    nb::list keys, samples;
    for (pipeline::SampleOutput& sample : batch.samples) {
      keys.append(sample.sample_key);
      samples.append(sample.json);
    }
    pipeline::ModelBatch& model = batch.model;
    nb::dict out;
    out["batch_index"] = batch.index;
    out["sample_keys"] = keys;
    out["samples"] = samples;
    out["input_ids"] = ExportTensor(std::move(model.input_ids), framework_);
    out["labels"] = ExportTensor(std::move(model.labels), framework_);
    out["attention_mask"] = ExportTensor(std::move(model.attention_mask), framework_);
    out["position_ids"] = ExportTensor(std::move(model.position_ids), framework_);
    out["pixel_values"] = ExportTensor(std::move(model.pixel_values), framework_);
    out["image_grid_thw"] = ExportTensor(std::move(model.image_grid_thw), framework_);
    return nb::make_tuple(out, SkippedToPython(batch.skipped));
  }

  // [(sample key, status code name, message), ...]
  static nb::list SkippedToPython(const std::vector<pipeline::SkipRecord>& records) {
    nb::list skipped;
    for (const pipeline::SkipRecord& record : records) {
      skipped.append(nb::make_tuple(record.sample_key,
                                    std::string(StatusCodeName(record.status.code())),
                                    record.status.message()));
    }
    return skipped;
  }

  std::unique_ptr<pipeline::Pipeline> pipeline_;
  Framework framework_;
  // An error held back while the samples skipped before it are reported.
  std::optional<std::pair<Status, std::string>> pending_error_;
};

nb::dict StatsToPython(const pipeline::Loader& loader) {
  const pipeline::MetricsSnapshot s = loader.Snapshot();
  nb::dict stages;
  for (const pipeline::StageSnapshot& stage : s.stages) {
    nb::dict d;
    d["busy_s"] = stage.busy_s;
    d["items"] = stage.items;
    d["bytes"] = stage.bytes;
    stages[stage.name.c_str()] = d;
  }
  nb::dict consumer;
  consumer["batches"] = s.batches_delivered;
  consumer["wait_s"] = s.consumer_wait_s;
  consumer["wall_s"] = s.consumer_wall_s;
  consumer["last_wait_s"] = s.consumer_last_wait_s;
  consumer["max_wait_s"] = s.consumer_max_wait_s;
  consumer["wait_ratio"] = s.consumer_wall_s > 0 ? s.consumer_wait_s / s.consumer_wall_s : 0.0;
  nb::dict samples;
  samples["delivered"] = s.samples_delivered;
  samples["skipped"] = s.samples_skipped;
  samples["truncated"] = s.samples_truncated;
  samples["dropped_overlong"] = s.samples_dropped_overlong;
  nb::list skips;
  for (const pipeline::SkipRecord& record : s.recent_skips) {
    nb::dict d;
    d["sample_key"] = record.sample_key;
    d["error"] = std::string(StatusCodeName(record.status.code()));
    d["message"] = record.status.message();
    skips.append(d);
  }
  const BufferPoolStats pool = loader.pool_stats();
  nb::dict pool_dict;
  pool_dict["acquired"] = pool.acquired;
  pool_dict["reused"] = pool.reused;
  pool_dict["cached_bytes"] = pool.cached_bytes;
  pool_dict["outstanding_bytes"] = pool.outstanding_bytes;
  nb::dict out;
  out["stages"] = stages;
  out["consumer"] = consumer;
  out["samples"] = samples;
  out["recent_skips"] = skips;
  out["buffer_pool"] = pool_dict;
  if (loader.options().pipeline.store) {
    out["io"] = IoMetricsToPython(loader.options().pipeline.store->Metrics());
  }
  return out;
}

// (name, manifest paths, image root, integer weight, repeat, display paths) per source.
using SourceTuple = std::tuple<std::string, std::vector<std::string>, std::string, uint64_t,
                               int64_t, std::vector<std::string>>;

plan::EpochPolicy ParsePolicy(const std::string& name) {
  if (name == "first_exhausted") return plan::EpochPolicy::kFirstExhausted;
  if (name == "samples") return plan::EpochPolicy::kFixedSamples;
  if (name == "repeat") return plan::EpochPolicy::kRepeat;
  Throw(status::InvalidArgument(
      "epoch_policy must be 'first_exhausted', 'samples' or 'repeat', got '", name, "'"));
}

std::unique_ptr<pipeline::Loader> MakeLoader(
    const std::vector<SourceTuple>& sources, int64_t batch_size, uint64_t seed, bool shuffle,
    const std::string& epoch_policy, int64_t samples_per_epoch, int world_size, int rank,
    bool drop_last, int num_threads, int prefetch, const std::string& on_error,
    int64_t max_consecutive_errors, int64_t max_image_pixels, int64_t buffer_pool_bytes,
    const std::string& index_cache_dir, nb::object model_inputs, int64_t max_prefetch_bytes,
    nb::object storage) {
  pipeline::LoaderOptions options;
  for (const auto& [name, paths, image_root, weight, repeat, display] : sources) {
    options.sources.push_back({name, paths, image_root, weight, repeat, display});
  }
  options.plan.batch_size = batch_size;
  options.plan.seed = seed;
  options.plan.shuffle = shuffle;
  options.plan.policy = ParsePolicy(epoch_policy);
  options.plan.samples_per_epoch = samples_per_epoch;
  options.plan.world_size = world_size;
  options.plan.rank = rank;
  options.plan.drop_last = drop_last;
  options.pipeline.num_threads = num_threads;
  options.pipeline.prefetch = prefetch;
  if (on_error == "raise") {
    options.pipeline.on_error = pipeline::ErrorPolicy::kRaise;
  } else if (on_error == "skip") {
    options.pipeline.on_error = pipeline::ErrorPolicy::kSkip;
  } else {
    Throw(status::InvalidArgument("on_error must be 'raise' or 'skip', got '", on_error, "'"));
  }
  options.pipeline.max_consecutive_errors = max_consecutive_errors;
  options.pipeline.max_image_pixels = max_image_pixels;
  if (buffer_pool_bytes < 0) Throw(status::InvalidArgument("buffer_pool_bytes must be >= 0"));
  options.buffer_pool_bytes = static_cast<size_t>(buffer_pool_bytes);
  options.open.index_cache_dir = index_cache_dir;
  if (!model_inputs.is_none()) options.pipeline.model = ModelInputsFromPython(model_inputs);
  options.pipeline.max_prefetch_bytes = max_prefetch_bytes;
  if (!storage.is_none()) options.pipeline.store = StoreFromPython(storage);
  Result<std::unique_ptr<pipeline::Loader>> loader = status::Internal("unreachable");
  {
    nb::gil_scoped_release release;  // indexing a large manifest takes a while
    loader = pipeline::Loader::Make(options);
  }
  return Unwrap(std::move(loader));
}

nb::dict PlanInfo(const pipeline::Loader& self, int64_t epoch) {
  plan::EpochPlan plan = Unwrap(self.Plan(epoch));
  nb::dict d;
  d["num_batches"] = plan.num_batches();
  d["epoch_samples"] = plan.epoch_samples();
  d["global_batch_size"] = plan.global_batch_size();
  d["dropped_tail"] = plan.dropped_tail();
  return d;
}

// The sample keys of this rank's batch (or, with global_batch, of every rank's part of
// it), from the plan alone: nothing is read but the index.
nb::list PlanKeys(const pipeline::Loader& self, int64_t epoch, int64_t batch,
                  bool global_batch) {
  plan::EpochPlan plan = Unwrap(self.Plan(epoch));
  if (batch < 0 || batch >= plan.num_batches()) {
    Throw(status::InvalidArgument("batch ", std::to_string(batch), " is outside epoch ",
                                  std::to_string(epoch), "'s ",
                                  std::to_string(plan.num_batches()), " batches"));
  }
  std::vector<plan::SampleRef> refs;
  if (global_batch) {
    plan.GlobalBatch(batch, &refs);
  } else {
    plan.RankBatch(batch, &refs);
  }
  nb::list keys;
  for (const plan::SampleRef& ref : refs) {
    keys.append(self.sources()[ref.source]->SampleKey(ref.index));
  }
  return keys;
}

nb::list SourceInfo(const pipeline::Loader& self) {
  nb::list out;
  for (const auto& source : self.sources()) {
    nb::list files;
    for (const auto& file : source->files()) {
      files.append(nb::make_tuple(file->display_path(), file->size_bytes(), file->num_samples(),
                                  file->index_from_cache()));
    }
    nb::dict d;
    d["name"] = source->name();
    d["num_samples"] = source->num_samples();
    d["image_root"] = source->image_root();
    d["files"] = files;
    out.append(d);
  }
  return out;
}

}  // namespace
}  // namespace stoker::binding

using namespace stoker;           // NOLINT: module definition only
using namespace stoker::binding;  // NOLINT

NB_MODULE(_stoker, m) {
  m.doc() = "Stoker's native engine. Use the `stoker` package, not this module.";
  nb::register_exception_translator(TranslateStatus);
  // Component registrations (one Register*(m) call per binding file) go here.
  RegisterVision(m);
  RegisterText(m);
  RegisterModelInputs(m);
  RegisterIO(m);

  m.attr("DEFAULT_MAX_IMAGE_PIXELS") = codec::kDefaultMaxImagePixels;
  m.def("decode", &Decode, "data"_a, "max_pixels"_a = codec::kDefaultMaxImagePixels);
  m.def("probe", &Probe, "data"_a);

  nb::class_<Epoch>(m, "Epoch", nb::is_weak_referenceable())
      .def("next", &Epoch::Next)
      .def("close", &Epoch::Close)
      .def_prop_ro("closed", &Epoch::closed);

  nb::class_<pipeline::Loader>(m, "Loader")
      .def(nb::new_(&MakeLoader), "sources"_a, "batch_size"_a, "seed"_a, "shuffle"_a,
           "epoch_policy"_a, "samples_per_epoch"_a, "world_size"_a, "rank"_a,
           "drop_last"_a, "num_threads"_a, "prefetch"_a, "on_error"_a,
           "max_consecutive_errors"_a, "max_image_pixels"_a, "buffer_pool_bytes"_a,
           "index_cache_dir"_a, "model_inputs"_a = nb::none(), "max_prefetch_bytes"_a = 0,
           "storage"_a = nb::none())
      .def(
          "start_epoch",
          [](pipeline::Loader& self, int64_t epoch, int64_t start_batch,
             const std::string& output) {
            const Framework framework = ParseFramework(output);
            Result<std::unique_ptr<pipeline::Pipeline>> run = status::Internal("unreachable");
            {
              nb::gil_scoped_release release;
              run = self.StartEpoch(epoch, start_batch);
            }
            return std::make_unique<Epoch>(Unwrap(std::move(run)), framework);
          },
          "epoch"_a, "start_batch"_a, "output"_a)
      .def("plan_info", &PlanInfo, "epoch"_a)
      .def("plan_keys", &PlanKeys, "epoch"_a, "batch"_a, "global_batch"_a = false)
      .def("source_info", &SourceInfo)
      .def("stats", &StatsToPython);
}
