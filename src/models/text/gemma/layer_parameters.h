#pragma once
// Every tensor one Gemma decoder layer holds, visited in a fixed order: what block streaming
// (models/block_streaming.h) packs into a layer's host buffer and points at a device slot.
#include "models/block_streaming.h"
#include "models/text/gemma/model.h"

namespace ltx::text {

void for_each_layer_tensor(GemmaDecoderLayer& layer, const models::TensorVisitFn& fn);

}  // namespace ltx::text
