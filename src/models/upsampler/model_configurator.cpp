#include "models/upsampler/model_configurator.h"

#include "core/error.h"

namespace ltx::models::upsampler {

using nlohmann::json;

std::pair<int64_t, int64_t> rational_for_scale(double scale) {
  if (scale == 0.75) return {3, 4};
  if (scale == 1.5) return {3, 2};
  if (scale == 2.0) return {2, 1};
  if (scale == 4.0) return {4, 1};
  fail("latent upsampler: unsupported rational spatial_scale ", scale,
       " (choose 0.75, 1.5, 2.0 or 4.0)");
}

LatentUpsamplerConfig upsampler_config_from_json(const json& cfg, const std::string& where_) {
  const std::string where = where_ + " (config)";
  LTX_CHECK(cfg.is_object(), where, ": must be an object");
  LatentUpsamplerConfig c;
  auto has = [&](const char* k) { return cfg.contains(k) && !cfg[k].is_null(); };
  auto integer = [&](const char* k, int64_t d) -> int64_t {
    if (!has(k)) return c.defaulted.push_back(k), d;
    LTX_CHECK(cfg[k].is_number_integer(), where, ": '", k, "' must be an integer, got ",
              cfg[k].dump());
    return cfg[k].get<int64_t>();
  };
  auto boolean = [&](const char* k, bool d) -> bool {
    if (!has(k)) return c.defaulted.push_back(k), d;
    LTX_CHECK(cfg[k].is_boolean(), where, ": '", k, "' must be true or false, got ",
              cfg[k].dump());
    return cfg[k].get<bool>();
  };
  if (has("_class_name")) {
    LTX_CHECK(cfg["_class_name"].is_string() &&
                  cfg["_class_name"].get<std::string>() == "LatentUpsampler",
              where, ": _class_name ", cfg["_class_name"].dump(),
              " is not a LatentUpsampler (wrong file?)");
  }
  c.in_channels = integer("in_channels", 128);
  c.mid_channels = integer("mid_channels", 512);
  c.num_blocks_per_stage = integer("num_blocks_per_stage", 4);
  c.dims = integer("dims", 3);
  c.spatial_upsample = boolean("spatial_upsample", true);
  c.temporal_upsample = boolean("temporal_upsample", false);
  if (has("spatial_scale")) {
    LTX_CHECK(cfg["spatial_scale"].is_number(), where, ": 'spatial_scale' must be a number, got ",
              cfg["spatial_scale"].dump());
    c.spatial_scale = cfg["spatial_scale"].get<double>();
  } else {
    c.defaulted.push_back("spatial_scale");
  }
  c.rational_resampler = boolean("rational_resampler", false);

  LTX_CHECK(c.in_channels >= 1 && c.num_blocks_per_stage >= 0, where,
            ": in_channels must be positive and num_blocks_per_stage non-negative");
  LTX_CHECK(c.mid_channels >= 32 && c.mid_channels % 32 == 0, where, ": mid_channels (",
            c.mid_channels, ") must be a multiple of 32 (GroupNorm(32))");
  LTX_CHECK(c.dims == 2 || c.dims == 3, where, ": dims must be 2 or 3, got ", c.dims);
  LTX_CHECK(c.spatial_upsample || c.temporal_upsample, where,
            ": either spatial_upsample or temporal_upsample must be true");
  LTX_CHECK(!(c.temporal_upsample && c.dims == 2), where,
            ": temporal upsampling needs dims 3 (the reference's 3-D upsampler conv cannot run "
            "on per-frame 2-D tensors)");
  if (c.spatial_upsample && !c.temporal_upsample && c.rational_resampler)
    (void)rational_for_scale(c.spatial_scale);
  return c;
}

LatentUpsamplerConfig upsampler_config_from_metadata(const json& metadata,
                                                    const std::string& where) {
  LTX_CHECK(metadata.is_object() && metadata.contains("config") && metadata["config"].is_object(),
            where, ": no 'config' metadata (a latent upsampler file needs its flat config)");
  return upsampler_config_from_json(metadata["config"], where);
}

}  // namespace ltx::models::upsampler
