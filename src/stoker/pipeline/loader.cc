#include "stoker/pipeline/loader.h"

namespace stoker::pipeline {

Result<std::unique_ptr<Loader>> Loader::Make(const LoaderOptions& options) {
  // Refuse bad options now rather than at the first epoch.
  STOKER_RETURN_NOT_OK(ValidateOptions(options.pipeline));
  if (options.sources.empty()) return status::InvalidArgument("no sources given");
  LoaderOptions resolved = options;
  // Check the order options before opening (and indexing) any manifest.
  resolved.plan.sources.clear();
  for (const SourceOptions& s : options.sources) {
    resolved.plan.sources.push_back({1, s.weight, s.repeat});
  }
  STOKER_RETURN_NOT_OK(plan::ValidatePlanOptions(resolved.plan));
  std::vector<std::shared_ptr<const manifest::Source>> sources;
  resolved.plan.sources.clear();
  for (SourceOptions& s : resolved.sources) {
    if (s.image_root.empty() && !s.paths.empty()) {
      const std::string& first = s.paths.front();
      const auto slash = first.find_last_of('/');
      s.image_root = slash == std::string::npos ? "." : first.substr(0, slash + 1);
    }
    STOKER_ASSIGN_OR_RETURN(auto source,
                            manifest::Source::Open(s.name, s.paths, s.image_root, options.open,
                                                   s.display_paths));
    resolved.plan.sources.push_back({source->num_samples(), s.weight, s.repeat});
    sources.push_back(std::move(source));
  }
  // Validates the order-related options (weights, ranks, policy) once.
  STOKER_RETURN_NOT_OK(plan::EpochPlan::Make(resolved.plan, 0).status());
  return std::unique_ptr<Loader>(new Loader(std::move(resolved), std::move(sources)));
}

Result<plan::EpochPlan> Loader::Plan(int64_t epoch) const {
  return plan::EpochPlan::Make(options_.plan, epoch);
}

Result<std::unique_ptr<Pipeline>> Loader::StartEpoch(int64_t epoch, int64_t start_batch) {
  STOKER_ASSIGN_OR_RETURN(plan::EpochPlan plan, Plan(epoch));
  return Pipeline::Make(sources_, std::move(plan), start_batch, options_.pipeline, metrics_,
                        pool_);
}

}  // namespace stoker::pipeline
