#include "stoker/pipeline/loader.h"

namespace stoker::pipeline {

Result<std::unique_ptr<Loader>> Loader::Make(const LoaderOptions& options) {
  LoaderOptions resolved = options;
  if (resolved.image_root.empty()) {
    const auto slash = resolved.manifest_path.find_last_of('/');
    resolved.image_root =
        slash == std::string::npos ? "." : resolved.manifest_path.substr(0, slash + 1);
  }
  resolved.pipeline.image_root = resolved.image_root;
  // Refuse bad options now rather than at the first epoch.
  STOKER_RETURN_NOT_OK(ValidateOptions(resolved.pipeline));
  STOKER_ASSIGN_OR_RETURN(auto manifest, manifest::JsonlFile::Open(resolved.manifest_path));
  return std::unique_ptr<Loader>(new Loader(std::move(resolved), std::move(manifest)));
}

Result<std::unique_ptr<Pipeline>> Loader::StartEpoch() {
  return Pipeline::Make(manifest_, options_.pipeline, metrics_, pool_);
}

int64_t Loader::num_batches() const {
  auto plan = plan::BatchPlan::Make(manifest_->num_samples(), options_.pipeline.batch_size,
                                    options_.pipeline.drop_last);
  return plan.ok() ? plan->num_batches() : 0;
}

}  // namespace stoker::pipeline
