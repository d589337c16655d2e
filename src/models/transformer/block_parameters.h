#pragma once
// Every tensor one BasicAVTransformerBlock holds, visited in a fixed order: what block streaming
// (models/block_streaming.h) packs into a block's host buffer and points at a device slot.
#include "models/block_streaming.h"
#include "models/transformer/transformer.h"

namespace ltx::models::transformer {

void for_each_block_tensor(BasicAVTransformerBlock& block, const TensorVisitFn& fn);

}  // namespace ltx::models::transformer
