#include "stoker/pipeline/sample_processor.h"

#include "stoker/io/local_file.h"
#include "stoker/io/object_store.h"
#include "stoker/pipeline/metrics.h"
#include "stoker/pipeline/read_ahead.h"

namespace stoker::pipeline {

int64_t PreparedSample::num_patches() const {
  int64_t n = 0;
  for (const vision::ImagePlan& plan : plans) n += plan.num_patches();
  return n;
}

void PreparedSample::Clear() {
  image_bytes.clear();
  image_refs.clear();
  plans.clear();
  text = {};
  dropped = false;
}

SampleScratch::SampleScratch() : session(std::make_unique<text::TokenizerSession>()) {}
SampleScratch::~SampleScratch() = default;
SampleScratch::SampleScratch(SampleScratch&&) noexcept = default;

Result<std::shared_ptr<const SampleProcessor>> SampleProcessor::Make(
    ModelInputOptions options) {
  if (!options.tokenizer) return status::InvalidArgument("model inputs need a tokenizer");
  if (options.text.max_length < 0) {
    return status::InvalidArgument("max_length must be >= 0, got ",
                                   std::to_string(options.text.max_length));
  }
  STOKER_ASSIGN_OR_RETURN(vision::ImageProcessor processor,
                          vision::ImageProcessor::Make(options.vision));
  // Under kDrop the sample is encoded whole and measured against max_length.
  text::SampleEncodeOptions encode = options.text;
  if (options.overlong == OverlongPolicy::kDrop) encode.max_length = 0;
  return std::shared_ptr<const SampleProcessor>(
      new SampleProcessor(std::move(options), std::move(processor), std::move(encode)));
}

Status ReadImage(const std::string& image_root, const std::string& ref,
                 io::ObjectStore* store, io::Body* out, ImageReads* ahead, size_t index) {
  const std::string context = "image '" + ref + "'";
  Status taken;
  if (ahead != nullptr && ahead->Take(index, ref, out, &taken)) {
    return taken.WithContext(context);
  }
  const std::string location = io::ResolvePath(image_root, ref);
  if (store != nullptr) {
    return store->Read(location, {}, out).WithContext(context);
  }
  if (location.find("://") != std::string::npos) {
    return status::InvalidArgument(
        context, ": '", location.substr(0, location.find("://") + 3),
        "...' is an object-store URI; give the Loader storage=stoker.io.ObjectStore(...) "
        "to read it");
  }
  return io::ReadFile(location, out).WithContext(context);
}

Status SampleProcessor::Prepare(std::string_view line, const std::string& image_root,
                                io::ObjectStore* store, PreparedSample* out,
                                SampleScratch* scratch, Metrics* metrics,
                                ImageReads* ahead) const {
  out->Clear();
  auto t0 = Clock::now();
  Status parsed = scratch->parser.Parse(line, &scratch->conversation);
  if (metrics) metrics->parse.Add(NanosSince(t0), 1, static_cast<int64_t>(line.size()));
  STOKER_RETURN_NOT_OK(parsed);
  const text::Conversation& conv = scratch->conversation;

  // Read every image and plan it from its header: the grid (hence the number of
  // placeholder tokens and of pixel_values rows) is known without decoding.
  const size_t n_images = conv.images.size();
  out->image_bytes.resize(n_images);
  out->plans.resize(n_images);
  out->image_refs = conv.images;
  scratch->grids.resize(n_images);
  for (size_t i = 0; i < n_images; ++i) {
    const std::string& ref = conv.images[i];
    t0 = Clock::now();
    Status read = ReadImage(image_root, ref, store, &out->image_bytes[i], ahead, i);
    if (metrics) {
      metrics->read.Add(NanosSince(t0), 1, static_cast<int64_t>(out->image_bytes[i].size()));
    }
    STOKER_RETURN_NOT_OK(read);
    t0 = Clock::now();
    Result<vision::ImagePlan> plan =
        vision::PlanEncodedImage(processor_, out->image_bytes[i], options_.image);
    if (metrics) metrics->probe.Add(NanosSince(t0), 1, 0);
    if (!plan.ok()) {
      const std::string location = io::ResolvePath(image_root, ref);
      return plan.status().WithContext("image '" + ref + "'" +
                                       (location == ref ? "" : " (" + location + ")"));
    }
    out->plans[i] = *plan;
    scratch->grids[i] = {plan->grid_t, plan->grid_h, plan->grid_w};
  }

  // Template, tokens, labels, position ids. Under kDrop the sample is encoded whole and
  // measured; under kTruncate the encoder cuts it (before any image it would split).
  t0 = Clock::now();
  Result<text::EncodedSample> encoded = text::EncodeSample(
      *options_.tokenizer, scratch->session.get(), conv, scratch->grids, encode_options_);
  if (!encoded.ok()) return encoded.status();
  out->text = std::move(*encoded);
  if (metrics) {
    metrics->text.Add(NanosSince(t0), 1, static_cast<int64_t>(out->text.input_ids.size()));
  }
  if (options_.overlong == OverlongPolicy::kDrop && options_.text.max_length > 0 &&
      static_cast<int64_t>(out->text.input_ids.size()) > options_.text.max_length) {
    out->dropped = true;
    return Status::OK();
  }
  // Images cut off by truncation contribute no pixels.
  const size_t kept = static_cast<size_t>(out->text.num_images);
  out->image_bytes.resize(kept);
  out->plans.resize(kept);
  out->image_refs.resize(kept);
  return Status::OK();
}

Status SampleProcessor::WritePixels(const PreparedSample& sample, std::span<float> out,
                                    SampleScratch* scratch, Metrics* metrics) const {
  const int64_t row = row_length();
  if (static_cast<int64_t>(out.size()) != sample.num_patches() * row) {
    return status::InvalidArgument("pixel_values span has ", std::to_string(out.size()),
                                   " floats, the sample needs ",
                                   std::to_string(sample.num_patches() * row));
  }
  size_t offset = 0;
  for (size_t i = 0; i < sample.plans.size(); ++i) {
    const vision::ImagePlan& plan = sample.plans[i];
    const size_t n = static_cast<size_t>(plan.num_patches() * row);
    const auto t0 = Clock::now();
    Status st = vision::RunEncodedImage(processor_, plan, sample.image_bytes[i],
                                        options_.image, out.subspan(offset, n),
                                        scratch->vision);
    if (metrics) {
      metrics->vision.Add(NanosSince(t0), 1, static_cast<int64_t>(n * sizeof(float)));
    }
    STOKER_RETURN_NOT_OK(st.WithContext("image '" + sample.image_refs[i] + "'"));
    offset += n;
  }
  return Status::OK();
}

}  // namespace stoker::pipeline
